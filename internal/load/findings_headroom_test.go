package load

import (
	"math"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/irqpilot/irqpilot/internal/cpuset"
	"github.com/irqpilot/irqpilot/internal/host"
)

// memcachedHost is the capture machine's model as doctor saw it: 2 CPUs and
// the host end of the veth pair (2 queues) behind which memcached ran.
func memcachedHost() *host.Host {
	h := hostN(2)
	h.NICs = []host.NIC{{Name: "hjv1", Virtual: true, Driver: "veth",
		RxQueues: []host.RxQueue{{Index: 0}, {Index: 1}}}}
	return h
}

var (
	tasksetRe = regexp.MustCompile("`taskset -apc ([0-9,-]+) ([0-9]+)`")
	irqRe     = regexp.MustCompile("`echo ([0-9,-]+) > /proc/irq/[0-9]+/smp_affinity_list`")
	rpsRe     = regexp.MustCompile("`echo ([0-9a-f,]+) > /sys/class/net/[^/]+/queues/rx-[0-9N]+/rps_cpus`")
)

// fixTargets are the CPUs the commands of a fix put work on, and the
// processes its taskset commands move.
func fixTargets(t *testing.T, fix string) (cpus cpuset.Set, pids []int) {
	t.Helper()
	for _, m := range tasksetRe.FindAllStringSubmatch(fix, -1) {
		cpus = cpus.Union(cpuset.MustParse(m[1]))
		pid, _ := strconv.Atoi(m[2])
		pids = append(pids, pid)
	}
	for _, m := range irqRe.FindAllStringSubmatch(fix, -1) {
		cpus = cpus.Union(cpuset.MustParse(m[1]))
	}
	for _, m := range rpsRe.FindAllStringSubmatch(fix, -1) {
		s, err := cpuset.ParseMask(m[1])
		if err != nil {
			t.Fatalf("mask %q in %q: %v", m[1], fix, err)
		}
		cpus = cpus.Union(s)
	}
	return cpus, pids
}

// checkHeadroom holds every finding to the rule: a CPU a fix's command puts
// work on is the CPU the work comes from or a target of one of its moves,
// and every move's prediction starts at least at the CPU's measured busy
// time and stays within the ceiling.
func checkHeadroom(t *testing.T, l *Load, fs []Finding) {
	t.Helper()
	for _, f := range fs {
		var allowed cpuset.Set
		for _, m := range f.Moves {
			allowed = allowed.Add(m.From)
			for _, p := range m.To {
				h := l.Headroom(p.CPU)
				if !h.Measured || p.Busy < h.Busy-1e-9 || p.After > HeadroomBusyMaxPct || p.After <= p.Busy {
					t.Errorf("%s: move %+v onto %v: prediction %+v", f.ID, m, h, p)
				}
				allowed = allowed.Add(p.CPU)
			}
		}
		cpus, _ := fixTargets(t, f.Fix)
		if extra := cpus.Difference(allowed); !extra.IsEmpty() {
			t.Errorf("%s: fix targets CPUs %v with no move justifying them: %q", f.ID, extra, f.Fix)
		}
	}
}

// The machine, captured: memcached in a namespace under memcaslap,
// both CPUs under 5 % idle. Busy application threads share CPU0 with the
// receive softirqs, but neither CPU can take work: no fix moves anything
// onto either CPU, memcached stays (no room) and memcaslap stays (it serves
// no listening socket: the load generator).
func TestFixesOnSaturatedCaptureMoveNothing(t *testing.T) {
	l := tasksPair(t, "memcached-saturated")
	l.SetConsumers(capturedConsumers(t, "memcached-saturated"))
	fs := Diagnose(memcachedHost(), l)
	checkHeadroom(t, l, fs)
	for _, f := range fs {
		if cpus, _ := fixTargets(t, f.Fix); !cpus.IsEmpty() || len(f.Moves) != 0 {
			t.Errorf("%s moves work onto %v (%+v) on a saturated machine: %q", f.ID, cpus, f.Moves, f.Fix)
		}
	}
	app := find(fs, IDAppOnIRQCPU)
	if len(app) != 1 || app[0].CPUs[0] != 0 {
		t.Fatalf("app-on-irq-cpu: %+v", fs)
	}
	for _, want := range []string{
		"memcached (pid 25237) reads the traffic of hjv1: it owns the listening socket on tcp 10.214.7.2:11211 (32 connections). It stays: no other CPU has the spare time for memcached's threads",
		"CPU 1 100% busy, 0% spare",
		"memcaslap (pid 25560) stays: it serves no listening socket",
	} {
		if !strings.Contains(app[0].Fix, want) {
			t.Errorf("fix lacks %q:\n%s", want, app[0].Fix)
		}
	}
}

