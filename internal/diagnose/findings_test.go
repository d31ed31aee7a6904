package diagnose

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/irqpilot/irqpilot/internal/cpuset"
	"github.com/irqpilot/irqpilot/internal/host"
	"github.com/irqpilot/irqpilot/internal/load"
	"github.com/irqpilot/irqpilot/internal/load/loadtest"
)

func intp(v int) *int { return &v }

func setp(s string) *cpuset.Set { v := cpuset.MustParse(s); return &v }

// hostN is a one-node host with n online CPUs.
func hostN(n int) *host.Host { return loadtest.HostN(n) }

func find(fs []Finding, id string) []Finding {
	var out []Finding
	for _, f := range fs {
		if f.ID == id {
			out = append(out, f)
		}
	}
	return out
}

func evidence(t *testing.T, f Finding, name string) float64 {
	t.Helper()
	for _, e := range f.Evidence {
		if e.Name == name {
			return e.Value
		}
	}
	t.Fatalf("%s: no evidence %q in %+v", f.ID, name, f.Evidence)
	return 0
}

// RPS/RFS on a single-queue NIC: CPU0 52.8% softirq, 6% idle; the other CPUs 28–88% idle.
// After RPS: CPU0 29% softirq, 25% idle.
func TestInterruptBoundSeed004(t *testing.T) {
	c := loadtest.Craft(4).CPU(0, 30, 11.2, 0, 52.8, 6).CPU(1, 50, 22, 0, 0, 28).CPU(2, 30, 10, 0, 0, 60).CPU(3, 8, 4, 0, 0, 88)
	c.Softirq("NET_RX", 0, 40000).IRQ(16, 9000, 0, 0, 0)
	h := hostN(4)
	h.IRQs = []host.IRQ{{Number: 16, Device: "eth1", Queue: intp(0), Managed: host.ManagedNo}}
	h.NICs = []host.NIC{{Name: "eth1", RxQueues: []host.RxQueue{{Index: 0, IRQ: intp(16)}}, IRQs: []int{16}}}
	fs := find(Diagnose(h, c.Load(t)), IDInterruptBound)
	if len(fs) != 1 {
		t.Fatalf("findings %+v", fs)
	}
	f := fs[0]
	if f.Severity != Critical || len(f.CPUs) != 1 || f.CPUs[0] != 0 {
		t.Errorf("severity %s cpus %v", f.Severity, f.CPUs)
	}
	if v := evidence(t, f, "CPU0 %soft"); v != 52.8 {
		t.Errorf("CPU0 %%soft evidence %v", v)
	}
	if v := evidence(t, f, "CPU0 %idle"); v != 6 {
		t.Errorf("CPU0 %%idle evidence %v", v)
	}
	if v := evidence(t, f, "other CPUs mean %idle"); v != 58.67 {
		t.Errorf("others idle %v", v)
	}
	if v := evidence(t, f, "irq 16 (eth1 queue 0) on CPU0"); v != 9000 {
		t.Errorf("irq evidence %v", v)
	}
	// The subject a remedy steers: the NIC whose IRQ lands there, and the
	// IRQ (policy's remedy tests judge where its work may go).
	if f.Device != "eth1" || len(f.IRQs) != 1 || f.IRQs[0] != 16 || f.Ref != "interrupt-bound-cpu:cpu0" || !strings.Contains(f.Summary, "CPU0") {
		t.Errorf("device %q irqs %v ref %q summary %q", f.Device, f.IRQs, f.Ref, f.Summary)
	}
	// After RPS (RPS/RFS on a single-queue NIC): CPU0 29% softirq and 25% idle, softirq spread.
	after := loadtest.Craft(4).CPU(0, 30, 16, 0, 29, 25).CPU(1, 40, 12, 0, 20, 28).CPU(2, 30, 10, 0, 15, 45).CPU(3, 8, 4, 0, 12, 76)
	if fs := find(Diagnose(h, after.Load(t)), IDInterruptBound); len(fs) != 0 {
		t.Errorf("after RPS: %+v", fs)
	}
	// Busy others: nobody waits for CPU0, the machine is simply busy.
	busy := loadtest.Craft(2).CPU(0, 20, 20, 5, 50, 5).CPU(1, 80, 15, 0, 2, 3)
	if fs := find(Diagnose(h, busy.Load(t)), IDInterruptBound); len(fs) != 0 {
		t.Errorf("busy others: %+v", fs)
	}
	// Below the critical level: a warning.
	mid := loadtest.Craft(2).CPU(0, 40, 25, 0, 30, 5)
	if fs := find(Diagnose(h, mid.Load(t)), IDInterruptBound); len(fs) != 1 || fs[0].Severity != Warning {
		t.Errorf("30%% soft: %+v", fs)
	}
	// Spread evenly (every CPU 40% soft, none idle): not one CPU's problem.
	even := loadtest.Craft(2).CPU(0, 30, 30, 0, 40, 0).CPU(1, 30, 30, 0, 40, 0)
	if fs := find(Diagnose(h, even.Load(t)), IDInterruptBound); len(fs) != 0 {
		t.Errorf("even: %+v", fs)
	}
	// Hard IRQ time counts.
	blk := loadtest.Craft(2).CPU(0, 10, 10, 30, 5, 5).Softirq("BLOCK", 0, 5000)
	if fs := find(Diagnose(h, blk.Load(t)), IDInterruptBound); len(fs) != 1 {
		t.Errorf("hard irq: %+v", fs)
	}
}

