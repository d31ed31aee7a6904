package policy

import (
	"fmt"
	"sort"
	"strings"

	"github.com/irqpilot/irqpilot/internal/cpuset"
	"github.com/irqpilot/irqpilot/internal/host"
	"github.com/irqpilot/irqpilot/internal/plan"
	"github.com/irqpilot/irqpilot/internal/setting"
)

// builder holds what every policy derives from the host.
type builder struct {
	h      *host.Host
	o      Options
	p      *plan.Plan
	v      plan.CPUView
	usable cpuset.Set // online, not isolated, not nohz_full: where IRQs and softirqs may go
	banned cpuset.Set // isolated ∪ nohz_full
	sib    map[int]cpuset.Set
	cpuOf  map[int]*host.CPU
}

func newBuilder(h *host.Host, o Options, policy string) (*builder, error) {
	b := &builder{h: h, o: o, v: plan.ViewCPUs(h), sib: map[int]cpuset.Set{}, cpuOf: map[int]*host.CPU{}}
	if b.v.Unknown {
		return nil, fmt.Errorf("the host's CPU topology is unknown (no online CPUs read)")
	}
	// isolcpus= (domain or managed_irq) and nohz_full= CPUs: never IRQs,
	// never softirq work.
	b.banned = h.Topology.Isolated.Union(h.Topology.NohzFull).Union(h.Topology.ManagedIRQIsolated)
	for i := range h.CPUs {
		c := &h.CPUs[i]
		b.cpuOf[c.ID] = c
		if c.Isolated || c.NohzFull {
			b.banned = b.banned.Add(c.ID)
		}
		if !c.Siblings.IsEmpty() {
			b.sib[c.ID] = c.Siblings.Add(c.ID)
		}
	}
	b.usable = b.v.Online.Difference(b.banned)
	if b.usable.IsEmpty() {
		return nil, fmt.Errorf("no usable CPU: every online CPU (%s) is isolated or nohz_full", b.v.Online)
	}
	b.p = &plan.Plan{Version: plan.Version, Policy: policy, Host: h.Hostname}
	if o.CPUsPerIRQCore <= 0 {
		b.o.CPUsPerIRQCore = 8
	}
	return b, nil
}

// start is how a policy begins: its builder, and the NICs it steers as
// pick (targets or napiTargets) selects them.
func start(h *host.Host, o Options, policy string, pick func(*builder) ([]*target, error)) (*builder, []*target, error) {
	b, err := newBuilder(h, o, policy)
	if err != nil {
		return nil, nil, err
	}
	ts, err := pick(b)
	return b, ts, err
}

// target is a NIC the policy steers.
type target struct {
	nic *host.NIC
	// queues are the queue indices with IRQs, ascending, and their IRQs
	// (movable and managed).
	queues []int
	irqs   map[int][]*host.IRQ
	// steer: RPS/XPS settings go on this device (false for a multi-queue
	// VLAN's lower… see targets).
	steer bool
	// line is the one interrupt line a NIC without queue IRQs has for all
	// its queues (a legacy INTx line: e1000, 8139cp), nil when none. Not
	// shared, it stands as queue 0's IRQ of a single-queue NIC; shared
	// with another device, it is left where it is (moving it would move
	// the other's interrupts).
	line *host.IRQ
}

// lineWhy says how the NIC's receive work is interrupted, for the reasons
// of a NIC without queue IRQs.
func (t *target) lineWhy() string {
	switch {
	case t.line == nil:
		return t.nic.Name + " has no IRQ"
	case len(t.line.SharedWith) > 0:
		var others []string
		for _, d := range append([]string{t.line.Device}, t.line.SharedWith...) {
			if d != t.nic.Name {
				others = append(others, d)
			}
		}
		return fmt.Sprintf("%s's one interrupt line, IRQ %d, is shared with %s and left where it is (moving it would move their interrupts too)",
			t.nic.Name, t.line.Number, strings.Join(others, ", "))
	default:
		return fmt.Sprintf("%s has one interrupt line, IRQ %d, for its %d queues", t.nic.Name, t.line.Number, len(t.nic.RxQueues))
	}
}

// queueCount is how many queues the NIC uses: its queues with IRQs, or its
// rx queues when no IRQ is known (virtual devices).
func (t *target) queueCount() int {
	if len(t.queues) > 0 {
		return len(t.queues)
	}
	return len(t.nic.RxQueues)
}

