package agent

import (
	"fmt"
	"strings"
	"testing"

	"github.com/irqpilot/irqpilot/internal/host"
	"github.com/irqpilot/irqpilot/internal/kernel"
	"github.com/irqpilot/irqpilot/internal/load"
	"github.com/irqpilot/irqpilot/internal/policy"
)

// window is the test's own measurement of the machine, taken beside the
// agent's: the per-CPU numbers a skip or a failure reports, and
// policy.Harm's verdict on them (the evidence the agent's trigger uses).
type window struct {
	s    *load.Sampler
	from *load.Sample
}

func startWindow(t *testing.T) *window { t.Helper(); return startWindowTasks(t) }

// startWindowTasks is startWindow that also samples the threads of pids.
func startWindowTasks(t *testing.T, pids ...int) *window {
	t.Helper()
	s := load.NewSampler(kernel.New("/"))
	if len(pids) > 0 {
		s.TaskPIDs = func() []int { return pids }
	}
	from, err := s.Sample()
	if err != nil {
		t.Fatal(err)
	}
	return &window{s: s, from: from}
}

// end measures from the start (or the last end) to now.
func (w *window) end(t *testing.T) (*load.Load, []load.Finding) {
	t.Helper()
	to, err := w.s.Sample()
	if err != nil {
		t.Fatal(err)
	}
	l, err := load.Rates(w.from, to)
	if err != nil {
		t.Fatal(err)
	}
	w.from = to
	h, err := host.Read(kernel.New("/"), host.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return l, policy.Harm(h, l)
}

// cpuLine: "CPU0 idle 2% soft 71% irq 0% user 10% sys 17%; CPU1 …".
func cpuLine(l *load.Load) string {
	var parts []string
	for _, c := range l.CPUs {
		parts = append(parts, fmt.Sprintf("CPU%d idle %.0f%% soft %.0f%% irq %.0f%% user %.0f%% sys %.0f%%", c.ID, c.Idle, c.SoftIRQ, c.IRQ, c.User, c.System))
	}
	return strings.Join(parts, "; ")
}

func harmLine(fs []load.Finding) string {
	if len(fs) == 0 {
		return "no evidence of harm"
	}
	var parts []string
	for _, f := range fs {
		parts = append(parts, f.ID+": "+f.Summary)
	}
	return strings.Join(parts, "; ")
}

func softOf(l *load.Load, cpu int) float64 {
	for _, c := range l.CPUs {
		if c.ID == cpu {
			return c.SoftIRQ
		}
	}
	return 0
}
