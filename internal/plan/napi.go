package plan

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/irqpilot/irqpilot/internal/cpuset"
	"github.com/irqpilot/irqpilot/internal/host"
	"github.com/irqpilot/irqpilot/internal/setting"
)

// NAPIEntry sets interrupt mitigation of a device's NAPI instances: without
// ID the device-wide sysfs values (threaded, napi_defer_hard_irqs,
// gro_flush_timeout; CPUs places every NAPI thread of the device), with ID
// one instance through netlink napi-set. Nil fields are left as they are.
//
//	napi:
//	  - {device: eth0, defer_hard_irqs: 2, gro_flush_timeout: 200000, reason: …}
//	  - {device: eth0, id: 8193, threaded: true, irq_suspend_timeout: 20000000, reason: …}
//	  - {device: eth0, id: 8193, cpus: 3, reason: …}
type NAPIEntry struct {
	Device string  `yaml:"device" json:"device"`
	ID     *uint32 `yaml:"id,omitempty" json:"id,omitempty"`
	// Threaded runs the instance(s) in a kernel thread of their own.
	Threaded *bool `yaml:"threaded,omitempty" json:"threaded,omitempty"`
	// DeferHardIRQs is how many empty polls keep the IRQ masked.
	DeferHardIRQs *uint32 `yaml:"defer_hard_irqs,omitempty" json:"defer_hard_irqs,omitempty"`
	// GROFlushTimeout (ns) holds GRO batches and polls on a timer.
	GROFlushTimeout *uint64 `yaml:"gro_flush_timeout,omitempty" json:"gro_flush_timeout,omitempty"`
	// IRQSuspendTimeout (ns, per instance only) keeps the IRQ suspended
	// while an application that opted in (SO_PREFER_BUSY_POLL, epoll
	// busy-poll parameters) keeps finding events.
	IRQSuspendTimeout *uint64 `yaml:"irq_suspend_timeout,omitempty" json:"irq_suspend_timeout,omitempty"`
	// CPUs places the instance's kernel thread (threaded only).
	CPUs   *cpuset.Set `yaml:"cpus,omitempty" json:"cpus,omitempty"`
	Reason string      `yaml:"reason" json:"reason"`
	Line   int         `yaml:"-" json:"-"`
}

// BusyPollEntry sets the machine-wide busy-polling defaults (µs; 0 = off):
// net.core.busy_read for blocking reads, net.core.busy_poll for
// poll/select/epoll.
type BusyPollEntry struct {
	BusyRead *int   `yaml:"busy_read,omitempty" json:"busy_read,omitempty"`
	BusyPoll *int   `yaml:"busy_poll,omitempty" json:"busy_poll,omitempty"`
	Reason   string `yaml:"reason" json:"reason"`
	Line     int    `yaml:"-" json:"-"`
}

var (
	napiFields     = set("device", "id", "threaded", "defer_hard_irqs", "gro_flush_timeout", "irq_suspend_timeout", "cpus", "reason")
	busyPollFields = set("busy_read", "busy_poll", "reason")
)

func (d *decoder) napi(n *yaml.Node, field string) NAPIEntry {
	e := NAPIEntry{Line: n.Line}
	d.fields(n, field, napiFields, func(key string, v *yaml.Node, f string) {
		switch key {
		case "device":
			e.Device = d.str(v, f)
		case "id":
			if x, ok := d.integer(v, f, 1, 1<<32-1); ok {
				u := uint32(x)
				e.ID = &u
			}
		case "threaded":
			e.Threaded = d.boolp(v, f)
		case "defer_hard_irqs":
			if x, ok := d.integer(v, f, 0, setting.MaxDeferHardIRQs); ok {
				u := uint32(x)
				e.DeferHardIRQs = &u
			}
		case "gro_flush_timeout":
			e.GROFlushTimeout = d.nanoseconds(v, f)
		case "irq_suspend_timeout":
			e.IRQSuspendTimeout = d.nanoseconds(v, f)
		case "cpus":
			if s, ok := d.cpus(v, f); ok {
				e.CPUs = &s
			}
		case "reason":
			e.Reason = d.str(v, f)
		}
	})
	return e
}

// nanoseconds reads a timeout in ns, 0 to setting.MaxNAPITimeoutNs.
func (d *decoder) nanoseconds(n *yaml.Node, field string) *uint64 {
	x, ok := d.integer(n, field, 0, setting.MaxNAPITimeoutNs)
	if !ok {
		return nil
	}
	u := uint64(x)
	return &u
}

func (d *decoder) busyPoll(n *yaml.Node, field string) *BusyPollEntry {
	e := &BusyPollEntry{Line: d.keyLine}
	d.fields(n, field, busyPollFields, func(key string, v *yaml.Node, f string) {
		switch key {
		case "busy_read":
			if x, ok := d.integer(v, f, 0, setting.MaxBusyPollUsecs); ok {
				e.BusyRead = &x
			}
		case "busy_poll":
			if x, ok := d.integer(v, f, 0, setting.MaxBusyPollUsecs); ok {
				e.BusyPoll = &x
			}
		case "reason":
			e.Reason = d.str(v, f)
		}
	})
	return e
}