// The same capture with CPU1 idle (derived: CPU1's ticks idle, the
// memcaslap thread that ran there unused): the fix moves memcached, the
// identified consumer, onto CPU1 with the prediction of its threads' time,
// and still not memcaslap, which shares CPU0 with it.
func TestFixMovesConsumerToIdleCPU(t *testing.T) {
	l := tasksPair(t, "memcached-one-cpu-idle")
	l.SetConsumers(capturedConsumers(t, "memcached-one-cpu-idle"))
	fs := Diagnose(memcachedHost(), l)
	checkHeadroom(t, l, fs)
	app := find(fs, IDAppOnIRQCPU)
	if len(app) != 1 || app[0].CPUs[0] != 0 || app[0].Severity != Warning {
		t.Fatalf("app-on-irq-cpu: %+v", fs)
	}
	f := app[0]
	var memcached float64
	for _, tk := range l.Tasks {
		if tk.PID == 25237 && tk.CPU == 0 {
			memcached += tk.Busy
		}
	}
	if len(f.Moves) != 1 || f.Moves[0].PID != 25237 || len(f.Moves[0].To) != 1 {
		t.Fatalf("moves %+v", f.Moves)
	}
	p := f.Moves[0].To[0]
	if p.CPU != 1 || p.Busy != 0 || p.After < memcached-1e-9 {
		t.Errorf("prediction %+v, want CPU1 from 0%% to at least memcached's %.1f%% on CPU0", p, memcached)
	}
	cpus, pids := fixTargets(t, f.Fix)
	if !cpus.Equal(cpuset.Of(1)) || len(pids) != 1 || pids[0] != 25237 {
		t.Errorf("fix moves %v onto %v: %q", pids, cpus, f.Fix)
	}
	for _, want := range []string{
		"memcached (pid 25237) reads the traffic of hjv1: it owns the listening socket on tcp 10.214.7.2:11211 (32 connections). Move it off CPU0: `taskset -apc 1 25237` (" + p.String() + ")",
		"memcaslap (pid 25560) stays",
	} {
		if !strings.Contains(f.Fix, want) {
			t.Errorf("fix lacks %q:\n%s", want, f.Fix)
		}
	}
	// On captured state without the sockets, nothing tells the server from
	// the load generator: nothing moves.
	l.Consumers = nil
	for _, f := range Diagnose(memcachedHost(), l) {
		if _, pids := fixTargets(t, f.Fix); len(pids) != 0 || len(f.Moves) != 0 {
			t.Errorf("%s moves %v without knowing the consumer: %q", f.ID, pids, f.Fix)
		}
		if f.ID == IDAppOnIRQCPU && !strings.Contains(f.Fix, "(pid 25237) stays: which process consumes the traffic is known only from its sockets") {
			t.Errorf("fix does not say why nothing moves: %q", f.Fix)
		}
	}
}

