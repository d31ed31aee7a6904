package plan

import (
	"fmt"
	"path"
	"sort"
	"strings"

	"github.com/irqpilot/irqpilot/internal/cpuset"
	"github.com/irqpilot/irqpilot/internal/host"
	"github.com/irqpilot/irqpilot/internal/setting"
)

// What a plan's selectors select on a host: its CPUs, IRQs, interfaces
// and queues, each lookup recording an error naming the field when it
// finds nothing.

// CPUView is what resolving and the policies need to know about a host's
// CPUs.
type CPUView struct {
	Exists  cpuset.Set
	Online  cpuset.Set
	NrCPUs  int // mask width (nr_cpu_ids)
	Unknown bool
}

// ViewCPUs reads h's CPUs: those that exist (possible, listed, online) and
// those online (the topology's list, else the CPUs' own flags).
func ViewCPUs(h *host.Host) CPUView {
	var v CPUView
	var ids []int
	for _, c := range h.CPUs {
		ids = append(ids, c.ID)
	}
	v.Exists = cpuset.Of(ids...).Union(h.Topology.Possible)
	v.Online = h.Topology.Online
	if v.Online.IsEmpty() {
		var on []int
		for _, c := range h.CPUs {
			if c.Online {
				on = append(on, c.ID)
			}
		}
		v.Online = cpuset.Of(on...)
	}
	v.Exists = v.Exists.Union(v.Online)
	v.NrCPUs = v.Exists.Max() + 1
	v.Unknown = v.Online.IsEmpty()
	return v
}

// mask is s as a hex mask as wide as the host's CPU ids.
func (v CPUView) mask(s cpuset.Set) string { return s.Mask(v.NrCPUs) }

// checkCPUs reports CPUs that do not exist or are offline.
func (v CPUView) check(l *errList, line int, field string, s cpuset.Set) {
	if v.Unknown {
		l.add(line, field, "cannot check CPUs %s: the host's CPU topology is unknown", s)
		return
	}
	if gone := s.Difference(v.Exists); !gone.IsEmpty() {
		l.add(line, field, "%s not exist on this host (it has CPUs %s)", CPUWord(gone, "does", "do"), v.Exists)
		return
	}
	if off := s.Difference(v.Online); !off.IsEmpty() {
		l.add(line, field, "%s offline", CPUWord(off, "is", "are"))
	}
}

// CPUWord formats "CPU 7 is" / "CPUs 6-7 are".
func CPUWord(s cpuset.Set, one, many string) string {
	if s.Len() == 1 {
		return fmt.Sprintf("CPU %s %s", s, one)
	}
	return fmt.Sprintf("CPUs %s %s", s, many)
}

func irqTarget(q *host.IRQ) string {
	name := strings.Join(q.Actions, ",")
	switch {
	case q.Device != "" && q.Queue != nil:
		kind := q.QueueKind
		if kind != "" {
			kind += " "
		}
		return fmt.Sprintf("irq %d (%s %squeue %d)", q.Number, q.Device, kind, *q.Queue)
	case name != "":
		return fmt.Sprintf("irq %d (%s)", q.Number, name)
	}
	return fmt.Sprintf("irq %d", q.Number)
}

