package policy

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/irqpilot/irqpilot/internal/cpuset"
	"github.com/irqpilot/irqpilot/internal/diagnose"
	"github.com/irqpilot/irqpilot/internal/host"
	"github.com/irqpilot/irqpilot/internal/kernel"
	"github.com/irqpilot/irqpilot/internal/load"
	"github.com/irqpilot/irqpilot/internal/plan"
)

// RemedyPolicy is the Policy of a plan Remedy makes.
const RemedyPolicy = "remedy"

// Remedy is the change that addresses finding f on the measured load l, as
// a plan made with auto's parts: candidates shaped for the finding (the
// NIC's queue IRQs spread, RPS, the busiest IRQ moved, an IRQ moved to its
// device's node, NAPI threads placed, the traffic's consumer moved), each
// predicted by the cost model (model.go) and judged by auto's rules
// (judge: work only onto CPUs with the measured headroom, no CPU saturated
// by it, the busiest CPU never busier); the best that lowers the finding's
// CPUs' load wins, and the plan carries its prediction (Predict). The
// rules a remedy keeps:
//
//   - work moves only onto CPUs with measured spare time (diagnose's
//     headroom); where no CPU has it, there is no plan and why says what
//     would help instead;
//   - an application is moved only when it is an identified consumer of
//     the traffic (it serves a listening socket, load.SetConsumers, on the
//     device concerned): a busy thread beside the interrupts may just as
//     well be the load generator.
//
// why explains the plan (it is the plan's Why) or, with no plan, why not.
// o scopes the plan as for the policies (usable CPUs: not isolated, not
// nohz_full); its Devices and Load are not used.
func Remedy(h *host.Host, l *load.Load, f diagnose.Finding, o Options) (p *plan.Plan, why string) {
	if l == nil {
		return nil, "no measurement: a remedy moves work only onto CPUs measured to have the time for it"
	}
	o.Devices, o.Load = nil, nil
	if f.Device != "" && h.NIC(f.Device) != nil {
		o.Devices = []string{f.Device}
	}
	b, err := newBuilder(h, o, RemedyPolicy)
	if err != nil {
		return nil, err.Error()
	}
	r := &remedy{h: h, l: l, f: f, b: b, hot: cpuset.Of(f.CPUs...)}
	r.others = b.usable.Difference(r.hot)
	switch f.ID {
	case diagnose.IDInterruptBound:
		r.interruptBound()
	case diagnose.IDNICOneCPU:
		r.queueSpread()
		r.help = "What would help instead: more CPUs, or fewer interrupts (coalescing, interrupt deferral)."
	case diagnose.IDFewQueuesNoRPS:
		r.rpsOver(r.hot, fmt.Sprintf("%s's receive work", f.Device), r.cpuSoft())
		r.help = "RPS would only add inter-processor interrupts. What would help instead: more hardware queues (the NIC's channel count) or more CPUs."
	case diagnose.IDIRQRemoteNUMA:
		r.numaLocal()
	case diagnose.IDAppOnIRQCPU:
	case diagnose.IDNAPIThreadShared:
		r.napiThreads()
		r.help = "What would help instead: more CPUs, or less receive work per packet (interrupt deferral, GRO)."
	default:
		return nil, "no placement change addresses it"
	}
	bases := r.choose()
	if f.ID == diagnose.IDInterruptBound || f.ID == diagnose.IDAppOnIRQCPU {
		bases = r.withApps(bases)
	}
	if len(bases) == 0 {
		return nil, strings.Join(slices.DeleteFunc([]string{r.whyNot(), strings.Join(r.stays, " ")}, func(s string) bool { return s == "" }), " ")
	}
	best := bases[0]
	p = best.p
	p.Version, p.Policy, p.Host = plan.Version, RemedyPolicy, h.Hostname
	p.Why = fmt.Sprintf("remedy for %s: %s. Predicted from the measurement (%s): %s now → %s after.",
		f.Ref, best.name, certainty(l), describe(best.base, best.shown), describe(best.pred, best.shown))
	if len(r.stays) > 0 {
		p.Why += " " + strings.Join(r.stays, " ")
	}
	if len(p.IRQs) > 0 && h.Irqbalance.Running {
		p.Irqbalance = &plan.IrqbalanceEntry{Mode: plan.IrqbalanceStop, Reason: "irqbalance is running and would move the pinned IRQs back"}
	}
	p.Prediction = Predict(h, l, p, nil)
	if err := plan.Check(p); err != nil {
		return nil, fmt.Sprintf("the remedy's plan is invalid (a bug): %v", err)
	}
	return p, p.Why
}

