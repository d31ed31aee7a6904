// The NAPI lines of a NIC in the text inventory.

package main

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/irqpilot/irqpilot/internal/host"
)

// writeNAPI prints one line per NAPI instance of NIC dev: its queues, IRQ,
// mode (softirq, or threaded with its kthread and where it may run) and its
// deferral, GRO flush and IRQ suspension settings.
func (t *inventoryText) writeNAPI(dev string) {
	for _, n := range t.h.NAPIsOf(dev) {
		fmt.Fprintf(t.w, "    napi %d: %s\n", n.ID, t.napiStr(n))
	}
}

func (t *inventoryText) napiStr(n host.NAPI) string {
	var parts []string
	q := func(kind string, ids []int) {
		if len(ids) > 0 {
			s := make([]string, len(ids))
			for i, v := range ids {
				s[i] = strconv.Itoa(v)
			}
			parts = append(parts, kind+" "+strings.Join(s, ","))
		}
	}
	q("rx", n.Queues.RX)
	q("tx", n.Queues.TX)
	if n.IRQ != nil {
		parts = append(parts, fmt.Sprintf("irq %d", *n.IRQ))
	}
	switch {
	case n.PID != nil:
		s := fmt.Sprintf("threaded (pid %d", *n.PID)
		if n.CPUs != nil {
			s += " on cpus " + t.setStr(*n.CPUs)
		}
		parts = append(parts, s+")")
	case n.Threaded != nil && *n.Threaded:
		parts = append(parts, "threaded")
	case n.Threaded != nil:
		parts = append(parts, "softirq")
	}
	if n.DeferHardIRQs != nil {
		parts = append(parts, fmt.Sprintf("defer-hard-irqs %d", *n.DeferHardIRQs))
	}
	if n.GROFlushTimeout != nil {
		parts = append(parts, fmt.Sprintf("gro-flush-timeout %dns", *n.GROFlushTimeout))
	}
	if n.IRQSuspendTimeout != nil {
		parts = append(parts, fmt.Sprintf("irq-suspend-timeout %dns", *n.IRQSuspendTimeout))
	}
	if len(parts) == 0 {
		return "(no details reported)"
	}
	return strings.Join(parts, "  ")
}
