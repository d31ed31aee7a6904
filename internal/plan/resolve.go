package plan

import (
	"fmt"
	"path"
	"sort"
	"strconv"
	"strings"

	"github.com/irqpilot/irqpilot/internal/cpuset"
	"github.com/irqpilot/irqpilot/internal/host"
)

// Kind is what a Setting changes; it decides the value's form and how two
// values are compared. The names match package apply's change kinds.
type Kind string

// Kinds of setting.
const (
	KindIRQAffinity Kind = "irq-affinity" // proc/irq/N/smp_affinity_list (cpulist)
	KindRPSCPUs     Kind = "rps-cpus"     // sys/class/net/DEV/queues/rx-N/rps_cpus (hex mask)
	KindRPSFlowCnt  Kind = "rps-flow-cnt" // sys/class/net/DEV/queues/rx-N/rps_flow_cnt (integer)
	KindXPSCPUs     Kind = "xps-cpus"     // sys/class/net/DEV/queues/tx-N/xps_cpus (hex mask)
	KindSysctl      Kind = "sysctl"       // proc/sys/... (integer)
	KindApp         Kind = "app-affinity" // every thread of the selected processes (cpulist); no Path
	KindIrqbalance  Kind = "irqbalance"   // the irqbalance daemon; no Path
	KindCoalesce    Kind = "coalesce"     // ethtool -C on a NIC; no Path
)

// Setting is one concrete desired setting on one host: a kernel file (or,
// for apps, irqbalance and coalescing, an object apply knows how to change)
// and the value it should hold.
type Setting struct {
	Kind   Kind   `json:"kind"`
	Target string `json:"target"` // for people: "irq 38 (eth0 queue 0)", "eth0 rx-0"
	// Path is the kernel file relative to the FS root ("proc/irq/38/smp_affinity_list"),
	// "" for KindApp, KindIrqbalance and KindCoalesce.
	Path string `json:"path,omitempty"`
	// Value is the desired value in the form the file takes: a cpulist for
	// smp_affinity_list and apps, a hex mask (nr_cpu_ids wide) for
	// rps_cpus/xps_cpus, a decimal for counts; for irqbalance "stopped" or
	// "banned_cpus=LIST"; for coalescing "rx_usecs=8 adaptive_rx=off …".
	Value string `json:"value"`
	// Current is the value in force per the host model, in the same form;
	// "" when unknown.
	Current string `json:"current,omitempty"`
	Reason  string `json:"reason"`
	// Skip, when not empty, says why this setting will not be written
	// (kernel-managed IRQ, irqbalance left alone).
	Skip string `json:"skip,omitempty"`
	Line int    `json:"line,omitempty"` // plan file line of the entry (0: generated)

	IRQ        *int             `json:"irq,omitempty"`
	Device     string           `json:"device,omitempty"`
	Queue      *int             `json:"queue,omitempty"`
	CPUs       *cpuset.Set      `json:"cpus,omitempty"` // for CPU-valued kinds
	App        *AppEntry        `json:"app,omitempty"`
	Irqbalance *IrqbalanceEntry `json:"irqbalance,omitempty"`
	Coalesce   *CoalesceEntry   `json:"coalesce,omitempty"`
}

// Status of a setting against the host model.
const (
	StatusSkip      = "skip"      // will not be written (Skip says why)
	StatusUnchanged = "unchanged" // already in force
	StatusChange    = "change"    // differs from what is in force
	StatusUnknown   = "unknown"   // current value unknown; apply reads it
)

// Status compares the setting with its current value.
func (s Setting) Status() string {
	switch {
	case s.Skip != "":
		return StatusSkip
	case s.Current == "":
		return StatusUnknown
	}
	if same, err := SameValue(s.Kind, s.Current, s.Value); err == nil && same {
		return StatusUnchanged
	}
	return StatusChange
}

// SameValue compares two values of a kind semantically: cpulists "0-3" and
// "0,1,2,3" are equal, masks "f" and "00000000,0000000f" are equal, counts
// compare as integers; other kinds compare with white space normalised.
func SameValue(k Kind, a, b string) (bool, error) {
	a, b = strings.TrimSpace(a), strings.TrimSpace(b)
	switch k {
	case KindIRQAffinity, KindApp:
		return sameSets(cpuset.Parse, a, b)
	case KindRPSCPUs, KindXPSCPUs:
		return sameSets(cpuset.ParseMask, a, b)
	case KindRPSFlowCnt, KindSysctl:
		x, err := strconv.ParseInt(a, 10, 64)
		if err != nil {
			return false, fmt.Errorf("%q is not an integer", a)
		}
		y, err := strconv.ParseInt(b, 10, 64)
		if err != nil {
			return false, fmt.Errorf("%q is not an integer", b)
		}
		return x == y, nil
	}
	return strings.Join(strings.Fields(a), " ") == strings.Join(strings.Fields(b), " "), nil
}