// remedy is one Remedy in the making.
type remedy struct {
	h      *host.Host
	l      *load.Load
	f      diagnose.Finding
	b      *builder
	hot    cpuset.Set // the finding's CPUs
	others cpuset.Set // the usable CPUs work may move to
	cands  []namedPlan
	// noRoom: what had to move, when no CPU had the time for it.
	noRoom string
	// rejected: the first candidate the rules refused, and why.
	rejected []namedWhy
	help     string   // what would help instead of a move
	stays    []string // why a process named by the finding is not moved
}

// judged is a candidate with its predictions.
type judged struct {
	name        string
	p           *plan.Plan
	base, pred  Prediction
	shown       []int
	score, gain float64
}

// roomy are the CPUs of set with measured spare time, most spare first.
func (r *remedy) roomy(set cpuset.Set) []int {
	var out []int
	for _, c := range set.CPUs() {
		if hr := diagnose.HeadroomOf(r.l, c); hr.Measured && hr.Spare > 0 {
			out = append(out, c)
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		return diagnose.HeadroomOf(r.l, out[i]).Spare > diagnose.HeadroomOf(r.l, out[j]).Spare
	})
	return out
}

// noRoomFor is the sentence for work that fits on none of targets: the
// CPUs it could go to and how busy they are.
func (r *remedy) noRoomFor(targets cpuset.Set, what string, pct float64) string {
	var hs []string
	for _, c := range targets.CPUs() {
		hs = append(hs, diagnose.HeadroomOf(r.l, c).String())
	}
	if len(hs) == 0 {
		return fmt.Sprintf("No other CPU can take %s (%.0f%% of a CPU).", what, pct)
	}
	return fmt.Sprintf("No other CPU has the spare time for %s (%.0f%% of a CPU; %s; a CPU takes work only up to %.0f%% busy), so moving it would only move the wait.",
		what, pct, strings.Join(hs, ", "), diagnose.HeadroomBusyMaxPct)
}

// cpuSoft is the softirq time of the finding's CPUs.
func (r *remedy) cpuSoft() float64 {
	var s float64
	for _, c := range r.hot.CPUs() {
		if cl := r.l.CPU(c); cl != nil {
			s += cl.SoftIRQ
		}
	}
	return s
}

// interruptBound: by the device whose IRQs land on the CPU, its queue IRQs
// spread over the CPU and CPUs with room, or its receive work spread with
// RPS; with hardirq work dominating, the busiest IRQ moved whole.
func (r *remedy) interruptBound() {
	c := r.l.CPU(r.f.CPUs[0])
	if c == nil {
		return
	}
	soft := c.SoftIRQ >= c.IRQ && c.NetRx >= c.Block
	switch {
	case soft && r.f.Device != "" && r.h.NIC(r.f.Device) != nil:
		r.queueSpread()
		r.rpsOver(cpuset.Set{}, fmt.Sprintf("CPU%d's receive work", c.ID), c.SoftIRQ)
		r.help = "What would help instead: more CPUs, or less traffic per CPU; spread receive work (RPS, more queues) only onto CPUs that have spare time."
	case soft:
		r.help = fmt.Sprintf("No network device's IRQs land on CPU%d, so there is no device to steer its receive work from: steer the receiving NIC's queues (the inventory lists the NICs) only onto CPUs that have spare time.", c.ID)
	default:
		r.irqMove()
		r.help = "What would help instead: more CPUs, or fewer interrupts (coalescing, interrupt deferral)."
	}
}