func nicHost(n int, queues int, rps string) *host.Host {
	h := hostN(n)
	nic := host.NIC{Name: "eth0", Node: 0}
	for q := 0; q < queues; q++ {
		irq := 40 + q
		nic.RxQueues = append(nic.RxQueues, host.RxQueue{Index: q, RPSCPUs: setp(rps), IRQ: intp(irq)})
		h.IRQs = append(h.IRQs, host.IRQ{Number: irq, Device: "eth0", Queue: intp(q), Managed: host.ManagedNo, Class: host.ClassNetwork})
		nic.IRQs = append(nic.IRQs, irq)
	}
	h.NICs = []host.NIC{nic}
	return h
}

func TestNICIRQsOneCPU(t *testing.T) {
	h := nicHost(4, 4, "")
	// Evidence of harm: CPU1, which takes every queue IRQ, is busy with
	// interrupt work. The same IRQs on an idle CPU are no finding.
	idle := loadtest.Craft(4).IRQ(40, 0, 3000).IRQ(41, 0, 2000).IRQ(42, 0, 1000).IRQ(43, 0, 500)
	if fs := find(Diagnose(h, idle.Load(t)), IDNICOneCPU); len(fs) != 0 {
		t.Errorf("queue IRQs on an idle CPU reported: %+v", fs)
	}
	c := loadtest.Craft(4).CPU(1, 20, 5, 10, 30, 35).IRQ(40, 0, 3000).IRQ(41, 0, 2000).IRQ(42, 0, 1000).IRQ(43, 0, 500)
	fs := find(Diagnose(h, c.Load(t)), IDNICOneCPU)
	if len(fs) != 1 || fs[0].Severity != Warning || fs[0].CPUs[0] != 1 {
		t.Fatalf("%+v", fs)
	}
	if v := evidence(t, fs[0], "irq 41 (eth0 queue 1) rate"); v != 2000 {
		t.Errorf("irq 41 evidence %v", v)
	}
	if !strings.Contains(fs[0].Summary, "All 4 queue IRQs of eth0 landed on CPU1 (6500") {
		t.Errorf("summary %q", fs[0].Summary)
	}
	if f := fs[0]; f.Device != "eth0" || len(f.IRQs) != 4 || f.IRQs[0] != 40 || f.Ref != "nic-irqs-one-cpu:eth0" {
		t.Errorf("subject %q %v %q", f.Device, f.IRQs, f.Ref)
	}
	// Spread over two CPUs: no finding.
	c2 := loadtest.Craft(4).CPU(1, 20, 5, 10, 30, 35).IRQ(40, 0, 3000).IRQ(41, 2000, 0).IRQ(42, 0, 1000).IRQ(43, 0, 500)
	if fs := find(Diagnose(h, c2.Load(t)), IDNICOneCPU); len(fs) != 0 {
		t.Errorf("spread: %+v", fs)
	}
	// Dedicated-core layout with RPS on: info.
	hr := nicHost(4, 4, "1-3")
	if fs := find(Diagnose(hr, c.Load(t)), IDNICOneCPU); len(fs) != 1 || fs[0].Severity != Info {
		t.Errorf("dedicated core: %+v", fs)
	}
}

