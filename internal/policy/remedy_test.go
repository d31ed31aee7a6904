package policy

import (
	"net/netip"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/irqpilot/irqpilot/internal/cpuset"
	"github.com/irqpilot/irqpilot/internal/diagnose"
	"github.com/irqpilot/irqpilot/internal/host"
	"github.com/irqpilot/irqpilot/internal/kernel"
	"github.com/irqpilot/irqpilot/internal/load"
	"github.com/irqpilot/irqpilot/internal/load/loadtest"
	"github.com/irqpilot/irqpilot/internal/plan"
)

// capture is internal/load/testdata/<name>.
func capture(name string) string { return filepath.Join("..", "load", "testdata", name) }

// memcachedHost is the capture machine's model as doctor saw it: 2 CPUs and
// the host end of the veth pair (2 queues) behind which memcached ran.
func memcachedHost() *host.Host {
	h := loadtest.HostN(2)
	h.NICs = []host.NIC{{Name: "hjv1", Virtual: true, Driver: "veth",
		RxQueues: []host.RxQueue{{Index: 0}, {Index: 1}}}}
	return h
}

// nicHost4 is a 4-CPU host with NIC eth0 of n queues, IRQs 40…, RPS off.
func nicHost4(cpus, queues int) *host.Host {
	h := loadtest.HostN(cpus)
	nic := host.NIC{Name: "eth0", Node: 0}
	for q := 0; q < queues; q++ {
		irq := 40 + q
		off := cpuset.Set{}
		nic.RxQueues = append(nic.RxQueues, host.RxQueue{Index: q, RPSCPUs: &off, IRQ: ptr(irq)})
		h.IRQs = append(h.IRQs, host.IRQ{Number: irq, Device: "eth0", Queue: ptr(q), Managed: host.ManagedNo, Class: host.ClassNetwork})
		nic.IRQs = append(nic.IRQs, irq)
	}
	h.NICs = []host.NIC{nic}
	return h
}

func findID(fs []diagnose.Finding, id string) []diagnose.Finding {
	var out []diagnose.Finding
	for _, f := range fs {
		if f.ID == id {
			out = append(out, f)
		}
	}
	return out
}

// checkedRemedy is Remedy's plan for f, held to checkRemedy; the test
// fails if there is none.
func checkedRemedy(t *testing.T, h *host.Host, l *load.Load, f diagnose.Finding) *plan.Plan {
	t.Helper()
	p, why := Remedy(h, l, f, Options{})
	if p == nil {
		t.Fatalf("no remedy: %s", why)
	}
	checkRemedy(t, h, l, f, p)
	return p
}

// onlyFinding diagnoses l on h and returns its finding of id, failing the
// test unless there is exactly one.
func onlyFinding(t *testing.T, h *host.Host, l *load.Load, id string) diagnose.Finding {
	t.Helper()
	fs := findID(diagnose.Diagnose(h, l), id)
	if len(fs) != 1 {
		t.Fatalf("%s: %+v", id, fs)
	}
	return fs[0]
}

// checkRemedy holds a remedy to the headroom rule on its own prediction,
// and the prediction to Predict's for the same plan: every CPU predicted
// to take work was measured with the spare time for it.
func checkRemedy(t *testing.T, h *host.Host, l *load.Load, f diagnose.Finding, p *plan.Plan) {
	t.Helper()
	if p == nil {
		return
	}
	if p.Policy != RemedyPolicy || p.Prediction == nil {
		t.Fatalf("%s: plan %+v", f.Ref, p)
	}
	want := Predict(h, l, p, nil)
	if !slices.Equal(want.CPUs, p.Prediction.CPUs) {
		t.Errorf("%s: prediction %+v, Predict %+v", f.Ref, p.Prediction.CPUs, want.CPUs)
	}
	for _, c := range p.Prediction.CPUs {
		if c.PredictedBusy <= c.BeforeBusy+0.1 {
			continue
		}
		if hr := diagnose.HeadroomOf(l, c.CPU); !hr.Measured || c.PredictedBusy > diagnose.HeadroomBusyMaxPct+0.05 {
			t.Errorf("%s: CPU %d takes work without the headroom (%v): %+v", f.Ref, c.CPU, hr, c)
		}
	}
}

