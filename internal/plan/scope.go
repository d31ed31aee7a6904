package plan

import (
	"fmt"
	"maps"
	"slices"
	"sort"
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
				what := fmt.Sprintf("irq %d", *e.IRQ)
				if q := h.IRQ(*e.IRQ); q != nil && q.Device != "" {
					what += " (" + q.Device + ")"
				} else if q != nil && len(q.Actions) > 0 {
					what += " (" + q.Actions[0] + ")"
				}
				leave("%s", what)
				return true
			}
		default:
			leave("IRQs matching %q", e.Action)
			return true
		}
		return false
	})
	p.RxQueues = slices.DeleteFunc(p.RxQueues, func(e RxQueueEntry) bool {
		if !want[e.Device] {
			leave("%s rx queue steering", e.Device)
			return true
		}
		return false
	})
	p.TxQueues = slices.DeleteFunc(p.TxQueues, func(e TxQueueEntry) bool {
		if !want[e.Device] {
			leave("%s tx queue steering", e.Device)
			return true
		}
		return false
	})
	p.Coalesce = slices.DeleteFunc(p.Coalesce, func(e CoalesceEntry) bool {
		if !want[e.Device] {
			leave("%s coalescing", e.Device)
			return true
		}
		return false
	})
	p.NAPI = slices.DeleteFunc(p.NAPI, func(e NAPIEntry) bool {
		if !want[e.Device] {
			leave("%s NAPI settings", e.Device)
			return true
		}
		return false
	})
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
		sort.Strings(left)
		left = slices.Compact(left)
		const most = 12
		more := ""
		if len(left) > most {
			more = fmt.Sprintf(" and %d more", len(left)-most)
			left = left[:most]
		}
		p.Notes = append(p.Notes, fmt.Sprintf("--device %v: left out %s%s", devices, joinComma(left), more))
	}
}

func derefInt(p *int) int {
	if p == nil {
		return -1
	}
	return *p
}

func joinComma(s []string) string {
	out := ""
	for i, x := range s {
		if i > 0 {
			out += ", "
		}
		out += x
	}
	return out
}

// ScopeDefault is the scope of a plan made without Devices: it removes
// from p every entry of the interface that carries the default route (the
// link the machine is managed through, and the devices stacked on it,
// unless o.IncludeDefaultRoute) and, unless o.MachineWide, every IRQ entry
// that serves no network or storage queue (serial ports, ACPI, timers, a
// NIC's control vector: moving them buys nothing and can hurt). Each
// removal is listed in p.Notes with the flag that puts it back.
func ScopeDefault(p *Plan, h *host.Host, o Options) {
	if len(o.Devices) > 0 {
		return
	}
	out := defaultRouteOut(h, o)
	outside := defaultScopeIRQs(h, o)
	var other []string
	removed := map[string]bool{}
	p.IRQs = slices.DeleteFunc(p.IRQs, func(e IRQEntry) bool {
		switch {
		case e.Device != "":
			if out[e.Device] {
				removed[e.Device] = true
				return true
			}
		case e.IRQ != nil:
			why := outside[*e.IRQ]
			if dev, ok := strings.CutPrefix(why, "route:"); ok {
				removed[dev] = true
				return true
			}
			if why != "" {
				other = append(other, describeIRQ(h, *e.IRQ))
				return true
			}
		default:
			if !o.MachineWide {
				other = append(other, fmt.Sprintf("IRQs matching %q", e.Action))
				return true
			}
		}
		return false
	})
	drop := func(dev string) bool {
		if out[dev] {
			removed[dev] = true
			return true
		}
		return false
	}
	p.RxQueues = slices.DeleteFunc(p.RxQueues, func(e RxQueueEntry) bool { return drop(e.Device) })
	p.TxQueues = slices.DeleteFunc(p.TxQueues, func(e TxQueueEntry) bool { return drop(e.Device) })
	p.Coalesce = slices.DeleteFunc(p.Coalesce, func(e CoalesceEntry) bool { return drop(e.Device) })
	p.NAPI = slices.DeleteFunc(p.NAPI, func(e NAPIEntry) bool { return drop(e.Device) })
	for i := range h.NICs {
		if n := &h.NICs[i]; out[n.Name] {
			removed[n.Name] = true
		}
	}
	if len(removed) > 0 {
		p.Notes = append(p.Notes, DefaultRouteNote(slices.Sorted(maps.Keys(removed))))
	}
	if len(other) > 0 {
		p.Notes = append(p.Notes, otherIRQsNote(other))
	}
	if !o.IncludeDefaultRoute {
		for _, u := range h.Unavailable {
			if u.What == "default route" && hasPhysicalNIC(h) {
				p.Notes = append(p.Notes, fmt.Sprintf("could not tell which interface carries the default route (%s): no interface was left out for it; name the interfaces to plan with --device", u.Reason))
				break
			}
		}
	}
}

