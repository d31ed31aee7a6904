// Package docs holds irqpilot's user documentation. The plan file's page is
// compiled into the binary so that `irqpilot man` renders irqpilot-plan(5)
// from this one source, and the page and the manual never disagree.
package docs

import _ "embed"

// PlanFormat is plan-format.md: the plan file format.
//
//go:embed plan-format.md
var PlanFormat []byte