func TestFewQueuesNoRPS(t *testing.T) {
	h := nicHost(4, 1, "")
	c := loadtest.Craft(4).CPU(0, 20, 5, 5, 30, 40).IRQ(40, 5000)
	fs := find(Diagnose(h, c.Load(t)), IDFewQueuesNoRPS)
	if len(fs) != 1 || fs[0].Severity != Warning || fs[0].CPUs[0] != 0 {
		t.Fatalf("%+v", fs)
	}
	if evidence(t, fs[0], "eth0 rx queues") != 1 || evidence(t, fs[0], "online CPUs") != 4 || evidence(t, fs[0], "eth0 queue IRQ rate") != 5000 {
		t.Errorf("evidence %+v", fs[0].Evidence)
	}
	if fs[0].Device != "eth0" || fs[0].Ref != "few-queues-no-rps:eth0" {
		t.Errorf("subject %q %q", fs[0].Device, fs[0].Ref)
	}
	// No evidence of harm, no finding: an idle NIC, or a busy NIC whose
	// IRQ CPU has interrupt time to spare (an idle VM, issue 10).
	if fs := find(Diagnose(h, loadtest.Craft(4).IRQ(40, 3).Load(t)), IDFewQueuesNoRPS); len(fs) != 0 {
		t.Errorf("idle nic: %+v", fs)
	}
	if fs := find(Diagnose(h, loadtest.Craft(4).CPU(0, 20, 5, 2, 8, 65).IRQ(40, 5000).Load(t)), IDFewQueuesNoRPS); len(fs) != 0 {
		t.Errorf("busy nic, IRQ CPU at 10%% interrupts: %+v", fs)
	}
	// RPS on, or as many queues as CPUs, or a virtual device: nothing.
	for name, hh := range map[string]*host.Host{"rps": nicHost(4, 1, "0-3"), "queues": nicHost(4, 4, "")} {
		if fs := find(Diagnose(hh, c.Load(t)), IDFewQueuesNoRPS); len(fs) != 0 {
			t.Errorf("%s: %+v", name, fs)
		}
	}
	v := nicHost(4, 1, "")
	v.NICs[0].Virtual = true
	if fs := find(Diagnose(v, c.Load(t)), IDFewQueuesNoRPS); len(fs) != 0 {
		t.Errorf("virtual: %+v", fs)
	}
}