// queueIRQsOn are the finding's movable IRQs of its device, busiest first.
func (r *remedy) queueIRQs() []int {
	var out []int
	for _, n := range r.f.IRQs {
		if q := r.h.IRQ(n); q != nil && q.Device == r.f.Device && q.Movable() {
			out = append(out, n)
		}
	}
	return out
}

// queueSpread spreads the device's queue IRQs, all on the finding's CPU,
// over that CPU and up to one CPU with room per further queue.
func (r *remedy) queueSpread() {
	irqs := r.queueIRQs()
	if len(irqs) < 2 || r.hot.Len() != 1 {
		return
	}
	from := r.hot.Min()
	roomy := r.roomy(r.others)
	if len(roomy) > len(irqs)-1 {
		roomy = roomy[:len(irqs)-1]
	}
	if len(roomy) == 0 {
		r.noRoom = r.noRoomFor(r.others, fmt.Sprintf("a share of CPU%d's interrupt work", from), r.l.CostPct(r.l.CPU(from))/2)
	}
	for k := len(roomy); k > 0; k-- {
		targets := append([]int{from}, roomy[:k]...)
		p := &plan.Plan{}
		for i, n := range irqs {
			to := targets[i%len(targets)]
			p.IRQs = append(p.IRQs, plan.IRQEntry{IRQ: ptr(n), CPUs: cpuset.Of(to),
				Reason: fmt.Sprintf("%s's queue IRQs share CPU%d's interrupt work with CPUs that have the time for it", r.f.Device, from)})
		}
		r.cands = append(r.cands, namedPlan{fmt.Sprintf("spread %s's queue IRQs over CPU%d and CPUs %s", r.f.Device, from, cpuset.Of(roomy[:k]...)), p})
	}
}

// rpsOver steers the device's receive work with RPS over keep and the
// CPUs with room (as many as pass the rules).
func (r *remedy) rpsOver(keep cpuset.Set, what string, pct float64) {
	ts, err := r.b.targets()
	if err != nil {
		return
	}
	var t *target
	for _, x := range ts {
		if x.nic.Name == r.f.Device && x.steer {
			t = x
		}
	}
	if t == nil {
		return
	}
	roomy := r.roomy(r.others)
	if len(roomy) == 0 && r.noRoom == "" {
		r.noRoom = r.noRoomFor(r.others, what, pct)
	}
	for k := len(roomy); k > 0; k-- {
		set := keep.Union(cpuset.Of(roomy[:k]...))
		p := rpsPlan(r.b, t, set, fmt.Sprintf("RPS spreads %s's receive work onto CPUs that have the time for it", t.nic.Name))
		if p != nil {
			r.cands = append(r.cands, namedPlan{fmt.Sprintf("RPS for %s on CPUs %s", t.nic.Name, set), p})
		}
	}
}

// irqMove moves the busiest IRQ on the finding's CPU whole onto one CPU
// with room (the kernel delivers an IRQ to one CPU of its list).
func (r *remedy) irqMove() {
	if len(r.f.IRQs) == 0 {
		return
	}
	n := r.f.IRQs[0]
	if q := r.h.IRQ(n); q == nil || !q.Movable() {
		return
	}
	roomy := r.roomy(r.others)
	if len(roomy) == 0 {
		r.noRoom = r.noRoomFor(r.others, fmt.Sprintf("IRQ %d", n), r.irqShare(n))
	}
	for _, c := range roomy {
		p := &plan.Plan{IRQs: []plan.IRQEntry{{IRQ: ptr(n), CPUs: cpuset.Of(c), Reason: fmt.Sprintf("IRQ %d leaves interrupt-bound CPU %s for a CPU with the time for it", n, r.hot)}}}
		r.cands = append(r.cands, namedPlan{fmt.Sprintf("move IRQ %d onto CPU %d", n, c), p})
	}
}