// checkNAPI applies the static rules of napi and busy_poll entries (plans
// built in Go get the same range checks the decoder applies).
func checkNAPI(p *Plan, l *errList, reason func(line int, field, r string)) {
	type key struct {
		dev string
		id  uint32 // 0: the device-wide entry
	}
	seen := map[key]int{}
	for i, e := range p.NAPI {
		f := fmt.Sprintf("napi[%d]", i)
		reason(e.Line, f, e.Reason)
		if e.Device == "" {
			l.add(e.Line, f+".device", "missing")
			continue
		}
		if !setting.DeviceNameOK(e.Device) {
			l.add(e.Line, f+".device", "%q is not a network interface name", e.Device)
			continue
		}
		if e.Threaded == nil && e.DeferHardIRQs == nil && e.GROFlushTimeout == nil && e.IRQSuspendTimeout == nil && e.CPUs == nil {
			l.add(e.Line, f, "nothing to set (give threaded, defer_hard_irqs, gro_flush_timeout, irq_suspend_timeout or cpus)")
		}
		if e.ID != nil && *e.ID == 0 {
			l.add(e.Line, f+".id", "0 is not a NAPI id (ids start at 1; see inventory's napi[])")
		}
		if e.ID == nil && e.IRQSuspendTimeout != nil {
			l.add(e.Line, f+".irq_suspend_timeout", "per NAPI instance only (the kernel has no device-wide file): give id, from inventory's napi[]")
		}
		if e.DeferHardIRQs != nil && *e.DeferHardIRQs > setting.MaxDeferHardIRQs {
			l.add(e.Line, f+".defer_hard_irqs", "%d exceeds the maximum %d", *e.DeferHardIRQs, setting.MaxDeferHardIRQs)
		}
		for _, t := range []struct {
			name string
			v    *uint64
		}{{"gro_flush_timeout", e.GROFlushTimeout}, {"irq_suspend_timeout", e.IRQSuspendTimeout}} {
			if t.v != nil && *t.v > setting.MaxNAPITimeoutNs {
				l.add(e.Line, f+"."+t.name, "%d ns exceeds the maximum %d (100 ms)", *t.v, setting.MaxNAPITimeoutNs)
			}
		}
		if e.CPUs != nil && e.CPUs.IsEmpty() {
			l.add(e.Line, f+".cpus", "empty (a thread needs at least one CPU)")
		}
		k := key{dev: e.Device}
		if e.ID != nil {
			k.id = *e.ID
		}
		if first, dup := seen[k]; dup {
			what := e.Device + " (device-wide)"
			if k.id != 0 {
				what = fmt.Sprintf("%s napi %d", e.Device, k.id)
			}
			l.add(e.Line, f, "duplicate: %s is already set by the entry at %s", what, where(first))
		} else {
			seen[k] = e.Line
		}
	}
	if e := p.BusyPoll; e != nil {
		reason(e.Line, "busy_poll", e.Reason)
		if e.BusyRead == nil && e.BusyPoll == nil {
			l.add(e.Line, "busy_poll", "nothing to set (give busy_read and/or busy_poll, in µs)")
		}
		for _, t := range []struct {
			name string
			v    *int
		}{{"busy_read", e.BusyRead}, {"busy_poll", e.BusyPoll}} {
			if t.v != nil && (*t.v < 0 || *t.v > setting.MaxBusyPollUsecs) {
				l.add(e.Line, "busy_poll."+t.name, "%d µs is outside 0..%d", *t.v, setting.MaxBusyPollUsecs)
			}
		}
	}
}

// NAPIUnsupported says why h has no NAPI facts ("" when it has some).
func NAPIUnsupported(h *host.Host, dev string) string {
	if len(h.NAPIsOf(dev)) > 0 {
		return ""
	}
	for _, u := range h.Unavailable {
		if u.What == "napi" || u.What == "nic "+dev+" napi" {
			return u.Reason
		}
	}
	if len(h.NAPI) == 0 {
		return "unsupported: the host reports no NAPI instances"
	}
	return "unsupported: " + dev + " has no NAPI instance (virtual devices get them with GRO on or an XDP program)"
}

// withOld sets c.Old from a value the host model read (nil: unknown).
func withOld(c setting.Change, v *uint64) setting.Change {
	if v != nil {
		c.Old = strconv.FormatUint(*v, 10)
	}
	return c
}