// DefaultRouteNote says which interfaces a plan made without --device left
// out because they carry the default route.
func DefaultRouteNote(devs []string) string {
	verb := "it carries"
	if len(devs) > 1 {
		verb = "they carry"
	}
	return fmt.Sprintf("left out %s: %s the default route (the link this machine is reached through); name it with --device to include it, or add --include-default-route", strings.Join(devs, ", "), verb)
}

func otherIRQsNote(irqs []string) string {
	sort.Strings(irqs)
	irqs = slices.Compact(irqs)
	const most = 12
	more := ""
	if len(irqs) > most {
		more = fmt.Sprintf(" and %d more", len(irqs)-most)
		irqs = irqs[:most]
	}
	verb := "it serves"
	if len(irqs) > 1 {
		verb = "they serve"
	}
	return fmt.Sprintf("left out %s%s: %s no network or storage queue; add --machine-wide to include %s", joinComma(irqs), more, verb, map[bool]string{true: "it", false: "them"}[verb == "it serves"])
}

func describeIRQ(h *host.Host, n int) string {
	what := fmt.Sprintf("irq %d", n)
	if q := h.IRQ(n); q != nil && q.Device != "" {
		what += " (" + q.Device + ")"
	} else if q != nil && len(q.Actions) > 0 {
		what += " (" + q.Actions[0] + ")"
	}
	return what
}

func hasPhysicalNIC(h *host.Host) bool {
	for i := range h.NICs {
		if !h.NICs[i].Virtual {
			return true
		}
	}
	return false
}

// defaultRouteOut names the interfaces the default scope leaves out: those
// carrying the default route and every device stacked on one (a VLAN over
// the management link shares its queues). Empty with Devices or
// IncludeDefaultRoute.
func defaultRouteOut(h *host.Host, o Options) map[string]bool {
	out := map[string]bool{}
	if len(o.Devices) > 0 || o.IncludeDefaultRoute {
		return out
	}
	for i := range h.NICs {
		if h.NICs[i].DefaultRoute {
			out[h.NICs[i].Name] = true
		}
	}
	for grew := len(out) > 0; grew; {
		grew = false
		for i := range h.NICs {
			if n := &h.NICs[i]; !out[n.Name] && n.Lower != "" && out[n.Lower] {
				out[n.Name], grew = true, true
			}
		}
	}
	return out
}

// defaultScopeIRQs maps the IRQs outside the default scope to why:
// "route:DEV" for an IRQ of an interface left out for the default route,
// "other" for an IRQ that serves no network or storage queue (unless
// MachineWide). Nil with Devices.
func defaultScopeIRQs(h *host.Host, o Options) map[int]string {
	if len(o.Devices) > 0 {
		return nil
	}
	out := defaultRouteOut(h, o)
	m := map[int]string{}
	for name := range out {
		if nic := h.NIC(name); nic != nil {
			for _, n := range nic.IRQs {
				m[n] = "route:" + name
			}
		}
	}
	for i := range h.IRQs {
		q := &h.IRQs[i]
		switch {
		case m[q.Number] != "":
		case out[q.Device]:
			m[q.Number] = "route:" + q.Device
		case !o.MachineWide && !(q.Queue != nil && (q.Class == host.ClassNetwork || q.Class == host.ClassStorage)):
			m[q.Number] = "other"
		}
	}
	return m
}
