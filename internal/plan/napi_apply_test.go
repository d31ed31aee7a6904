package plan_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/irqpilot/irqpilot/internal/apply"
	"github.com/irqpilot/irqpilot/internal/kernel"
	"github.com/irqpilot/irqpilot/internal/plan"
	"github.com/irqpilot/irqpilot/internal/plan/plantest"
	"github.com/irqpilot/irqpilot/internal/setting"
)

// The committed veth capture predates NAPI facts: a dry run of a plan
// with every NAPI setting reports each one skipped as unsupported and
// still goes through (no error aborts the plan).
func TestNAPIPlanOnOlderCapture(t *testing.T) {
	fs, h := plantest.OpenSnapshot(t, filepath.Join("..", "..", "testdata", "snapshots", "veth4.tar.gz"))
	p, err := plan.Parse("napi.yaml", []byte(`version: 1
napi:
  - {device: vq0, threaded: true, defer_hard_irqs: 2, gro_flush_timeout: 20000, cpus: 1, reason: device-wide}
  - {device: vq0, id: 274, threaded: true, defer_hard_irqs: 2, gro_flush_timeout: 20000, irq_suspend_timeout: 20000000, cpus: 1, reason: one instance}
busy_poll: {busy_read: 50, busy_poll: 50, reason: busy polling}
`))
	if err != nil {
		t.Fatal(err)
	}
	out, err := apply.New(fs, t.TempDir()).Converge(h, p, apply.ConvergeOptions{DryRun: true})
	if err != nil {
		t.Fatalf("an older capture aborted the plan: %v", err)
	}
	n := 0
	for _, e := range out.Entries {
		if e.Kind == setting.KindSysctl {
			continue
		}
		n++
		if e.Status != setting.StatusSkipped || !(strings.Contains(e.Note, "unsupported") || strings.Contains(e.Note, kernel.ErrUnsupported.Error())) {
			t.Errorf("%s (%s): %s %q, want skipped as unsupported", e.Target, e.Kind, e.Status, e.Note)
		}
	}
	if n != 9 {
		t.Errorf("%d NAPI entries, want 9 (3 device files + the device's threads, 4 values + the thread of napi 274)", n)
	}
}