// resolveNAPI turns napi and busy_poll entries into changes. A host (or
// capture) without NAPI facts makes each per-instance setting a skipped
// change saying so, not an error.
func resolveNAPI(p *Plan, h *host.Host, v CPUView, l *errList) []setting.Change {
	var out []setting.Change
	add := func(e NAPIEntry, c setting.Change) {
		c.Line = e.Line
		out = append(out, c)
	}
	skip := func(e NAPIEntry, c setting.Change, note string) {
		c.Status, c.Note = setting.StatusSkipped, note
		add(e, c)
	}
	for i, e := range p.NAPI {
		f := fmt.Sprintf("napi[%d]", i)
		nic := findNIC(h, e.Device, l, e.Line, f+".device")
		if nic == nil {
			continue
		}
		if e.CPUs != nil {
			v.check(l, e.Line, f+".cpus", *e.CPUs)
		}
		if e.ID == nil {
			// Old is the device-wide file as apply reads it ("" only
			// when the file is absent or unreadable).
			if e.Threaded != nil {
				add(e, withOld(setting.DevThreaded(nic.Name, *e.Threaded, e.Reason), nic.Threaded))
			}
			if e.DeferHardIRQs != nil {
				add(e, withOld(setting.DevDeferHardIRQs(nic.Name, *e.DeferHardIRQs, e.Reason), nic.DeferHardIRQs))
			}
			if e.GROFlushTimeout != nil {
				add(e, withOld(setting.DevGROFlushTimeout(nic.Name, *e.GROFlushTimeout, e.Reason), nic.GROFlushTimeout))
			}
			if e.CPUs != nil {
				napis := h.NAPIsOf(nic.Name)
				if len(napis) == 0 {
					skip(e, setting.Change{Kind: setting.KindThreadAffinity, Target: nic.Name + " napi threads", Device: nic.Name,
						Value: e.CPUs.String(), Reason: e.Reason}, NAPIUnsupported(h, nic.Name))
				}
				for _, n := range napis {
					out = append(out, napiThread(e, n)...)
				}
			}
			continue
		}
		id := *e.ID
		var inst *host.NAPI
		for _, n := range h.NAPIsOf(nic.Name) {
			if n.ID == id {
				inst = &n
				break
			}
		}
		why := NAPIUnsupported(h, nic.Name)
		if inst == nil && why == "" {
			var ids []string
			for _, n := range h.NAPIsOf(nic.Name) {
				ids = append(ids, strconv.FormatUint(uint64(n.ID), 10))
			}
			sort.Strings(ids)
			l.add(e.Line, f+".id", "%s has no NAPI instance %d (it has: %s; ids change when the device is reconfigured)", nic.Name, id, strings.Join(ids, ", "))
			continue
		}
		type field struct {
			kind setting.Kind
			want *uint64
			have *uint64
		}
		u64 := func(b *bool) *uint64 {
			if b == nil {
				return nil
			}
			x := uint64(0)
			if *b {
				x = 1
			}
			return &x
		}
		u32 := func(x *uint32) *uint64 {
			if x == nil {
				return nil
			}
			y := uint64(*x)
			return &y
		}
		var have host.NAPI
		if inst != nil {
			have = *inst
		}
		for _, fl := range []field{
			{setting.KindNAPIThreaded, u64(e.Threaded), u64(have.Threaded)},
			{setting.KindNAPIDeferHardIRQs, u32(e.DeferHardIRQs), u32(have.DeferHardIRQs)},
			{setting.KindNAPIGROFlushTimeout, e.GROFlushTimeout, have.GROFlushTimeout},
			{setting.KindNAPIIRQSuspendTimeout, e.IRQSuspendTimeout, have.IRQSuspendTimeout},
		} {
			if fl.want == nil {
				continue
			}
			c := setting.NAPISetting(fl.kind, nic.Name, id, *fl.want, e.Reason)
			switch {
			case inst == nil:
				skip(e, c, why)
			case fl.have == nil:
				skip(e, c, fmt.Sprintf("unsupported: this kernel does not report %s per NAPI instance (napi-set: 6.13, threaded: 6.17)", c.Name()))
			default:
				c.Old = strconv.FormatUint(*fl.have, 10)
				add(e, c)
			}
		}
		if e.CPUs != nil {
			if inst == nil {
				skip(e, setting.Change{Kind: setting.KindThreadAffinity, Target: fmt.Sprintf("%s napi %d thread", nic.Name, id), Device: nic.Name,
					Value: e.CPUs.String(), Reason: e.Reason}, why)
				continue
			}
			out = append(out, napiThread(e, *inst)...)
		}
	}
	if e := p.BusyPoll; e != nil {
		if e.BusyRead != nil {
			c := setting.BusyRead(*e.BusyRead, e.Reason)
			c.Line = e.Line
			out = append(out, c)
		}
		if e.BusyPoll != nil {
			c := setting.BusyPoll(*e.BusyPoll, e.Reason)
			c.Line = e.Line
			out = append(out, c)
		}
	}
	return out
}

// napiThread places the kernel thread of n, or says why it cannot.
func napiThread(e NAPIEntry, n host.NAPI) []setting.Change {
	c, err := setting.NAPIThread(n, *e.CPUs, e.Reason)
	c.Line = e.Line
	if err != nil {
		return []setting.Change{{Kind: setting.KindThreadAffinity, Target: fmt.Sprintf("%s napi %d thread", n.Device, n.ID), Device: n.Device,
			Value: e.CPUs.String(), Reason: e.Reason, Line: e.Line, Status: setting.StatusSkipped,
			Note: err.Error() + ": its thread exists once threaded is on; apply the plan again to place it"}}
	}
	if n.CPUs != nil {
		c.Old = n.CPUs.String()
	}
	return []setting.Change{c}
}