// The captured machine: memcached in a namespace under memcaslap, both
// CPUs under 5 % idle. Busy application threads share CPU0 with the
// receive softirqs, but neither CPU can take work: no remedy moves
// anything, memcached stays (no room) and memcaslap stays (it serves no
// listening socket: the load generator).
func TestRemedyOnSaturatedCaptureMovesNothing(t *testing.T) {
	l := loadtest.TasksPair(t, capture("memcached-saturated"))
	l.SetConsumers(loadtest.Consumers(t, capture("memcached-saturated")))
	h := memcachedHost()
	fs := diagnose.Diagnose(h, l)
	for _, f := range fs {
		if p, why := Remedy(h, l, f, Options{}); p != nil {
			t.Errorf("%s moves work on a saturated machine: %+v (%s)", f.Ref, p, why)
		}
	}
	app := findID(fs, diagnose.IDAppOnIRQCPU)
	if len(app) != 1 || app[0].CPUs[0] != 0 {
		t.Fatalf("app-on-irq-cpu: %+v", fs)
	}
	_, why := Remedy(h, l, app[0], Options{})
	whyHas(t, why,
		"memcached (pid 25237) reads the traffic of hjv1: it owns the listening socket on tcp 10.214.7.2:11211 (32 connections). It stays: no other CPU has the spare time for memcached's threads",
		"CPU 1 100% busy, 0% spare",
		"memcaslap (pid 25560) stays: it serves no listening socket")
}

// The same capture with CPU1 idle (derived: CPU1's ticks idle, the
// memcaslap thread that ran there unused): the remedy moves memcached, the
// identified consumer, onto CPU1, predicted to take its threads' time, and
// not memcaslap, which shares CPU0 with it.
func TestRemedyMovesConsumerToIdleCPU(t *testing.T) {
	l := loadtest.TasksPair(t, capture("memcached-one-cpu-idle"))
	l.SetConsumers(loadtest.Consumers(t, capture("memcached-one-cpu-idle")))
	h := memcachedHost()
	app := onlyFinding(t, h, l, diagnose.IDAppOnIRQCPU)
	if app.CPUs[0] != 0 || app.Severity != diagnose.Warning {
		t.Fatalf("app-on-irq-cpu: %+v", app)
	}
	p := checkedRemedy(t, h, l, app)
	var memcached float64
	for _, tk := range l.Tasks {
		if tk.PID == 25237 && tk.CPU == 0 {
			memcached += tk.Busy
		}
	}
	if len(p.Apps) != 1 || p.Apps[0].PID != 25237 || !p.Apps[0].CPUs.Equal(cpuset.Of(1)) || len(p.IRQs)+len(p.RxQueues)+len(p.NAPI) != 0 {
		t.Fatalf("plan %+v", p)
	}
	if c := p.Prediction.CPU(1); c == nil || c.BeforeBusy != 0 || c.PredictedBusy < memcached-0.1 {
		t.Errorf("CPU1 prediction %+v, want from 0%% to at least memcached's %.1f%% on CPU0", c, memcached)
	}
	whyHas(t, p.Why+"\n"+p.Apps[0].Reason, "memcached (pid 25237) reads the traffic of hjv1", "memcaslap (pid 25560) stays")
	// On captured state without the sockets, nothing tells the server from
	// the load generator: nothing moves, and why says so.
	l.Consumers = nil
	p, why := Remedy(h, l, app, Options{})
	if p != nil || !strings.Contains(why, "(pid 25237) stays: which process consumes the traffic is known only from its sockets") {
		t.Errorf("moved without knowing the consumer: %+v (%s)", p, why)
	}
}