// selectIRQs returns the IRQs an entry selects, recording an error when it
// selects none.
func selectIRQs(h *host.Host, e IRQEntry, l *errList, f string) []*host.IRQ {
	var out []*host.IRQ
	switch {
	case e.IRQ != nil:
		q := h.IRQ(*e.IRQ)
		if q == nil {
			l.add(e.Line, f+".irq", "IRQ %d does not exist on this host", *e.IRQ)
			return nil
		}
		return []*host.IRQ{q}
	case e.Device != "":
		known := false
		var queues []int
		for i := range h.IRQs {
			q := &h.IRQs[i]
			if q.Device != e.Device {
				continue
			}
			known = true
			if q.Queue != nil {
				queues = append(queues, *q.Queue)
				if *q.Queue == *e.Queue {
					out = append(out, q)
				}
			}
		}
		if len(out) == 0 {
			switch {
			case !known && h.NIC(e.Device) == nil && blockDev(h, e.Device) == nil:
				l.add(e.Line, f+".device", "device %s not found on this host", e.Device)
			case len(queues) == 0:
				l.add(e.Line, f+".queue", "device %s has no queue IRQs", e.Device)
			default:
				l.add(e.Line, f+".queue", "device %s has no IRQ for queue %d (queues with IRQs: %s)",
					e.Device, *e.Queue, cpuset.Of(queues...))
			}
		}
		return out
	case e.Action != "":
		for i := range h.IRQs {
			q := &h.IRQs[i]
			for _, a := range q.Actions {
				if ok, _ := path.Match(e.Action, a); ok {
					out = append(out, q)
					break
				}
			}
		}
		if len(out) == 0 {
			l.add(e.Line, f+".action", "pattern %q matches no IRQ on this host", e.Action)
		}
	}
	return out
}

func blockDev(h *host.Host, name string) *host.BlockDev {
	for i := range h.Block {
		if h.Block[i].Name == name {
			return &h.Block[i]
		}
	}
	return nil
}

func findNIC(h *host.Host, name string, l *errList, line int, field string) *host.NIC {
	if nic := h.NIC(name); nic != nil {
		return nic
	}
	if blockDev(h, name) != nil {
		l.add(line, field, "%s is a block device, not a network interface", name)
		return nil
	}
	names := make([]string, 0, len(h.NICs))
	for _, n := range h.NICs {
		names = append(names, n.Name)
	}
	sort.Strings(names)
	l.add(line, field, "network interface %s not found on this host (it has: %s)", name, strings.Join(names, ", "))
	return nil
}

// pickQueues returns the queue of nic with index q, or every queue when q
// is nil, recording an error when there is none. dir is "rx" or "tx".
func pickQueues[Q any](nic *host.NIC, queues []Q, index func(*Q) int, dir string, q *int, l *errList, line int, field string) []*Q {
	if q == nil {
		out := make([]*Q, 0, len(queues))
		for i := range queues {
			out = append(out, &queues[i])
		}
		if len(out) == 0 {
			l.add(line, field, "%s has no %s queues", nic.Name, dir)
		}
		return out
	}
	for i := range queues {
		if index(&queues[i]) == *q {
			return []*Q{&queues[i]}
		}
	}
	l.add(line, field, "%s has no %s queue %d (it has %d %s queues)", nic.Name, dir, *q, len(queues), dir)
	return nil
}

func pickRx(nic *host.NIC, q *int, l *errList, line int, field string) []*host.RxQueue {
	return pickQueues(nic, nic.RxQueues, func(rq *host.RxQueue) int { return rq.Index }, "rx", q, l, line, field)
}

func pickTx(nic *host.NIC, q *int, l *errList, line int, field string) []*host.TxQueue {
	return pickQueues(nic, nic.TxQueues, func(tq *host.TxQueue) int { return tq.Index }, "tx", q, l, line, field)
}

// HostMismatch describes why the plan may not be meant for h ("" when it
// is: the plan names no host, the host's name is unknown, or they match).
func HostMismatch(p *Plan, h *host.Host) string {
	if p.Host == "" || h.Hostname == "" || p.Host == h.Hostname {
		return ""
	}
	return fmt.Sprintf("plan %s was made for host %s, this is %s", planName(p), p.Host, h.Hostname)
}

func planName(p *Plan) string {
	if p.File != "" {
		return p.File
	}
	return "(generated)"
}

// Processes is the entry's process selector as the setting registry takes
// it (apply resolves it to threads; live callers to PIDs).
func (a AppEntry) Processes() *setting.AppSelector {
	return &setting.AppSelector{PID: a.PID, Comm: a.Comm, Unit: a.Unit, Cgroup: a.Cgroup, All: a.All}
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