// A fix that spreads queue IRQs or RPS uses only CPUs with room for a
// share; with none, it says so and what helps instead.
func TestSpreadFixesRespectHeadroom(t *testing.T) {
	// Two queues' IRQs on CPU0 (75 % interrupt time), CPU1 idle, CPU2
	// 75 % busy, CPU3 at 95 %: only CPU1 can take a share (half of it).
	c := craft(4).cpu(0, 10, 10, 20, 55, 5).cpu(1, 2, 2, 0, 0, 96).cpu(2, 50, 25, 0, 0, 25).cpu(3, 80, 15, 0, 0, 5)
	c.softirq("NET_RX", 0, 40000).irq(40, 9000, 0, 0, 0).irq(41, 8000, 0, 0, 0)
	h := nicHost(4, 2, "")
	l := c.load(t)
	fs := Diagnose(h, l)
	checkHeadroom(t, l, fs)
	one := find(fs, IDNICOneCPU)
	if len(one) != 1 {
		t.Fatalf("nic-irqs-one-cpu: %+v", fs)
	}
	if cpus, _ := fixTargets(t, one[0].Fix); !cpus.Equal(cpuset.Of(0, 1)) || !strings.Contains(one[0].Fix, "CPU 1 4% busy → ") {
		t.Errorf("fix targets %v: %q", cpus, one[0].Fix)
	}
	// CPU1 takes one of the two queues: half of CPU0's interrupt time.
	cost := l.CostPct(l.CPU(0))
	if m := one[0].Moves; len(m) != 1 || len(m[0].To) != 1 || m[0].To[0].CPU != 1 || m[0].To[0].After-m[0].To[0].Busy != cost/2 {
		t.Errorf("moves %+v, want half of %.1f%% onto CPU1", m, cost)
	}
	// Every other CPU saturated: no spread at all, and the fix says why.
	full := craft(4).cpu(0, 10, 10, 20, 55, 5).cpu(1, 85, 10, 0, 0, 5).cpu(2, 50, 45, 0, 0, 5).cpu(3, 80, 15, 0, 0, 5)
	full.softirq("NET_RX", 0, 40000).irq(40, 9000, 0, 0, 0).irq(41, 8000, 0, 0, 0)
	lf := full.load(t)
	fs = Diagnose(h, lf)
	checkHeadroom(t, lf, fs)
	one = find(fs, IDNICOneCPU)
	if len(one) != 1 || len(one[0].Moves) != 0 || !strings.Contains(one[0].Fix, "No other CPU has the spare time") || !strings.Contains(one[0].Fix, "What would help instead") {
		t.Errorf("saturated: %+v", one)
	}
	if cpus, _ := fixTargets(t, one[0].Fix); !cpus.IsEmpty() {
		t.Errorf("saturated fix targets %v: %q", cpus, one[0].Fix)
	}
}

// An interrupt-bound CPU with a 2-queue NIC: the IRQ spread and the RPS
// alternative are judged each on its own. CPU1 (50 % busy) can take one
// queue's half of CPU0's 60 % (→ 80 %), but not all of its 50 % softirq,
// so the fix moves a queue IRQ and offers no RPS.
func TestInterruptBoundAlternativesJudgedApart(t *testing.T) {
	c := craft(2).cpu(0, 20, 15, 10, 50, 5).cpu(1, 30, 20, 0, 0, 50)
	c.softirq("NET_RX", 0, 40000).irq(40, 9000, 0).irq(41, 8000, 0)
	h := nicHost(2, 2, "")
	l := c.load(t)
	fs := Diagnose(h, l)
	checkHeadroom(t, l, fs)
	ib := find(fs, IDInterruptBound)
	if len(ib) != 1 {
		t.Fatalf("interrupt-bound: %+v", fs)
	}
	f := ib[0]
	if !strings.Contains(f.Fix, "`echo 0 > /proc/irq/40/smp_affinity_list`, `echo 1 > /proc/irq/41/smp_affinity_list`") || strings.Contains(f.Fix, "rps_cpus") {
		t.Errorf("fix %q", f.Fix)
	}
	if len(f.Moves) != 1 || f.Moves[0].To[0].CPU != 1 || math.Abs(f.Moves[0].To[0].After-HeadroomBusyMaxPct) > 1e-6 {
		t.Errorf("moves %+v", f.Moves)
	}
}