func TestRPSIPIOverhead(t *testing.T) {
	h := nicHost(4, 1, "0-3")
	c := loadtest.Craft(4).Softnet(0, 10000, 0, 0, 0).Softnet(1, 10000, 0, 0, 5000).Softnet(2, 10000, 0, 0, 5000).Softnet(3, 10000, 0, 0, 5000)
	fs := find(Diagnose(h, c.Load(t)), IDRPSIPIOverhead)
	if len(fs) != 1 || len(fs[0].CPUs) != 3 || fs[0].CPUs[0] != 1 {
		t.Fatalf("%+v", fs)
	}
	if evidence(t, fs[0], "RPS IPIs received (softnet received_rps)") != 15000 || evidence(t, fs[0], "IPIs per packet") != 0.38 {
		t.Errorf("evidence %+v", fs[0].Evidence)
	}
	// Good batching (few IPIs per packet): fine.
	ok := loadtest.Craft(4).Softnet(0, 40000, 0, 0, 0).Softnet(1, 40000, 0, 0, 1000).Softnet(2, 40000, 0, 0, 1000).Softnet(3, 40000, 0, 0, 1000)
	if fs := find(Diagnose(h, ok.Load(t)), IDRPSIPIOverhead); len(fs) != 0 {
		t.Errorf("batched: %+v", fs)
	}
	// RPS off: the rule does not apply.
	if fs := find(Diagnose(nicHost(4, 1, ""), c.Load(t)), IDRPSIPIOverhead); len(fs) != 0 {
		t.Errorf("rps off: %+v", fs)
	}
}

func TestIRQRemoteNUMA(t *testing.T) {
	h := nicHost(4, 2, "")
	h.Topology.Nodes = []host.Node{{ID: 0, CPUs: cpuset.MustParse("0-1")}, {ID: 1, CPUs: cpuset.MustParse("2-3")}}
	for i := range h.Topology.CPUs {
		h.Topology.CPUs[i].Node = i / 2
	}
	h.CPUs = h.Topology.CPUs
	h.NICs[0].Node = 0
	c := loadtest.Craft(4).IRQ(40, 0, 0, 4000).IRQ(41, 0, 1000)
	fs := find(Diagnose(h, c.Load(t)), IDIRQRemoteNUMA)
	if len(fs) != 1 || fs[0].CPUs[0] != 2 || fs[0].Severity != Warning {
		t.Fatalf("%+v", fs)
	}
	if evidence(t, fs[0], "irq 40 (eth0 queue 0) device node") != 0 || len(fs[0].IRQs) != 1 || fs[0].IRQs[0] != 40 || fs[0].Ref != "irq-remote-numa:irq40" {
		t.Errorf("%+v", fs[0])
	}
	// Managed IRQs are not reported (the kernel places them).
	h.IRQs[0].Managed = host.ManagedYes
	if fs := find(Diagnose(h, c.Load(t)), IDIRQRemoteNUMA); len(fs) != 0 {
		t.Errorf("managed: %+v", fs)
	}
	// Single node: nothing.
	if fs := find(Diagnose(nicHost(4, 2, ""), c.Load(t)), IDIRQRemoteNUMA); len(fs) != 0 {
		t.Errorf("one node: %+v", fs)
	}
}

func TestAppOnIRQCPU(t *testing.T) {
	// CPU0 has interrupt work (15 %) but is not interrupt-bound (that case
	// is folded into interrupt-bound-cpu: TestInterruptBoundNamesDeviceAndReconciles).
	c := loadtest.Craft(2).CPU(0, 65, 15, 0, 15, 5).CPU(1, 10, 5, 0, 2, 83)
	c.A.Tasks = []load.TaskTimes{{PID: 100, TID: 100, Comm: "memcached", UTime: 5000 * time.Millisecond, STime: 1000 * time.Millisecond, CPU: 0}, {PID: 100, TID: 101, Comm: "mc-worker", UTime: 500 * time.Millisecond, CPU: 1}, {PID: 9, TID: 9, Comm: "ksoftirqd/0", STime: 100 * time.Millisecond, CPU: 0, Kernel: true}}
	c.B.Tasks = []load.TaskTimes{{PID: 100, TID: 100, Comm: "memcached", UTime: 5450 * time.Millisecond, STime: 1100 * time.Millisecond, CPU: 0}, {PID: 100, TID: 101, Comm: "mc-worker", UTime: 800 * time.Millisecond, CPU: 1}, {PID: 9, TID: 9, Comm: "ksoftirqd/0", STime: 400 * time.Millisecond, CPU: 0, Kernel: true}}
	l := c.Load(t)
	if len(l.Tasks) != 3 || l.Tasks[0].TID != 100 || !near(l.Tasks[0].Busy, 55) {
		t.Fatalf("tasks %+v", l.Tasks)
	}
	fs := find(Diagnose(hostN(2), l), IDAppOnIRQCPU)
	if len(fs) != 1 || fs[0].Severity != Warning || fs[0].CPUs[0] != 0 {
		t.Fatalf("%+v", fs)
	}
	if evidence(t, fs[0], "thread 100 (memcached, pid 100) CPU use") != 55 || strings.Contains(fs[0].Summary, "ksoftirqd") || strings.Contains(fs[0].Summary, "mc-worker") {
		t.Errorf("%+v", fs[0])
	}
	// No interrupt-heavy CPU: nothing.
	q := loadtest.Craft(2).CPU(0, 50, 10, 0, 2, 38)
	q.A.Tasks, q.B.Tasks = c.A.Tasks, c.B.Tasks
	if fs := find(Diagnose(hostN(2), q.Load(t)), IDAppOnIRQCPU); len(fs) != 0 {
		t.Errorf("quiet: %+v", fs)
	}
}

