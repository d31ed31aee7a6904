package plan

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/irqpilot/irqpilot/internal/cpuset"
	"github.com/irqpilot/irqpilot/internal/setting"
)

func (d *decoder) kind(n *yaml.Node, field string, k yaml.Kind, what string) bool {
	if n.Kind == yaml.AliasNode {
		d.add(n.Line, field, "YAML aliases are not supported in plans")
		return false
	}
	if n.Kind != k {
		d.add(n.Line, field, "expected %s, found %s", what, nodeDesc(n))
		return false
	}
	return true
}

func nodeDesc(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		if n.Tag == "!!null" {
			return "nothing (null)"
		}
		return fmt.Sprintf("%q", n.Value)
	}
	return "something else"
}

func (d *decoder) str(n *yaml.Node, field string) string {
	if !d.kind(n, field, yaml.ScalarNode, "a string") {
		return ""
	}
	if n.Tag == "!!null" {
		return ""
	}
	return n.Value
}

// integer reads a decimal integer in [lo, hi].
func (d *decoder) integer(n *yaml.Node, field string, lo, hi int64) (int, bool) {
	if !d.kind(n, field, yaml.ScalarNode, "an integer") {
		return 0, false
	}
	v, err := strconv.ParseInt(n.Value, 10, 64)
	if err != nil {
		d.add(n.Line, field, "%q is not an integer", n.Value)
		return 0, false
	}
	if v < lo {
		if lo == 0 {
			d.add(n.Line, field, "%d is negative", v)
		} else {
			d.add(n.Line, field, "%d is below the minimum %d", v, lo)
		}
		return 0, false
	}
	if v > hi {
		d.add(n.Line, field, "%d exceeds the maximum %d", v, hi)
		return 0, false
	}
	return int(v), true
}

// float decodes a finite number (a prediction's percentages); the range is
// the entry's check.
func (d *decoder) float(n *yaml.Node, field string) (float64, bool) {
	if !d.kind(n, field, yaml.ScalarNode, "a number") {
		return 0, false
	}
	v, err := strconv.ParseFloat(n.Value, 64)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
		d.add(n.Line, field, "%q is not a number", n.Value)
		return 0, false
	}
	return v, true
}

func (d *decoder) boolp(n *yaml.Node, field string) *bool {
	if !d.kind(n, field, yaml.ScalarNode, "true or false") {
		return nil
	}
	switch n.Value {
	case "true":
		return ptr(true)
	case "false":
		return ptr(false)
	}
	d.add(n.Line, field, "%q is not true or false", n.Value)
	return nil
}

// cpus reads a cpulist ("0-3,8"), or a list of CPU numbers ([0, 2]).
func (d *decoder) cpus(n *yaml.Node, field string) (cpuset.Set, bool) {
	var text string
	switch n.Kind {
	case yaml.ScalarNode:
		if n.Tag == "!!null" {
			d.add(n.Line, field, "expected a cpulist such as \"0-3,8\", found nothing")
			return cpuset.Set{}, false
		}
		text = n.Value
	case yaml.SequenceNode:
		parts := make([]string, 0, len(n.Content))
		for _, c := range n.Content {
			if c.Kind != yaml.ScalarNode {
				d.add(c.Line, field, "expected CPU numbers, found %s", nodeDesc(c))
				return cpuset.Set{}, false
			}
			parts = append(parts, c.Value)
		}
		text = strings.Join(parts, ",")
	default:
		d.kind(n, field, yaml.ScalarNode, "a cpulist such as \"0-3,8\"")
		return cpuset.Set{}, false
	}
	if len(text) > setting.MaxCPUListLen {
		d.add(n.Line, field, "CPU list of %d bytes is longer than the %d any real host needs", len(text), setting.MaxCPUListLen)
		return cpuset.Set{}, false
	}
	// A hex mask is accepted with an explicit 0x prefix ("0xff" = 0-7), as
	// seed scripts write them; a bare "10" is always the cpulist CPU 10.
	if t := strings.TrimSpace(text); strings.HasPrefix(t, "0x") || strings.HasPrefix(t, "0X") {
		s, err := cpuset.ParseMask(t)
		if err != nil {
			d.add(n.Line, field, "bad CPU mask: %v", err)
			return cpuset.Set{}, false
		}
		return s, true
	}
	s, err := cpuset.Parse(text)
	if err != nil {
		d.add(n.Line, field, "bad cpulist: %v", err)
		return cpuset.Set{}, false
	}
	return s, true
}

// cpuSet is cpus, or with empty cpusAllowEmpty.
func (d *decoder) cpuSet(n *yaml.Node, path string, empty bool) (cpuset.Set, bool) {
	if empty {
		return d.cpusAllowEmpty(n, path)
	}
	return d.cpus(n, path)
}

// cpusAllowEmpty is cpus where an empty string or null means the empty set
// (steering off).
func (d *decoder) cpusAllowEmpty(n *yaml.Node, field string) (cpuset.Set, bool) {
	if n.Kind == yaml.ScalarNode && (n.Tag == "!!null" || n.Value == "") {
		return cpuset.Set{}, true
	}
	return d.cpus(n, field)
}

func (d *decoder) seq(n *yaml.Node, field string, fn func(i int, item *yaml.Node, path string)) {
	if !d.kind(n, field, yaml.SequenceNode, "a list") {
		return
	}
	if d.entries += len(n.Content); d.entries > MaxPlanEntries {
		d.add(n.Line, field, "%d list entries in all, over the limit of %d (real plans have a few thousand)", d.entries, MaxPlanEntries)
		return
	}
	for i, item := range n.Content {
		fn(i, item, fmt.Sprintf("%s[%d]", field, i))
	}
}
