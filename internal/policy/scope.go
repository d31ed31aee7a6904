package policy

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/irqpilot/irqpilot/internal/host"
	"github.com/irqpilot/irqpilot/internal/plan"
)

// ScopeDefault is the scope of a plan made without Devices: it removes
// from p every entry of the interface that carries the default route (the
// link the machine is managed through, and the devices stacked on it,
// unless o.IncludeDefaultRoute) and, unless o.MachineWide, every IRQ entry
// that serves no network or storage queue (serial ports, ACPI, timers, a
// NIC's control vector: moving them buys nothing and can hurt). Each
// removal is listed in p.Notes with the flag that puts it back.
func ScopeDefault(p *plan.Plan, h *host.Host, o Options) {
	if len(o.Devices) > 0 {
		return
	}
	out := defaultRouteOut(h, o)
	outside := defaultScopeIRQs(h, o)
	var other []string
	removed := map[string]bool{}
	p.IRQs = slices.DeleteFunc(p.IRQs, func(e plan.IRQEntry) bool {
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
				other = append(other, plan.DescribeIRQ(h, *e.IRQ))
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
	p.RxQueues = slices.DeleteFunc(p.RxQueues, func(e plan.RxQueueEntry) bool { return drop(e.Device) })
	p.TxQueues = slices.DeleteFunc(p.TxQueues, func(e plan.TxQueueEntry) bool { return drop(e.Device) })
	p.Coalesce = slices.DeleteFunc(p.Coalesce, func(e plan.CoalesceEntry) bool { return drop(e.Device) })
	p.NAPI = slices.DeleteFunc(p.NAPI, func(e plan.NAPIEntry) bool { return drop(e.Device) })
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
	list, n := plan.ShortList(irqs)
	verb, pron := "it serves", "it"
	if n > 1 {
		verb, pron = "they serve", "them"
	}
	return fmt.Sprintf("left out %s: %s no network or storage queue; add --machine-wide to include %s", list, verb, pron)
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