func TestIrqbalanceWithManual(t *testing.T) {
	h := nicHost(4, 1, "0-3")
	h.Irqbalance = host.Irqbalance{Running: true, PID: 812}
	fs := find(Diagnose(h, loadtest.Craft(4).Load(t)), IDIrqbalanceManual)
	if len(fs) != 1 || fs[0].Severity != Warning || !strings.Contains(fs[0].Summary, "pid 812") || !strings.Contains(fs[0].Summary, "RPS on eth0") {
		t.Fatalf("%+v", fs)
	}
	h.Irqbalance.Running = false
	if fs := find(Diagnose(h, loadtest.Craft(4).Load(t)), IDIrqbalanceManual); len(fs) != 0 {
		t.Errorf("not running: %+v", fs)
	}
	plain := nicHost(4, 1, "")
	plain.Irqbalance = host.Irqbalance{Running: true, PID: 812}
	if fs := find(Diagnose(plain, loadtest.Craft(4).Load(t)), IDIrqbalanceManual); len(fs) != 0 {
		t.Errorf("no manual settings: %+v", fs)
	}
}

func TestManagedIRQs(t *testing.T) {
	h := hostN(2)
	h.IRQs = []host.IRQ{
		{Number: 36, Device: "vda", Queue: intp(0), Managed: host.ManagedYes, EffectiveAffinity: setp("1")},
		{Number: 38, Device: "eth0", Managed: host.ManagedNo},
	}
	fs := Diagnose(h, loadtest.Craft(2).Load(t))
	m := find(fs, IDManagedIRQs)
	if len(m) != 1 || m[0].Severity != Info || len(m[0].CPUs) != 1 || m[0].CPUs[0] != 1 || !strings.Contains(m[0].Summary, "irq 36 (vda queue 0)") || strings.Contains(m[0].Summary, "38") {
		t.Fatalf("%+v", m)
	}
	if Worst(fs) != Info {
		t.Errorf("managed IRQs alone must not fail doctor: worst %q", Worst(fs))
	}
}

func TestSoftnetDropsAndSqueeze(t *testing.T) {
	c := loadtest.Craft(2).Softnet(1, 90000, 250, 40, 0).Softirq("NET_RX", 1, 2000)
	fs := Diagnose(hostN(2), c.Load(t))
	d := find(fs, IDSoftnetDrops)
	if len(d) != 1 || d[0].CPUs[0] != 1 || evidence(t, d[0], "CPU1 dropped") != 250 {
		t.Fatalf("drops %+v", d)
	}
	s := find(fs, IDSoftnetSqueeze)
	if len(s) != 1 || evidence(t, s[0], "CPU1 time_squeeze") != 40 {
		t.Fatalf("squeeze %+v", s)
	}
	// Rare squeezes against a lot of NET_RX work: not reported.
	r := loadtest.Craft(2).Softnet(1, 90000, 0, 2, 0).Softirq("NET_RX", 1, 50000)
	if fs := Diagnose(hostN(2), r.Load(t)); len(find(fs, IDSoftnetSqueeze)) != 0 || len(find(fs, IDSoftnetDrops)) != 0 {
		t.Errorf("rare: %+v", fs)
	}
}

