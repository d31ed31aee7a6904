package apply

import (
	"fmt"
	"strings"
	"testing"

	"github.com/irqpilot/irqpilot/internal/host"
	"github.com/irqpilot/irqpilot/internal/kernel"
	"github.com/irqpilot/irqpilot/internal/livetest"
	"github.com/irqpilot/irqpilot/internal/setting"
)

// A real IRQ moved while it is idle: on x86 without interrupt remapping the
// kernel moves it at its next interrupt, so after the write its
// smp_affinity_list shows the new CPUs and effective_affinity_list the old
// one. The apply is done, read back, and its note says the move is pending;
// revert puts the old affinity back. (This machine's quietest writable IRQ,
// an ACPI line, never eth0's.)
func TestLiveMovePendingUntilNextInterrupt(t *testing.T) {
	needRoot(t)
	if testing.Short() {
		t.Skip("live test; -short")
	}
	fs := kernel.New("/")
	irq, to := livetest.QuietIRQ(t, fs)
	before, err := fs.ReadIRQAffinity(irq)
	if err != nil {
		t.Fatal(err)
	}
	count := livetest.IRQCount(t, fs, irq)
	a := &Applier{Env: setting.Env{FS: fs}, StateDir: t.TempDir()}
	c := setting.IRQAffinity(irq, fmt.Sprintf("irq %d", irq), to, "pending move test")
	res, err := a.Apply([]setting.Change{c}, Meta{})
	if err != nil {
		t.Fatal(err)
	}
	e := res.Entries[0]
	eff, err := fs.ReadIRQEffectiveAffinity(irq)
	if err != nil {
		t.Fatal(err)
	}
	fired := livetest.IRQCount(t, fs, irq) != count
	t.Logf("irq %d: wrote %s, effective %s, note %q, fired during the test: %v", irq, to, eff, e.Note, fired)
	if got, _ := fs.ReadIRQAffinity(irq); !got.Equal(to) {
		t.Errorf("smp_affinity_list %s after the write, want %s (the kernel shows the pending CPUs)", got, to)
	}
	if e.Status != setting.StatusDone {
		t.Errorf("status %s, want done: a pending move is written and read back", e.Status)
	}
	switch {
	case !eff.IsSubsetOf(to):
		if !setting.MovePending(&e) || !strings.HasSuffix(e.Note, host.MovePendingNote) {
			t.Errorf("irq %d lands on %s outside %s but the note %q does not say the move is pending", irq, eff, to, e.Note)
		}
	case fired:
		t.Skipf("irq %d fired during the test (moved to %s): no pending move to see", irq, eff)
	default:
		// This kernel moved it at once (interrupt remapping, or an
		// architecture that moves in process context): nothing pending.
		if setting.MovePending(&e) {
			t.Errorf("note %q while irq %d already lands on %s", e.Note, irq, eff)
		}
	}
	if _, err := a.Revert("", false); err != nil {
		t.Fatal(err)
	}
	if got, _ := fs.ReadIRQAffinity(irq); !got.Equal(before) {
		t.Errorf("affinity %s after revert, want %s", got, before)
	}
}
