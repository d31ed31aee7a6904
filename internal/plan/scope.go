package plan

import (
	"fmt"
	"slices"
	"strings"

	"github.com/irqpilot/irqpilot/internal/host"
)

// ScopeToDevices removes from p every entry that does not belong to the
// named network devices (or their lower devices: a VLAN is steered on the
// device below it), and, unless machineWide, the machine-wide settings
// (rps_sock_flow_entries, busy_poll, irqbalance). What it removes is listed in
// p.Notes, so a plan made with --device says what it left out instead of
// moving, say, eth0's IRQs while the operator named a veth. Application
// placements stay: the operator named the application.
func ScopeToDevices(p *Plan, h *host.Host, devices []string, machineWide bool) {
	want := map[string]bool{}
	for _, d := range devices {
		want[d] = true
		if nic := h.NIC(d); nic != nil && nic.Lower != "" {
			want[nic.Lower] = true
		}
	}
	deviceIRQ := map[int]bool{}
	for _, q := range h.IRQs {
		if want[q.Device] {
			deviceIRQ[q.Number] = true
		}
	}
	for d := range want {
		if nic := h.NIC(d); nic != nil {
			for _, n := range nic.IRQs {
				deviceIRQ[n] = true
			}
		}
	}
	var left []string
	leave := func(format string, args ...any) { left = append(left, fmt.Sprintf(format, args...)) }

	p.IRQs = slices.DeleteFunc(p.IRQs, func(e IRQEntry) bool {
		switch {
		case e.Device != "":
			if !want[e.Device] {
				leave("%s queue %d IRQ", e.Device, derefInt(e.Queue))
				return true
			}
		case e.IRQ != nil:
			if !deviceIRQ[*e.IRQ] {
				leave("%s", DescribeIRQ(h, *e.IRQ))
				return true
			}
		default:
			leave("IRQs matching %q", e.Action)
			return true
		}
		return false
	})
	drop := func(dev, what string) bool {
		if !want[dev] {
			leave("%s %s", dev, what)
			return true
		}
		return false
	}
	p.RxQueues = slices.DeleteFunc(p.RxQueues, func(e RxQueueEntry) bool { return drop(e.Device, "rx queue steering") })
	p.TxQueues = slices.DeleteFunc(p.TxQueues, func(e TxQueueEntry) bool { return drop(e.Device, "tx queue steering") })
	p.Coalesce = slices.DeleteFunc(p.Coalesce, func(e CoalesceEntry) bool { return drop(e.Device, "coalescing") })
	p.NAPI = slices.DeleteFunc(p.NAPI, func(e NAPIEntry) bool { return drop(e.Device, "NAPI settings") })
	if !machineWide {
		if p.BusyPoll != nil {
			leave("net.core busy_read/busy_poll (machine-wide: add --machine-wide)")
			p.BusyPoll = nil
		}
		if p.RPSSockFlowEntries != nil {
			leave("net.core.rps_sock_flow_entries (machine-wide: add --machine-wide; until it is set, RFS flow counts steer nothing)")
			p.RPSSockFlowEntries = nil
		}
		if p.Irqbalance != nil && p.Irqbalance.Mode != IrqbalanceLeave {
			leave("irqbalance %s (machine-wide: add --machine-wide, or keep irqbalance off these IRQs yourself)", p.Irqbalance.Mode)
			p.Irqbalance = nil
		}
	}
	if len(left) > 0 {
		list, _ := ShortList(left)
		p.Notes = append(p.Notes, fmt.Sprintf("--device %v: left out %s", devices, list))
	}
}

func derefInt(p *int) int {
	if p == nil {
		return -1
	}
	return *p
}

// shortListMost is how many items a note names before "and N more".
const shortListMost = 12

// ShortList is items sorted, without repeats, joined with commas, the
// first shortListMost of them and " and N more" for the rest (a note
// stays one readable line on a host with a thousand IRQs); n is how many
// distinct items there are.
func ShortList(items []string) (list string, n int) {
	items = slices.Compact(slices.Sorted(slices.Values(items)))
	n = len(items)
	more := ""
	if n > shortListMost {
		more = fmt.Sprintf(" and %d more", n-shortListMost)
		items = items[:shortListMost]
	}
	return strings.Join(items, ", ") + more, n
}

// DescribeIRQ names IRQ n for a note: "irq 36 (eth0)", "irq 9 (acpi)".
func DescribeIRQ(h *host.Host, n int) string {
	what := fmt.Sprintf("irq %d", n)
	if q := h.IRQ(n); q != nil && q.Device != "" {
		what += " (" + q.Device + ")"
	} else if q != nil && len(q.Actions) > 0 {
		what += " (" + q.Actions[0] + ")"
	}
	return what
}
