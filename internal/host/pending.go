package host

import "github.com/irqpilot/irqpilot/internal/cpuset"

// MovePendingNote is what every output says of an IRQ whose new affinity is
// written but not yet in effect.
const MovePendingNote = "move pending until its next interrupt"

// MovePending reports whether an IRQ allowed on allowed (smp_affinity_list)
// is still delivered to a CPU outside it (effective_affinity_list). The
// kernel moves some interrupts only when they next fire (on x86 without
// interrupt remapping, IO-APIC and MSI interrupts alike: the pending mask of
// kernel/irq/migration.c), so after a write the allowed list already shows
// the new CPUs and the effective one the old CPU until then. That is a move in
// progress, not drift: the setting is in force. An empty or unread
// effective list (an IRQ never started) says nothing.
func MovePending(allowed, effective cpuset.Set) bool {
	return !allowed.IsEmpty() && !effective.IsEmpty() && !effective.IsSubsetOf(allowed)
}

// MovePending reports whether q's last affinity write still waits for its
// next interrupt (see the function MovePending).
func (q *IRQ) MovePending() bool {
	return q.Affinity != nil && q.EffectiveAffinity != nil && MovePending(*q.Affinity, *q.EffectiveAffinity)
}
