package host

import (
	"testing"

	"github.com/irqpilot/irqpilot/internal/cpuset"
	"github.com/irqpilot/irqpilot/internal/kernel"
)

func TestMovePending(t *testing.T) {
	for _, c := range []struct {
		allowed, effective string
		want               bool
	}{
		{"0", "5", true},        // written 0, still delivered to 5
		{"0-3", "5", true},      // outside a wider list too
		{"0-7", "5", false},     // delivered to one of the allowed CPUs: the usual case
		{"5", "5", false},       // moved
		{"0-1", "0-1", false},   // delivered to several (a cluster mode)
		{"0-1", "1-2", true},    // partly outside
		{"0-3", "", false},      // never started: nothing to say
		{"", "5", false},        // unread
		{"0,2,4", "2", false},   // sparse lists
		{"0-255", "255", false}, // wide
	} {
		got := MovePending(cpuset.MustParse(c.allowed), cpuset.MustParse(c.effective))
		if got != c.want {
			t.Errorf("MovePending(allowed %q, effective %q) = %v, want %v", c.allowed, c.effective, got, c.want)
		}
	}
	var q IRQ
	if q.MovePending() {
		t.Errorf("an IRQ with nothing read has a pending move")
	}
}

// The project's 2-CPU VM as captured (internal/kernel/testdata/vm2cpu):
// every IRQ lands inside its affinity, none is pending.
func TestMovePendingVM2CPU(t *testing.T) {
	h := &Host{}
	kfs := kernel.New(vm2cpu)
	for _, n := range []int{24, 25, 26, 36, 38, 39} {
		h.IRQs = append(h.IRQs, IRQ{Number: n})
	}
	readPlacement(kfs, h)
	for i := range h.IRQs {
		q := &h.IRQs[i]
		if q.Affinity == nil || q.EffectiveAffinity == nil {
			t.Fatalf("irq %d: placement unread", q.Number)
		}
		if q.MovePending() {
			t.Errorf("irq %d allowed %s lands on %s: reported pending", q.Number, q.Affinity, q.EffectiveAffinity)
		}
	}
}