// movable reports whether any queue IRQ may be written.
func (t *target) movable() bool {
	for _, qs := range t.irqs {
		for _, q := range qs {
			if q.Movable() {
				return true
			}
		}
	}
	return false
}

// targets selects the NICs to steer: o.Devices, or every physical NIC and
// the VLANs stacked on one. Stacked devices: RPS goes on the device that
// receives. For a VLAN whose lower device has a single rx queue, that is the
// VLAN device (RPS/RFS on a single-queue NIC set RPS on eth1.xx); the single-queue lower gets the
// same RPS too, because current kernels run RPS on the device the driver
// hands packets to, before VLAN untagging (RPS/RFS on a single-queue NIC's 2.6.32 did it after).
// A VLAN on a multi-queue lower is not steered: RSS and the lower's queues
// already spread it.
func (b *builder) targets() ([]*target, error) {
	var nics []*host.NIC
	if len(b.o.Devices) > 0 {
		for _, name := range b.o.Devices {
			nic := b.h.NIC(name)
			if nic == nil {
				if !b.hasNetIRQs(name) {
					return nil, fmt.Errorf("network interface %s not found on this host", name)
				}
				continue // added below from its IRQs
			}
			nics = append(nics, nic)
		}
	} else {
		phys := map[string]bool{}
		out := defaultRouteOut(b.h, b.o)
		for i := range b.h.NICs {
			n := &b.h.NICs[i]
			if !n.Virtual && n.Name != "lo" && !out[n.Name] {
				phys[n.Name] = true
				nics = append(nics, n)
			}
		}
		for i := range b.h.NICs {
			n := &b.h.NICs[i]
			if n.Kind == "vlan" && phys[n.Lower] && !out[n.Name] {
				nics = append(nics, n)
			}
		}
	}
	// Network devices known only from their IRQs (a capture without
	// /sys/class/net, a device the readers could not open): their queue IRQs
	// are placed; there are no queues to steer.
	seen := map[string]bool{}
	for i := range b.h.NICs {
		seen[b.h.NICs[i].Name] = true
	}
	wanted := map[string]bool{}
	for _, d := range b.o.Devices {
		wanted[d] = true
	}
	for i := range b.h.IRQs {
		q := &b.h.IRQs[i]
		if q.Class != host.ClassNetwork || q.Device == "" || q.Queue == nil || seen[q.Device] {
			continue
		}
		if len(b.o.Devices) > 0 && !wanted[q.Device] {
			continue
		}
		seen[q.Device] = true
		node := -1
		if q.Node != nil {
			node = *q.Node
		}
		nics = append(nics, &host.NIC{Name: q.Device, Node: node})
	}
	var out []*target
	for _, nic := range nics {
		t := &target{nic: nic, irqs: map[int][]*host.IRQ{}, steer: true}
		for i := range b.h.IRQs {
			q := &b.h.IRQs[i]
			if q.Device == nic.Name && q.Queue != nil {
				if _, ok := t.irqs[*q.Queue]; !ok {
					t.queues = append(t.queues, *q.Queue)
				}
				t.irqs[*q.Queue] = append(t.irqs[*q.Queue], q)
			}
		}
		sort.Ints(t.queues)
		if len(t.queues) == 0 {
			t.line = b.lineOf(nic)
			if t.line != nil && len(t.line.SharedWith) == 0 && len(nic.RxQueues) <= 1 {
				// A single-queue NIC's only line is its queue's IRQ.
				t.queues, t.irqs[0] = []int{0}, []*host.IRQ{t.line}
			}
		}
		if nic.Kind == "vlan" {
			lower := b.h.NIC(nic.Lower)
			t.steer = lower != nil && len(lower.RxQueues) == 1
		}
		out = append(out, t)
	}
	return out, nil
}

// lineOf is nic's one network IRQ of no queue when it has exactly one
// (its own or shared), nil otherwise.
func (b *builder) lineOf(nic *host.NIC) *host.IRQ {
	var line *host.IRQ
	for _, n := range nic.IRQs {
		q := b.h.IRQ(n)
		if q == nil || q.Class != host.ClassNetwork || q.Queue != nil {
			continue
		}
		if line != nil {
			return nil // several: a driver's misc vectors, not one line
		}
		line = q
	}
	return line
}

func (b *builder) hasNetIRQs(dev string) bool {
	for i := range b.h.IRQs {
		if q := &b.h.IRQs[i]; q.Device == dev && q.Queue != nil && q.Class == host.ClassNetwork {
			return true
		}
	}
	return false
}