// A remedy that spreads queue IRQs uses only CPUs with room for a share;
// with none, it says so and what helps instead.
func TestRemedySpreadRespectsHeadroom(t *testing.T) {
	// Two queues' IRQs on CPU0 (75 % interrupt time), CPU1 idle, CPU2
	// 75 % busy, CPU3 at 95 %: only CPU1 can take a share.
	c := loadtest.Craft(4).CPU(0, 10, 10, 20, 55, 5).CPU(1, 2, 2, 0, 0, 96).CPU(2, 50, 25, 0, 0, 25).CPU(3, 80, 15, 0, 0, 5)
	c.Softirq("NET_RX", 0, 40000).IRQ(40, 9000, 0, 0, 0).IRQ(41, 8000, 0, 0, 0)
	h := nicHost4(4, 2)
	l := c.Load(t)
	one := onlyFinding(t, h, l, diagnose.IDNICOneCPU)
	p := checkedRemedy(t, h, l, one)
	var to cpuset.Set
	for _, e := range p.IRQs {
		to = to.Union(e.CPUs)
	}
	if len(p.IRQs) != 2 || !to.Equal(cpuset.Of(0, 1)) {
		t.Errorf("IRQ entries %+v, want IRQs 40 and 41 on CPUs 0 and 1", p.IRQs)
	}
	if c1 := p.Prediction.CPU(1); c1 == nil || c1.PredictedBusy <= c1.BeforeBusy {
		t.Errorf("CPU1 takes no work: %+v", c1)
	}
	// Every other CPU saturated: no spread at all, and why says so.
	full := loadtest.Craft(4).CPU(0, 10, 10, 20, 55, 5).CPU(1, 85, 10, 0, 0, 5).CPU(2, 50, 45, 0, 0, 5).CPU(3, 80, 15, 0, 0, 5)
	full.Softirq("NET_RX", 0, 40000).IRQ(40, 9000, 0, 0, 0).IRQ(41, 8000, 0, 0, 0)
	lf := full.Load(t)
	one = onlyFinding(t, h, lf, diagnose.IDNICOneCPU)
	if p, why := Remedy(h, lf, one, Options{}); p != nil || !strings.Contains(why, "No other CPU has the spare time") || !strings.Contains(why, "What would help instead") {
		t.Errorf("saturated: %+v (%s)", p, why)
	}
}

// An interrupt-bound CPU with a 2-queue NIC: the IRQ spread and RPS are
// judged each on its own. CPU1 (50 % busy) can take one queue's share of
// CPU0's interrupt work, but not most of its 50 % softirq, so the remedy
// moves a queue IRQ and turns no RPS on.
func TestRemedyInterruptBoundAlternativesJudgedApart(t *testing.T) {
	c := loadtest.Craft(2).CPU(0, 20, 15, 10, 50, 5).CPU(1, 30, 20, 0, 0, 50)
	c.Softirq("NET_RX", 0, 40000).IRQ(40, 9000, 0).IRQ(41, 8000, 0)
	h := nicHost4(2, 2)
	l := c.Load(t)
	ib := onlyFinding(t, h, l, diagnose.IDInterruptBound)
	if ib.Device != "eth0" {
		t.Fatalf("interrupt-bound: %+v", ib)
	}
	p := checkedRemedy(t, h, l, ib)
	if len(p.RxQueues) != 0 || len(p.IRQs) != 2 || !p.IRQs[0].CPUs.Equal(cpuset.Of(0)) || !p.IRQs[1].CPUs.Equal(cpuset.Of(1)) {
		t.Errorf("plan %+v %+v", p.IRQs, p.RxQueues)
	}
}