// irqShare is IRQ n's share of its CPUs' interrupt time, by its share of
// their interrupts (for a sentence; the model predicts the move itself).
func (r *remedy) irqShare(n int) float64 {
	q := r.l.IRQ(n)
	if q == nil {
		return 0
	}
	var share float64
	for c, rate := range q.PerCPU {
		if cl := r.l.CPU(c); cl != nil && cl.Interrupts > 0 {
			share += r.l.CostPct(cl) * min(1, rate/cl.Interrupts)
		}
	}
	return share
}

// numaLocal moves an IRQ served on another node than its device's onto
// one CPU of the device's node with room.
func (r *remedy) numaLocal() {
	if len(r.f.IRQs) != 1 {
		return
	}
	n := r.f.IRQs[0]
	q := r.h.IRQ(n)
	if q == nil || !q.Movable() {
		return
	}
	node := r.h.IRQNode(q)
	var local cpuset.Set
	for _, nd := range r.h.Topology.Nodes {
		if nd.ID == node {
			local = nd.CPUs.Intersect(r.b.usable).Difference(r.hot)
		}
	}
	roomy := r.roomy(local)
	if len(roomy) == 0 {
		r.noRoom = r.noRoomFor(local, fmt.Sprintf("IRQ %d on node %d", n, node), r.irqShare(n))
	}
	for _, c := range roomy {
		p := &plan.Plan{IRQs: []plan.IRQEntry{{IRQ: ptr(n), CPUs: cpuset.Of(c), Reason: fmt.Sprintf("IRQ %d is served on node %d's CPUs, its device's (node-local memory for its packets and completions)", n, node)}}}
		r.cands = append(r.cands, namedPlan{fmt.Sprintf("move IRQ %d onto CPU %d of its device's node %d", n, c, node), p})
	}
	r.help = "It stays remote: cross-node traffic costs less than a saturated CPU."
}

// napiThreads places the device's NAPI threads beside the consumer, on
// CPUs with room, instead of on its saturated CPU.
func (r *remedy) napiThreads() {
	if r.f.Device == "" || len(r.h.NAPIsOf(r.f.Device)) == 0 {
		return
	}
	roomy := r.roomy(r.others)
	if len(roomy) == 0 {
		var busy float64
		for _, t := range r.l.Tasks {
			if t.Kernel && r.hot.Contains(t.CPU) && napiThreadOf(t.Comm, r.f.Device) {
				busy += t.Busy
			}
		}
		r.noRoom = r.noRoomFor(r.others, "the NAPI threads", busy)
	}
	for k := len(roomy); k > 0; k-- {
		set := cpuset.Of(roomy[:k]...)
		p := &plan.Plan{NAPI: []plan.NAPIEntry{{Device: r.f.Device, Threaded: ptr(true), CPUs: &set,
			Reason: fmt.Sprintf("%s's NAPI threads run beside the consumer on CPU %s, not on it, on CPUs that have the time for them", r.f.Device, r.hot)}}}
		r.cands = append(r.cands, namedPlan{fmt.Sprintf("place %s's NAPI threads on CPUs %s", r.f.Device, set), p})
	}
}

// judge predicts p with the model Predict uses and applies auto's rules;
// reject is "" when p passes.
func (r *remedy) judge(name string, p *plan.Plan) (judged, string) {
	m := newModel(r.h, r.l, steeredDevices(p))
	j := judged{name: name, p: p, base: m.Predict(&plan.Plan{}), pred: m.Predict(p)}
	if _, reject := judge(r.l, j.base, j.pred); reject != "" {
		return j, reject
	}
	j.score = spreadScore(j.pred, r.hot)
	j.gain = spreadScore(j.base, r.hot) - j.score
	s := r.hot
	for c, v := range j.pred.Busy {
		if d := v - j.base.Busy[c]; d >= 1 || d <= -1 {
			s = s.Add(c)
		}
	}
	j.shown = s.CPUs()
	if len(j.shown) > 8 {
		j.shown = j.shown[:8]
	}
	return j, ""
}

