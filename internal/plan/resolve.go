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

// A resolved plan is a list of setting.Change: one per concrete setting on
// this host, with Old set from the host model ("" when unknown) and Status
// skipped (Note saying why) for what will not be written.

// ManagedSkip is the reason a kernel-managed IRQ is left alone.
const ManagedSkip = "kernel-managed affinity: the kernel spreads this queue's IRQ over the CPUs that use the queue and refuses writes; left as is"

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

// Resolve checks the plan against the host and turns its selectors into
// concrete settings, in plan order: IRQs, rx queues, tx queues,
// rps_sock_flow_entries, apps, irqbalance, coalescing, NAPI, busy polling.
// Unknown IRQs, devices and queues, offline or absent CPUs, and two entries
// that select the same thing are errors naming the file, line and field.
// Kernel-managed IRQs come back with status skipped (note ManagedSkip).
func Resolve(p *Plan, h *host.Host) ([]setting.Change, error) {
	l := &errList{file: p.File, lines: p.fieldLines}
	check(p, l)
	if len(l.errs) > 0 {
		return nil, l.err()
	}
	v := ViewCPUs(h)
	var out []setting.Change
	claimed := map[string]int{} // path → line (or -1-index for generated) of the entry that set it
	claim := func(line int, field string, s setting.Change) {
		key := s.Path
		if key == "" {
			return
		}
		if first, dup := claimed[key]; dup {
			l.add(line, field, "%s is also set by the entry at %s", s.Target, where(first))
			return
		}
		claimed[key] = line
		out = append(out, s)
	}

	for i, e := range p.IRQs {
		f := fmt.Sprintf("irqs[%d]", i)
		v.check(l, e.Line, f+".cpus", e.CPUs)
		for _, q := range selectIRQs(h, e, l, f) {
			s := setting.IRQAffinity(q.Number, irqTarget(q), e.CPUs, e.Reason)
			s.Line, s.Device, s.Queue = e.Line, q.Device, q.Queue
			if q.Affinity != nil {
				s.Old = q.Affinity.String()
			}
			if q.Managed == host.ManagedYes {
				s.Status, s.Note = setting.StatusSkipped, ManagedSkip
			}
			claim(e.Line, f, s)
		}
	}

	for i, e := range p.RxQueues {
		f := fmt.Sprintf("rx_queues[%d]", i)
		nic := findNIC(h, e.Device, l, e.Line, f+".device")
		if nic == nil {
			continue
		}
		if e.RPSCPUs != nil {
			v.check(l, e.Line, f+".rps_cpus", *e.RPSCPUs)
		}
		for _, rq := range pickRx(nic, e.Queue, l, e.Line, f+".queue") {
			if e.RPSCPUs != nil {
				s := setting.RPSCPUs(nic.Name, rq.Index, *e.RPSCPUs, v.NrCPUs, e.Reason)
				s.Line = e.Line
				if rq.RPSCPUs != nil {
					s.Old = rq.RPSCPUs.Mask(v.NrCPUs)
				}
				claim(e.Line, f, s)
			}
			if e.RPSFlowCnt != nil {
				s := setting.RPSFlowCnt(nic.Name, rq.Index, *e.RPSFlowCnt, e.Reason)
				s.Line = e.Line
				if rq.RPSFlowCnt != nil {
					s.Old = itoa(*rq.RPSFlowCnt)
				}
				claim(e.Line, f, s)
			}
		}
	}

	for i, e := range p.TxQueues {
		f := fmt.Sprintf("tx_queues[%d]", i)
		nic := findNIC(h, e.Device, l, e.Line, f+".device")
		if nic == nil {
			continue
		}
		v.check(l, e.Line, f+".xps_cpus", e.XPSCPUs)
		for _, tq := range pickTx(nic, e.Queue, l, e.Line, f+".queue") {
			s := setting.XPSCPUs(nic.Name, tq.Index, e.XPSCPUs, v.NrCPUs, e.Reason)
			s.Line = e.Line
			if tq.XPSCPUs != nil {
				s.Old = tq.XPSCPUs.Mask(v.NrCPUs)
			}
			claim(e.Line, f, s)
		}
	}

	if e := p.RPSSockFlowEntries; e != nil {
		s := setting.SockFlowEntries(e.Value, e.Reason)
		s.Line = e.Line
		if h.RPSSockFlowEntries != nil {
			s.Old = itoa(*h.RPSSockFlowEntries)
		}
		claim(e.Line, "rps_sock_flow_entries", s)
	}

	for i, e := range p.Apps {
		f := fmt.Sprintf("apps[%d]", i)
		v.check(l, e.Line, f+".cpus", e.CPUs)
		out = append(out, setting.Change{Kind: setting.KindApp, Target: e.Selector(), Value: e.CPUs.String(), Reason: e.Reason,
			Line: e.Line, App: e.Processes()})
	}

	if e := p.Irqbalance; e != nil {
		s := setting.Change{Kind: setting.KindIrqbalance, Target: "irqbalance", Reason: e.Reason, Line: e.Line}
		state := map[bool]string{true: "running", false: "stopped"}[h.Irqbalance.Running]
		switch e.Mode {
		case IrqbalanceLeave:
			s.Value, s.Old = "leave", state
			s.Status, s.Note = setting.StatusSkipped, "irqbalance is left as it is"
		case IrqbalanceStop:
			s.Value, s.Old = "stopped", state
		case IrqbalanceBan:
			v.check(l, e.Line, "irqbalance.banned_cpus", *e.BannedCPUs)
			s.Value = "banned_cpus=" + e.BannedCPUs.String()
			s.Old = "banned_cpus=" + h.Irqbalance.BannedCPUs.String()
		}
		out = append(out, s)
	}

	for i, e := range p.Coalesce {
		f := fmt.Sprintf("coalesce[%d]", i)
		nic := findNIC(h, e.Device, l, e.Line, f+".device")
		if nic == nil {
			continue
		}
		s := setting.Change{Kind: setting.KindCoalesce, Target: nic.Name + " coalescing", Value: coalesceValue(e, nil),
			Reason: e.Reason, Line: e.Line, Device: nic.Name}
		if nic.Coalesce != nil {
			s.Old = coalesceValue(e, nic.Coalesce)
		}
		out = append(out, s)
	}

	out = append(out, resolveNAPI(p, h, v, l)...)

	if err := l.err(); err != nil {
		return nil, err
	}
	return out, nil
}