// Seed 004 on four CPUs (RPS/RFS on a single-queue NIC: CPU0 52.8 %
// softirq, 6 % idle), with nginx, the consumer, on CPU0: RPS goes only to
// CPUs with the headroom for a share (CPU1, 72 % busy, has none for a
// third), then nginx moves onto a CPU with room left. A server of another
// device's traffic stays, and why says so.
func TestRemedyInterruptBoundWithConsumer(t *testing.T) {
	c := loadtest.Craft(4).CPU(0, 30, 11.2, 0, 52.8, 6).CPU(1, 50, 22, 0, 0, 28).CPU(2, 30, 10, 0, 0, 60).CPU(3, 8, 4, 0, 0, 88)
	c.Softirq("NET_RX", 0, 40000).IRQ(16, 9000, 0, 0, 0)
	c.A.Tasks = []load.TaskTimes{{PID: 100, TID: 100, Comm: "nginx", UTime: 5000 * time.Millisecond, CPU: 0}}
	c.B.Tasks = []load.TaskTimes{{PID: 100, TID: 100, Comm: "nginx", UTime: 5400 * time.Millisecond, CPU: 0}}
	h := loadtest.HostN(4)
	h.IRQs = []host.IRQ{{Number: 16, Device: "eth1", Queue: ptr(0), Managed: host.ManagedNo}}
	h.NICs = []host.NIC{{Name: "eth1", RxQueues: []host.RxQueue{{Index: 0, IRQ: ptr(16)}}, IRQs: []int{16}}}
	l := c.Load(t)
	l.SetConsumers([]kernel.SocketOwner{
		{PID: 100, Comm: "nginx", Listening: []kernel.ListenSocket{{Proto: "tcp", Addr: netip.MustParseAddrPort("0.0.0.0:80"), Accepted: 12}}, Devices: []string{"eth1"}},
	})
	ib := onlyFinding(t, h, l, diagnose.IDInterruptBound)
	p := checkedRemedy(t, h, l, ib)
	if len(p.RxQueues) != 1 || p.RxQueues[0].RPSCPUs == nil || p.RxQueues[0].RPSCPUs.Contains(0) || p.RxQueues[0].RPSCPUs.Contains(1) {
		t.Errorf("RPS %+v, want it on CPUs with room (not 0, not 1)", p.RxQueues)
	}
	if len(p.Apps) != 1 || p.Apps[0].PID != 100 || p.Apps[0].CPUs.Contains(0) || p.Apps[0].CPUs.Contains(1) ||
		!strings.Contains(p.Apps[0].Reason, "nginx (pid 100) reads the traffic of eth1: it owns the listening socket on tcp 0.0.0.0:80 (12 connections)") {
		t.Errorf("apps %+v: %s %+v", p.Apps, p.Why, p.Prediction)
	}
	l.SetConsumers([]kernel.SocketOwner{
		{PID: 100, Comm: "nginx", Listening: []kernel.ListenSocket{{Proto: "tcp", Addr: netip.MustParseAddrPort("10.9.0.1:80"), Accepted: 3}}, Devices: []string{"eth9"}},
	})
	p, why := Remedy(h, l, ib, Options{})
	if p == nil || len(p.Apps) != 0 || !strings.Contains(why, "nginx (pid 100) stays: it serves the traffic of eth9, not of eth1, whose interrupts land on CPU 0.") {
		t.Errorf("server of another device moved or unexplained: %+v (%s)", p, why)
	}
}

// storageBound is a 2-CPU host whose CPU0 is bound by the hardirq time of
// one storage IRQ (40) that CPU1 has room for.
func storageBound(t *testing.T) (*host.Host, *load.Load) {
	t.Helper()
	h := nicHost4(2, 1)
	h.IRQs[0].Class, h.IRQs[0].Device = host.ClassStorage, "nvme0q1"
	h.NICs = nil
	return h, loadtest.Craft(2).CPU(0, 10, 10, 70, 5, 5).Softirq("BLOCK", 0, 5000).IRQ(40, 20000, 0).Load(t)
}

// A hardirq-bound CPU: the busiest IRQ moves whole onto one CPU that can
// take all of it; a remote IRQ moves to a CPU of its device's node with
// room.
func TestRemedyMovesOneIRQ(t *testing.T) {
	h, l := storageBound(t)
	ib := onlyFinding(t, h, l, diagnose.IDInterruptBound)
	p, why := Remedy(h, l, ib, Options{})
	if p == nil || len(p.IRQs) != 1 || *p.IRQs[0].IRQ != 40 || !p.IRQs[0].CPUs.Equal(cpuset.Of(1)) {
		t.Fatalf("plan %+v (%s)", p, why)
	}
	checkRemedy(t, h, l, ib, p)

	n := nicHost4(4, 2)
	n.Topology.Nodes = []host.Node{{ID: 0, CPUs: cpuset.MustParse("0-1")}, {ID: 1, CPUs: cpuset.MustParse("2-3")}}
	for i := range n.Topology.CPUs {
		n.Topology.CPUs[i].Node = i / 2
	}
	n.CPUs = n.Topology.CPUs
	rl := loadtest.Craft(4).CPU(0, 70, 10, 0, 0, 20).CPU(2, 10, 5, 5, 10, 70).IRQ(40, 0, 0, 4000).IRQ(41, 0, 1000).Load(t)
	numa := onlyFinding(t, n, rl, diagnose.IDIRQRemoteNUMA)
	p, why = Remedy(n, rl, numa, Options{})
	if p == nil || len(p.IRQs) != 1 || !p.IRQs[0].CPUs.Equal(cpuset.Of(1)) {
		t.Fatalf("numa plan %+v (%s), want IRQ 40 on CPU1 (CPU0 has less room)", p, why)
	}
	checkRemedy(t, n, rl, numa, p)
}