func sameSets(parse func(string) (cpuset.Set, error), a, b string) (bool, error) {
	x, err := parse(a)
	if err != nil {
		return false, err
	}
	y, err := parse(b)
	if err != nil {
		return false, err
	}
	return x.Equal(y), nil
}

// Paths of the kernel files settings write, relative to the FS root.
func irqAffinityPath(irq int) string { return fmt.Sprintf("proc/irq/%d/smp_affinity_list", irq) }
func rxPath(dev string, q int, file string) string {
	return fmt.Sprintf("sys/class/net/%s/queues/rx-%d/%s", dev, q, file)
}
func txPath(dev string, q int, file string) string {
	return fmt.Sprintf("sys/class/net/%s/queues/tx-%d/%s", dev, q, file)
}

// SockFlowPath is the sysctl file of net.core.rps_sock_flow_entries.
const SockFlowPath = "proc/sys/net/core/rps_sock_flow_entries"

// ManagedSkip is the reason a kernel-managed IRQ is left alone.
const ManagedSkip = "kernel-managed affinity: the kernel spreads this queue's IRQ over the CPUs that use the queue and refuses writes; left as is"

// cpuView is what resolving and policies need to know about a host's CPUs.
type cpuView struct {
	exists  cpuset.Set
	online  cpuset.Set
	nrCPUs  int // mask width (nr_cpu_ids)
	unknown bool
}

func viewCPUs(h *host.Host) cpuView {
	var v cpuView
	var ids []int
	for _, c := range h.CPUs {
		ids = append(ids, c.ID)
	}
	v.exists = cpuset.Of(ids...).Union(h.Topology.Possible)
	v.online = h.Topology.Online
	if v.online.IsEmpty() {
		var on []int
		for _, c := range h.CPUs {
			if c.Online {
				on = append(on, c.ID)
			}
		}
		v.online = cpuset.Of(on...)
	}
	v.exists = v.exists.Union(v.online)
	v.nrCPUs = v.exists.Max() + 1
	v.unknown = v.online.IsEmpty()
	return v
}

// checkCPUs reports CPUs that do not exist or are offline.
func (v cpuView) check(l *errList, line int, field string, s cpuset.Set) {
	if v.unknown {
		l.add(line, field, "cannot check CPUs %s: the host's CPU topology is unknown", s)
		return
	}
	if gone := s.Difference(v.exists); !gone.IsEmpty() {
		l.add(line, field, "%s not exist on this host (it has CPUs %s)", cpuWord(gone, "does", "do"), v.exists)
		return
	}
	if off := s.Difference(v.online); !off.IsEmpty() {
		l.add(line, field, "%s offline", cpuWord(off, "is", "are"))
	}
}

// cpuWord formats "CPU 7 is" / "CPUs 6-7 are".
func cpuWord(s cpuset.Set, one, many string) string {
	if s.Len() == 1 {
		return fmt.Sprintf("CPU %s %s", s, one)
	}
	return fmt.Sprintf("CPUs %s %s", s, many)
}