// choose judges the candidates and returns those that pass, best first:
// for a remote IRQ in the order tried (locality is the point, not load),
// else by how far they lower the finding's busiest CPU (spreadScore); a
// candidate that does not lower it is refused.
func (r *remedy) choose() []judged {
	var out []judged
	for _, c := range r.cands {
		j, reject := r.judge(c.name, c.p)
		if reject == "" && r.f.ID != diagnose.IDIRQRemoteNUMA && j.gain <= moveEpsilon {
			reject = fmt.Sprintf("is not predicted to lower CPU %s's load", r.hot)
		}
		if reject != "" {
			r.rejected = append(r.rejected, namedWhy{c.name, reject})
			continue
		}
		out = append(out, j)
	}
	if r.f.ID != diagnose.IDIRQRemoteNUMA {
		sort.SliceStable(out, func(i, k int) bool { return out[i].score < out[k].score-moveEpsilon })
	}
	return out
}

// whyNot is why there is no plan: no room, or the rules refused every
// candidate, and what would help instead.
func (r *remedy) whyNot() string {
	var parts []string
	switch {
	case r.noRoom != "":
		parts = append(parts, r.noRoom)
	case len(r.rejected) > 0:
		x := r.rejected[0]
		parts = append(parts, fmt.Sprintf("Every change tried breaks a rule of the model's (%d tried; first, %s: %s).", len(r.rejected), x.name, x.why))
	}
	if r.help != "" {
		parts = append(parts, r.help)
	}
	return strings.Join(parts, " ")
}

// withApps adds to the first of bases (best first; none: no other change)
// that leaves room for it the move of each process the finding names that
// is an identified consumer of the device's traffic, onto CPUs with room
// left, when the rules pass; the others stay, and r.stays says why. It
// returns the plans with the moves, best first.
func (r *remedy) withApps(bases []judged) []judged {
	for _, pid := range r.f.PIDs {
		comm, threads := r.process(pid)
		if r.l.Consumers == nil {
			r.stays = append(r.stays, fmt.Sprintf("%s (pid %d) stays: which process consumes the traffic is known only from its sockets, read on the live machine, and a busy thread beside the interrupts may be the load generator.", comm, pid))
			continue
		}
		o := r.l.Consumer(pid)
		if o == nil {
			r.stays = append(r.stays, fmt.Sprintf("%s (pid %d) stays: it serves no listening socket, so it is not the consumer of the traffic here (a client or load generator), and moving it would not separate the traffic from its reader.", comm, pid))
			continue
		}
		comm = o.Comm
		if r.f.Device != "" && len(o.Devices) > 0 && !slices.Contains(o.Devices, r.f.Device) {
			r.stays = append(r.stays, fmt.Sprintf("%s (pid %d) stays: it serves the traffic of %s, not of %s, whose interrupts land on CPU %s.",
				comm, pid, strings.Join(o.Devices, ", "), r.f.Device, r.hot))
			continue
		}
		try := bases
		if len(try) == 0 {
			try = []judged{{p: &plan.Plan{}}}
		}
		var moved *judged
		for _, base := range try {
			if moved = r.moveApp(base, o, pid, threads); moved != nil {
				break
			}
		}
		if moved == nil {
			var total float64
			for _, t := range r.l.Tasks {
				if t.PID == pid && !t.Kernel && !r.others.Contains(t.CPU) {
					total += t.Busy
				}
			}
			r.stays = append(r.stays, fmt.Sprintf("%s. It stays: %s What would help instead: more CPUs, fewer of its threads, or the interrupt work spread over more queues.",
				consumerWhy(o), lowerFirst(r.noRoomFor(r.others, comm+"'s threads", total))))
			continue
		}
		bases = []judged{*moved}
	}
	return bases
}