func TestDiagnoseOrderAndQuiet(t *testing.T) {
	// A quiet machine has nothing to say.
	if fs := Diagnose(hostN(2), loadtest.Craft(2).Load(t)); len(fs) != 0 {
		t.Errorf("quiet machine: %+v", fs)
	}
	// Critical first, then warnings, then info.
	h := nicHost(4, 1, "")
	h.IRQs = append(h.IRQs, host.IRQ{Number: 36, Managed: host.ManagedYes})
	c := loadtest.Craft(4).CPU(0, 30, 11.2, 0, 52.8, 6).IRQ(40, 9000).Softnet(2, 10, 5, 0, 0)
	fs := Diagnose(h, c.Load(t))
	for i := 1; i < len(fs); i++ {
		if fs[i].Severity.rank() > fs[i-1].Severity.rank() {
			t.Errorf("order: %s before %s", fs[i-1].ID, fs[i].ID)
		}
	}
	if len(fs) < 3 || len(find(fs, IDInterruptBound)) != 1 || fs[0].Severity != Critical || fs[len(fs)-1].ID != IDManagedIRQs || Worst(fs) != Critical {
		t.Errorf("findings %v", ids(fs))
	}
	// The real udp-loopback pair: both CPUs share the work, nothing is bound.
	l := tasksPair(t, "udp-loopback")
	if fs := find(Diagnose(hostN(2), l), IDInterruptBound); len(fs) != 0 {
		t.Errorf("udp-loopback: %+v", fs)
	}
}

func ids(fs []Finding) []string {
	var s []string
	for _, f := range fs {
		s = append(s, f.Severity.String()+":"+f.ID)
	}
	return s
}

func (s Severity) String() string { return string(s) }

func near(a, b float64) bool { return math.Abs(a-b) < 1e-6*math.Max(1, math.Abs(b)) }

// Threads are counted on the CPU they last ran on, and a busy thread's
// ticks are read a little after the sample's clock, so the threads "on" a
// CPU can add up to more than the CPU has: no evidence says a CPU was used
// more than 100 %.
func TestAppOnIRQCPUNeverAboveOneCPU(t *testing.T) {
	c := loadtest.Craft(2).CPU(0, 65, 15, 0, 15, 5).CPU(1, 10, 5, 0, 2, 83)
	c.A.Tasks = []load.TaskTimes{{PID: 100, TID: 100, Comm: "memcached", UTime: 5000 * time.Millisecond, CPU: 0}, {PID: 100, TID: 101, Comm: "mc-worker", UTime: 500 * time.Millisecond, CPU: 0}}
	c.B.Tasks = []load.TaskTimes{{PID: 100, TID: 100, Comm: "memcached", UTime: 5610 * time.Millisecond, CPU: 0}, {PID: 100, TID: 101, Comm: "mc-worker", UTime: 900 * time.Millisecond, CPU: 0}}
	fs := find(Diagnose(hostN(2), c.Load(t)), IDAppOnIRQCPU)
	if len(fs) != 1 {
		t.Fatalf("%+v", fs)
	}
	for _, e := range fs[0].Evidence {
		if e.Unit == "%" && e.Value > 100 {
			t.Errorf("%s = %.2f %%, more than one CPU", e.Name, e.Value)
		}
	}
	if v := evidence(t, fs[0], "application threads' use of CPU0"); v != 100 {
		t.Errorf("threads' use of CPU0 = %.2f, want 100 (61 + 40, at most the CPU)", v)
	}
}
