package policy

import (
	"fmt"
	"sort"
	"strings"

	"github.com/irqpilot/irqpilot/internal/cpuset"
	"github.com/irqpilot/irqpilot/internal/host"
	"github.com/irqpilot/irqpilot/internal/load"
	"github.com/irqpilot/irqpilot/internal/plan"
	"github.com/irqpilot/irqpilot/internal/setting"
)

// Options parameterise the policies. The zero value gives each policy its
// defaults.
type Options struct {
	// Housekeeping is dedicated-core's set of CPUs that take every movable
	// IRQ (default: the lowest online, non-isolated CPU — CPU 0 normally).
	Housekeeping cpuset.Set
	// AppCPUs overrides the CPUs a policy gives the application.
	AppCPUs *cpuset.Set
	// App selects the application to pin: "comm:NAME", "pid:N",
	// "unit:NAME.service" or "cgroup:PATH". Empty: nothing is pinned and the
	// plan only advises app_cpus.
	App string
	// AppPIDs are the processes App selects now, for auto to read their
	// measured threads: live callers resolve comm:, unit: and cgroup:
	// selectors (planning itself reads nothing); pid:N needs none.
	AppPIDs []int
	// Devices restricts the plan to these network interfaces (any kind,
	// veth included) and their lower devices: only their IRQs, queues and
	// coalescing are planned (see ScopeToDevices). Default (see
	// ScopeDefault): every physical NIC and the VLANs on them except the
	// interface that carries the default route, and only the IRQs of
	// device queues (network and storage).
	Devices []string
	// MachineWide keeps machine-wide settings (rps_sock_flow_entries,
	// irqbalance) in a plan restricted by Devices; without Devices it keeps
	// the IRQs that serve no device queue (serial ports, ACPI, a NIC's
	// control vector…), which the default scope leaves out.
	MachineWide bool
	// IncludeDefaultRoute keeps the interface that carries the default
	// route (and the devices below or above it) in a plan made without
	// Devices.
	IncludeDefaultRoute bool
	// IRQCores is per-queue's number of CPUs that take queue IRQs
	// (0: one per CPUsPerIRQCore usable CPUs, at least 1, at most one per queue).
	IRQCores int
	// CPUsPerIRQCore is per-queue's ratio of usable CPUs to IRQ CPUs and
	// the node size from which RPS spreads softirq work over a group
	// (default 8, which reproduces AWS Graviton memcached tuning's table).
	CPUsPerIRQCore int
	// SockFlowEntries overrides the RFS table size (dedicated-core 65536,
	// rps-spread 32768). Rounded down to a power of two.
	SockFlowEntries int
	// Irqbalance overrides the policy's irqbalance handling ("" keeps the
	// policy's default: stop it when the policy pins IRQs and it runs).
	Irqbalance plan.IrqbalanceMode
	// Load is the current per-CPU load, when known (auto uses it).
	Load *MeasuredLoad
}

// MeasuredLoad is what the policies may know about current load.
type MeasuredLoad struct {
	// IRQShare is, per CPU id, the fraction of time (0…1) spent in hardirq
	// and softirq context.
	IRQShare map[int]float64
	// Load is the whole measurement (per-CPU time split, per-IRQ rates,
	// softirqs, softnet, busy threads), when known. Auto decides from it.
	Load *load.Load
}

// Measured wraps a measurement for the policies.
func Measured(l *load.Load) *MeasuredLoad {
	if l == nil {
		return nil
	}
	share := map[int]float64{}
	for _, c := range l.CPUs {
		share[c.ID] = (c.IRQ + c.SoftIRQ) / 100
	}
	return &MeasuredLoad{IRQShare: share, Load: l}
}

// Policy builds a plan for a host. Policies are pure functions: they read
// only h and o.
type Policy func(h *host.Host, o Options) (*plan.Plan, error)

// Policies by name.
var Policies = map[string]Policy{
	"dedicated-core": DedicatedCore,
	"per-queue":      PerQueue,
	"colocate":       Colocate,
	"rps-spread":     RPSSpread,
	"auto":           Auto,
}

// PolicyNames lists the policies, sorted.
func PolicyNames() []string {
	names := make([]string, 0, len(Policies))
	for n := range Policies {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Make runs the named policy and checks its output with the static rules.
func Make(name string, h *host.Host, o Options) (*plan.Plan, error) {
	pol, ok := Policies[name]
	if !ok {
		return nil, fmt.Errorf("unknown policy %q (known: %s)", name, strings.Join(PolicyNames(), ", "))
	}
	p, err := pol(h, o)
	if err != nil {
		return nil, fmt.Errorf("policy %s: %w", name, err)
	}
	if len(o.Devices) > 0 {
		plan.ScopeToDevices(p, h, o.Devices, o.MachineWide)
	} else {
		ScopeDefault(p, h, o)
	}
	if err := plan.Check(p); err != nil {
		return nil, fmt.Errorf("policy %s produced an invalid plan (a bug): %w", name, err)
	}
	return p, nil
}

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

// siblings returns c's SMT siblings including c.
func (b *builder) siblings(c int) cpuset.Set {
	if s, ok := b.sib[c]; ok {
		return s
	}
	return cpuset.Of(c)
}

// siblingsOf is the union of the siblings of every CPU in s.
func (b *builder) siblingsOf(s cpuset.Set) cpuset.Set {
	out := s
	for _, c := range s.CPUs() {
		out = out.Union(b.siblings(c))
	}
	return out
}

// cores counts distinct physical cores (SMT sibling groups) in s.
func (b *builder) cores(s cpuset.Set) int {
	seen := cpuset.Set{}
	n := 0
	for _, c := range s.CPUs() {
		if seen.Contains(c) {
			continue
		}
		n++
		seen = seen.Union(b.siblings(c))
	}
	return n
}

// nodeCPUs returns the usable CPUs NUMA-local to a NIC and whether they are
// local (false: the NIC's node is unknown or has no usable CPU, so every
// usable CPU is returned).
func (b *builder) nodeCPUs(nic *host.NIC) (cpuset.Set, bool) {
	node := nic.Node
	local := nic.LocalCPUs
	if node < 0 && local.IsEmpty() && nic.Lower != "" {
		if lower := b.h.NIC(nic.Lower); lower != nil {
			node, local = lower.Node, lower.LocalCPUs
		}
	}
	var s cpuset.Set
	if node >= 0 {
		for _, n := range b.h.Topology.Nodes {
			if n.ID == node {
				s = n.CPUs
			}
		}
		if s.IsEmpty() {
			var ids []int
			for _, c := range b.h.CPUs {
				if c.Node == node {
					ids = append(ids, c.ID)
				}
			}
			s = cpuset.Of(ids...)
		}
	}
	if s.IsEmpty() {
		s = local
	}
	s = s.Intersect(b.usable)
	// A single-node machine is local whatever the NIC reports.
	if s.IsEmpty() {
		return b.usable, len(b.h.Topology.Nodes) <= 1
	}
	return s, true
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
		if nic.Kind == "vlan" {
			lower := b.h.NIC(nic.Lower)
			t.steer = lower != nil && len(lower.RxQueues) == 1
		}
		out = append(out, t)
	}
	return out, nil
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