// moveApp adds to base the move of consumer pid (threads busy threads)
// onto CPUs with room left after base: as many CPUs as it has busy
// threads, down to one, the least busy first, then each other single CPU.
// nil when no placement passes the rules.
func (r *remedy) moveApp(base judged, o *kernel.SocketOwner, pid, threads int) *judged {
	name := ""
	if base.name != "" {
		name = base.name + ", then "
	}
	m := newModel(r.h, r.l, steeredDevices(base.p))
	after := m.Predict(base.p)
	var roomy []int
	for _, c := range r.others.CPUs() {
		if hr := diagnose.HeadroomOf(r.l, c); hr.Measured && after.Busy[c] < diagnose.HeadroomBusyMaxPct {
			roomy = append(roomy, c)
		}
	}
	sort.SliceStable(roomy, func(i, j int) bool { return after.Busy[roomy[i]] < after.Busy[roomy[j]] })
	var sets []cpuset.Set
	for k := min(threads, len(roomy)); k > 1; k-- {
		sets = append(sets, cpuset.Of(roomy[:k]...))
	}
	for _, c := range roomy {
		sets = append(sets, cpuset.Of(c))
	}
	for _, set := range sets {
		p := base.p.Clone()
		p.Apps = append(p.Apps, plan.AppEntry{PID: pid, CPUs: set, Reason: consumerWhy(o) + fmt.Sprintf("; it leaves CPU %s to the interrupt work", r.hot)})
		j, reject := r.judge(fmt.Sprintf("%smove %s (pid %d) onto CPUs %s", name, o.Comm, pid, set), p)
		if reject == "" && j.gain > moveEpsilon {
			return &j
		}
	}
	return nil
}

// process is pid's name (its main thread's, else its busiest thread's)
// and how many of its threads the measurement saw busy.
func (r *remedy) process(pid int) (comm string, threads int) {
	for _, t := range r.l.Tasks {
		if t.PID != pid || t.Kernel {
			continue
		}
		if comm == "" || t.TID == pid {
			comm = t.Comm
		}
		threads++
	}
	return comm, threads
}

// consumerWhy is "memcached (pid 123) reads the traffic of veth0: it owns
// the listening socket on tcp 10.0.0.2:11211 (32 connections)".
func consumerWhy(o *kernel.SocketOwner) string {
	var socks []string
	for _, s := range o.Listening {
		d := fmt.Sprintf("%s %s", s.Proto, s.Addr)
		if s.Proto == "tcp" {
			d += fmt.Sprintf(" (%d connections)", s.Accepted)
		}
		socks = append(socks, d)
	}
	what := "network traffic"
	if len(o.Devices) > 0 {
		what = "the traffic of " + strings.Join(o.Devices, ", ")
	}
	noun := "the listening socket"
	if len(socks) > 1 {
		noun = "the listening sockets"
	}
	return fmt.Sprintf("%s (pid %d) reads %s: it owns %s on %s", o.Comm, o.PID, what, noun, strings.Join(socks, "; "))
}

func lowerFirst(s string) string {
	if s == "" {
		return s
	}
	return strings.ToLower(s[:1]) + s[1:]
}

// napiThreadOf reports whether kernel thread comm ("napi/eth1-8193") polls
// a NAPI instance of dev (a comm is cut at 15 characters).
func napiThreadOf(comm, dev string) bool {
	name, ok := strings.CutPrefix(comm, "napi/")
	if !ok {
		return false
	}
	if i := strings.LastIndexByte(name, '-'); i > 0 && name[:i] == dev {
		return true
	}
	return len(comm) == 15 && strings.HasPrefix("napi/"+dev, comm)
}