// coalesceValue formats the fields e sets, with e's values (cur nil) or the
// current ones.
func coalesceValue(e CoalesceEntry, cur *host.Coalesce) string {
	var parts []string
	num := func(name string, want *uint32, have uint32) {
		if want == nil {
			return
		}
		x := *want
		if cur != nil {
			x = have
		}
		parts = append(parts, fmt.Sprintf("%s=%d", name, x))
	}
	onoff := func(name string, want *bool, have bool) {
		if want == nil {
			return
		}
		x := *want
		if cur != nil {
			x = have
		}
		parts = append(parts, name+"="+map[bool]string{true: "on", false: "off"}[x])
	}
	c := cur
	if c == nil {
		c = &host.Coalesce{}
	}
	num("rx_usecs", e.RxUsecs, c.RxUsecs)
	num("rx_frames", e.RxFrames, c.RxFrames)
	num("tx_usecs", e.TxUsecs, c.TxUsecs)
	num("tx_frames", e.TxFrames, c.TxFrames)
	onoff("adaptive_rx", e.AdaptiveRx, c.AdaptiveRx)
	onoff("adaptive_tx", e.AdaptiveTx, c.AdaptiveTx)
	return strings.Join(parts, " ")
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

func pickRx(nic *host.NIC, q *int, l *errList, line int, field string) []*host.RxQueue {
	if q == nil {
		out := make([]*host.RxQueue, 0, len(nic.RxQueues))
		for i := range nic.RxQueues {
			out = append(out, &nic.RxQueues[i])
		}
		if len(out) == 0 {
			l.add(line, field, "%s has no rx queues", nic.Name)
		}
		return out
	}
	for i := range nic.RxQueues {
		if nic.RxQueues[i].Index == *q {
			return []*host.RxQueue{&nic.RxQueues[i]}
		}
	}
	l.add(line, field, "%s has no rx queue %d (it has %d rx queues)", nic.Name, *q, len(nic.RxQueues))
	return nil
}

func pickTx(nic *host.NIC, q *int, l *errList, line int, field string) []*host.TxQueue {
	if q == nil {
		out := make([]*host.TxQueue, 0, len(nic.TxQueues))
		for i := range nic.TxQueues {
			out = append(out, &nic.TxQueues[i])
		}
		if len(out) == 0 {
			l.add(line, field, "%s has no tx queues", nic.Name)
		}
		return out
	}
	for i := range nic.TxQueues {
		if nic.TxQueues[i].Index == *q {
			return []*host.TxQueue{&nic.TxQueues[i]}
		}
	}
	l.add(line, field, "%s has no tx queue %d (it has %d tx queues)", nic.Name, *q, len(nic.TxQueues))
	return nil
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