// Findings no placement addresses (drops, a budget) have no remedy plan.
func TestRemedyNoneForSettings(t *testing.T) {
	l := loadtest.Craft(2).Softnet(1, 90000, 250, 40, 0).Softirq("NET_RX", 1, 2000).Load(t)
	fs := onlyFinding(t, loadtest.HostN(2), l, diagnose.IDSoftnetDrops)
	if p, why := Remedy(loadtest.HostN(2), l, fs, Options{}); p != nil || why == "" {
		t.Errorf("drops: %+v (%s)", p, why)
	}
}

// A remedy that pins an IRQ stops a running irqbalance, which would move
// it back.
func TestRemedyStopsIrqbalance(t *testing.T) {
	h, l := storageBound(t)
	h.Irqbalance.Running = true
	ib := onlyFinding(t, h, l, diagnose.IDInterruptBound)
	p, why := Remedy(h, l, ib, Options{})
	if p == nil || p.Irqbalance == nil || p.Irqbalance.Mode != plan.IrqbalanceStop {
		t.Fatalf("plan %+v (%s)", p, why)
	}
}

// A NAPI thread sharing a saturated CPU with the consumer: the remedy
// places the device's NAPI threads on CPUs with room, and the model moves
// the thread's measured time there; with no CPU to spare, nothing moves.
func TestRemedyPlacesNAPIThreads(t *testing.T) {
	h := nicHost4(4, 1)
	on := true
	h.NAPI = []host.NAPI{{ID: 100, Device: "eth0", IRQ: ptr(40), PID: ptr(900), Threaded: &on}}
	tasks := []load.TaskLoad{
		{PID: 900, TID: 900, Comm: "napi/eth0-100", CPU: 3, Busy: 45, Kernel: true},
		{PID: 1234, TID: 1240, Comm: "memcached", CPU: 3, Busy: 50},
	}
	l := loadtest.Craft(4).CPU(0, 10, 5, 0, 0, 85).CPU(1, 60, 10, 0, 0, 30).CPU(2, 70, 15, 0, 0, 15).CPU(3, 40, 55, 0, 0, 5).Load(t)
	l.Tasks = tasks
	fs := onlyFinding(t, h, l, diagnose.IDNAPIThreadShared)
	if fs.Device != "eth0" {
		t.Fatalf("napi-thread-on-consumer-cpu: %+v", fs)
	}
	p, why := Remedy(h, l, fs, Options{})
	if p == nil || len(p.NAPI) != 1 || p.NAPI[0].CPUs == nil || p.NAPI[0].CPUs.Contains(3) || p.NAPI[0].CPUs.Contains(2) {
		t.Fatalf("plan %+v (%s), want the NAPI threads on CPUs with room (0, 1)", p, why)
	}
	checkRemedy(t, h, l, fs, p)
	if c := p.Prediction.CPU(3); c == nil || c.PredictedBusy > c.BeforeBusy-40 {
		t.Errorf("CPU3 keeps the NAPI thread's time: %+v", c)
	}
	full := loadtest.Craft(4).CPU(0, 80, 15, 0, 0, 5).CPU(1, 80, 15, 0, 0, 5).CPU(2, 70, 25, 0, 0, 5).CPU(3, 40, 55, 0, 0, 5).Load(t)
	full.Tasks = tasks
	fs = onlyFinding(t, h, full, diagnose.IDNAPIThreadShared)
	if p, why := Remedy(h, full, fs, Options{}); p != nil || !strings.Contains(why, "No other CPU has the spare time for the NAPI threads") {
		t.Errorf("saturated: %+v (%s)", p, why)
	}
}