// vlanOver returns the steered VLAN targets stacked on name.
func vlanOver(ts []*target, name string) []*target {
	var out []*target
	for _, t := range ts {
		if t.nic.Kind == "vlan" && t.nic.Lower == name && t.steer {
			out = append(out, t)
		}
	}
	return out
}

func (b *builder) note(format string, args ...any) {
	b.p.Notes = append(b.p.Notes, fmt.Sprintf(format, args...))
}

func (b *builder) irq(n int, cpus cpuset.Set, reason string) {
	b.p.IRQs = append(b.p.IRQs, plan.IRQEntry{IRQ: ptr(n), CPUs: cpus, Reason: reason})
}

func (b *builder) rps(dev string, q int, cpus *cpuset.Set, cnt *int, reason string) {
	b.p.RxQueues = append(b.p.RxQueues, plan.RxQueueEntry{Device: dev, Queue: ptr(q), RPSCPUs: cpus, RPSFlowCnt: cnt, Reason: reason})
}

func (b *builder) xps(dev string, q int, cpus cpuset.Set, reason string) {
	b.p.TxQueues = append(b.p.TxQueues, plan.TxQueueEntry{Device: dev, Queue: ptr(q), XPSCPUs: cpus, Reason: reason})
}

// managedNote records kernel-managed queue IRQs left alone.
func (b *builder) managedNote(t *target) {
	var managed []int
	for _, q := range t.queues {
		for _, irq := range t.irqs[q] {
			if !irq.Movable() {
				managed = append(managed, irq.Number)
			}
		}
	}
	if len(managed) > 0 {
		b.note("%s: %s kernel-managed; left where the kernel put them", t.nic.Name, irqWord(managed, "is", "are"))
	}
}

// rfs sets rps_sock_flow_entries (o.SockFlowEntries overrides the policy's
// default) and returns the value. Counts are powers of two: the kernel rounds
// them up and reports the rounded value, so only a power of two reads back as
// written.
func (b *builder) rfs(entries int, why string) int {
	if b.o.SockFlowEntries > 0 {
		entries = b.o.SockFlowEntries
	}
	entries = floorPow2(min(entries, setting.MaxSockFlowEntries))
	b.p.RPSSockFlowEntries = &plan.SockFlowEntry{Value: entries, Reason: why}
	return entries
}

// flowCnt is rps_flow_cnt per rx queue = entries / rx queues
// (Documentation/networking/scaling.rst), rounded down to a power of two.
func flowCnt(entries, queues int) int {
	if queues < 1 {
		queues = 1
	}
	if entries > 0 && entries < queues {
		// A table smaller than the queue count still turns RFS on: one
		// flow per queue, not 0 (which would turn it off unannounced).
		return 1
	}
	return floorPow2(entries / queues)
}

// app adds the application placement (or app_cpus advice).
func (b *builder) app(cpus cpuset.Set, reason string) error {
	if b.o.AppCPUs != nil {
		cpus = *b.o.AppCPUs
		reason = "application CPUs given on the command line"
		if gone := cpus.Difference(b.v.Exists); !gone.IsEmpty() {
			return fmt.Errorf("application %s not exist on this host (it has CPUs %s)", plan.CPUWord(gone, "does", "do"), b.v.Exists)
		}
		if off := cpus.Difference(b.v.Online); !off.IsEmpty() {
			return fmt.Errorf("application %s offline", plan.CPUWord(off, "is", "are"))
		}
	}
	if cpus.IsEmpty() {
		b.note("no CPU left for the application")
		return nil
	}
	if b.o.AppCPUs == nil {
		b.noteAwayFromNIC(cpus)
	}
	if b.o.App == "" {
		c := cpus
		b.p.AppCPUs = &c
		return nil
	}
	e, err := plan.ParseAppSelector(b.o.App)
	if err != nil {
		return err
	}
	e.CPUs, e.Reason = cpus, reason
	b.p.Apps = append(b.p.Apps, e)
	return nil
}