// Resolve checks the plan against the host and turns its selectors into
// concrete settings, in plan order: IRQs, rx queues, tx queues,
// rps_sock_flow_entries, apps, irqbalance, coalescing. Unknown IRQs,
// devices and queues, offline or absent CPUs, and two entries that select the
// same thing are errors naming the file, line and field. Kernel-managed IRQs
// come back with Skip set.
func Resolve(p *Plan, h *host.Host) ([]Setting, error) {
	l := &errList{file: p.File}
	check(p, l)
	if len(l.errs) > 0 {
		return nil, l.err()
	}
	v := viewCPUs(h)
	var out []Setting
	claimed := map[string]int{} // path → line (or -1-index for generated) of the entry that set it
	claim := func(line int, field string, s Setting) {
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
			cpus := e.CPUs
			s := Setting{
				Kind: KindIRQAffinity, Target: irqTarget(q), Path: irqAffinityPath(q.Number),
				Value: cpus.String(), Reason: e.Reason, Line: e.Line,
				IRQ: ptr(q.Number), Device: q.Device, Queue: q.Queue, CPUs: &cpus,
			}
			if q.Affinity != nil {
				s.Current = q.Affinity.String()
			}
			if q.Managed == host.ManagedYes {
				s.Skip = ManagedSkip
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
			target := fmt.Sprintf("%s rx-%d", nic.Name, rq.Index)
			if e.RPSCPUs != nil {
				cpus := *e.RPSCPUs
				s := Setting{Kind: KindRPSCPUs, Target: target, Path: rxPath(nic.Name, rq.Index, "rps_cpus"),
					Value: cpus.Mask(v.nrCPUs), Reason: e.Reason, Line: e.Line,
					Device: nic.Name, Queue: ptr(rq.Index), CPUs: &cpus}
				if rq.RPSCPUs != nil {
					s.Current = rq.RPSCPUs.Mask(v.nrCPUs)
				}
				claim(e.Line, f, s)
			}
			if e.RPSFlowCnt != nil {
				s := Setting{Kind: KindRPSFlowCnt, Target: target, Path: rxPath(nic.Name, rq.Index, "rps_flow_cnt"),
					Value: itoa(*e.RPSFlowCnt), Reason: e.Reason, Line: e.Line, Device: nic.Name, Queue: ptr(rq.Index)}
				if rq.RPSFlowCnt != nil {
					s.Current = itoa(*rq.RPSFlowCnt)
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
			cpus := e.XPSCPUs
			s := Setting{Kind: KindXPSCPUs, Target: fmt.Sprintf("%s tx-%d", nic.Name, tq.Index),
				Path: txPath(nic.Name, tq.Index, "xps_cpus"), Value: cpus.Mask(v.nrCPUs), Reason: e.Reason,
				Line: e.Line, Device: nic.Name, Queue: ptr(tq.Index), CPUs: &cpus}
			if tq.XPSCPUs != nil {
				s.Current = tq.XPSCPUs.Mask(v.nrCPUs)
			}
			claim(e.Line, f, s)
		}
	}

	if e := p.RPSSockFlowEntries; e != nil {
		s := Setting{Kind: KindSysctl, Target: "net.core.rps_sock_flow_entries", Path: SockFlowPath,
			Value: itoa(e.Value), Reason: e.Reason, Line: e.Line}
		if h.RPSSockFlowEntries != nil {
			s.Current = itoa(*h.RPSSockFlowEntries)
		}
		claim(e.Line, "rps_sock_flow_entries", s)
	}

	for i, e := range p.Apps {
		f := fmt.Sprintf("apps[%d]", i)
		v.check(l, e.Line, f+".cpus", e.CPUs)
		e := e
		cpus := e.CPUs
		out = append(out, Setting{Kind: KindApp, Target: e.Selector(), Value: cpus.String(), Reason: e.Reason,
			Line: e.Line, CPUs: &cpus, App: &e})
	}

	if e := p.Irqbalance; e != nil {
		e := *e
		s := Setting{Kind: KindIrqbalance, Target: "irqbalance", Reason: e.Reason, Line: e.Line, Irqbalance: &e}
		switch e.Mode {
		case IrqbalanceLeave:
			s.Value = "leave"
			s.Current = map[bool]string{true: "running", false: "stopped"}[h.Irqbalance.Running]
			s.Skip = "irqbalance is left as it is"
		case IrqbalanceStop:
			s.Value = "stopped"
			if h.Irqbalance.Running {
				s.Current = "running"
			} else {
				s.Current = "stopped"
			}
		case IrqbalanceBan:
			v.check(l, e.Line, "irqbalance.banned_cpus", *e.BannedCPUs)
			s.Value = "banned_cpus=" + e.BannedCPUs.String()
			s.Current = "banned_cpus=" + h.Irqbalance.BannedCPUs.String()
		}
		out = append(out, s)
	}

	for i, e := range p.Coalesce {
		f := fmt.Sprintf("coalesce[%d]", i)
		nic := findNIC(h, e.Device, l, e.Line, f+".device")
		if nic == nil {
			continue
		}
		e := e
		s := Setting{Kind: KindCoalesce, Target: nic.Name + " coalescing", Value: coalesceValue(e, nil),
			Reason: e.Reason, Line: e.Line, Device: nic.Name, Coalesce: &e}
		if nic.Coalesce != nil {
			s.Current = coalesceValue(e, nic.Coalesce)
		}
		out = append(out, s)
	}

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