// irqbalance sets the irqbalance handling. pins says whether the plan pins
// IRQs (so a running irqbalance would undo it); irqCPUs are the CPUs IRQs
// may use (for mode ban: every other online CPU is banned).
func (b *builder) irqbalance(pins bool, irqCPUs cpuset.Set) error {
	mode := b.o.Irqbalance
	running := b.h.Irqbalance.Running
	var reason string
	if mode == "" {
		switch {
		case pins && running:
			mode, reason = plan.IrqbalanceStop, "irqbalance is running and would move the pinned IRQs back (every source in docs/sources.md stops it)"
		case pins:
			mode, reason = plan.IrqbalanceLeave, "irqbalance is not running"
		default:
			mode, reason = plan.IrqbalanceLeave, "this policy does not pin IRQs"
		}
	} else {
		reason = "irqbalance handling given on the command line"
	}
	e := &plan.IrqbalanceEntry{Mode: mode, Reason: reason}
	switch mode {
	case plan.IrqbalanceLeave, plan.IrqbalanceStop:
	case plan.IrqbalanceBan:
		ban := b.v.Online.Difference(irqCPUs).Union(b.banned.Intersect(b.v.Online))
		if !pins {
			ban = b.banned.Intersect(b.v.Online)
		}
		if ban.IsEmpty() {
			return fmt.Errorf("irqbalance ban: no CPU to ban (IRQs may use every online CPU)")
		}
		e.BannedCPUs = &ban
		e.Reason += "; keep its IRQs off the application and isolated CPUs"
	default:
		return fmt.Errorf("irqbalance mode %q is not one of leave, ban, stop", mode)
	}
	b.p.Irqbalance = e
	return nil
}

// floorPow2 is the largest power of two ≤ n (0 for n < 1).
func floorPow2(n int) int {
	if n < 1 {
		return 0
	}
	p := 1
	for p*2 <= n {
		p *= 2
	}
	return p
}

func ptr[T any](v T) *T { return &v }

// skipStacked reports whether t is a VLAN handled with its lower device (or
// not steered at all), noting why.
func skipStacked(b *builder, ts []*target, t *target) bool {
	if t.nic.Kind != "vlan" {
		return false
	}
	if !t.steer {
		b.note("%s: not steered; its multi-queue lower device %s receives and spreads the packets", t.nic.Name, t.nic.Lower)
		return true
	}
	for _, o := range ts {
		if o.nic.Name == t.nic.Lower {
			return true // placed together with its lower device
		}
	}
	return false
}

// queuePos maps a queue index to its position among t's queues with IRQs
// (index modulo the queue count for queues without an IRQ).
func queuePos(t *target, index int) int {
	for pos, q := range t.queues {
		if q == index {
			return pos
		}
	}
	n := t.queueCount()
	if n == 0 {
		return 0
	}
	return index % n
}

// irqWord formats "IRQ 36 is" / "IRQs 103-104 are".
func irqWord(irqs []int, one, many string) string {
	if len(irqs) == 1 {
		return fmt.Sprintf("IRQ %d %s", irqs[0], one)
	}
	return fmt.Sprintf("IRQs %s %s", cpuset.Of(irqs...), many)
}

// noteAwayFromNIC says when the application's CPUs lie on NUMA nodes other
// than the steered NICs': its packets then cross the interconnect. Which
// CPUs, why the policy chose them (the NIC's node went to queue IRQs or
// has too few CPUs), and the alternative that keeps it near.
func (b *builder) noteAwayFromNIC(app cpuset.Set) {
	ts, err := b.targets()
	if err != nil || len(ts) == 0 {
		return
	}
	var near cpuset.Set
	nodes := map[int]bool{}
	for _, t := range ts {
		if P, local := b.nodeCPUs(t.nic); local {
			near = near.Union(P)
			for _, c := range P.CPUs() {
				nodes[b.h.CPUNode(c)] = true
			}
		}
	}
	if near.IsEmpty() || len(b.h.Topology.Nodes) < 2 {
		return
	}
	away := app.Difference(near)
	if away.IsEmpty() {
		return
	}
	var ids []int
	for n := range nodes {
		ids = append(ids, n)
	}
	word := "node"
	if len(ids) > 1 {
		word = "nodes"
	}
	msg := fmt.Sprintf("the application gets CPUs %s away from the NIC's NUMA %s %s (CPUs %s): its packets cross the interconnect there", away, word, cpuset.Of(ids...), near)
	if kept := app.Intersect(near); !kept.IsEmpty() {
		msg += fmt.Sprintf("; to keep it near the NIC, give --app-cpus %s (its CPUs on the NIC's %s), at the cost of fewer CPUs", kept, word)
	} else {
		msg += fmt.Sprintf("; the NIC's %s is left to its queue IRQs (--app-cpus puts the application there anyway)", word)
	}
	b.note("%s", msg)
}
