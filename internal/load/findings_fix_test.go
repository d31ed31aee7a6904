package load

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/irqpilot/irqpilot/internal/host"
	"github.com/irqpilot/irqpilot/internal/kernel"
)

// An interrupt-bound CPU's fix names the NIC whose IRQs land there and the
// exact commands, with real CPU numbers (no <mask> placeholders); an
// application on that same CPU is folded into the one recommendation,
// instead of a second finding whose fix (dedicated-core) would pile every
// IRQ onto that CPU.
func TestInterruptBoundFixNamesDeviceAndReconciles(t *testing.T) {
	c := craft(4).cpu(0, 30, 11.2, 0, 52.8, 6).cpu(1, 50, 22, 0, 0, 28).cpu(2, 30, 10, 0, 0, 60).cpu(3, 8, 4, 0, 0, 88)
	c.softirq("NET_RX", 0, 40000).irq(16, 9000, 0, 0, 0)
	c.a.Tasks = []TaskTimes{{PID: 100, TID: 100, Comm: "nginx", UTime: 500, CPU: 0}}
	c.b.Tasks = []TaskTimes{{PID: 100, TID: 100, Comm: "nginx", UTime: 540, CPU: 0}}
	h := hostN(4)
	h.IRQs = []host.IRQ{{Number: 16, Device: "eth1", Queue: intp(0), Managed: host.ManagedNo}}
	h.NICs = []host.NIC{{Name: "eth1", RxQueues: []host.RxQueue{{Index: 0, IRQ: intp(16)}}, IRQs: []int{16}}}
	l := c.load(t)
	l.SetConsumers([]kernel.SocketOwner{
		{PID: 100, Comm: "nginx", Listening: []kernel.ListenSocket{{Proto: "tcp", Addr: netip.MustParseAddrPort("0.0.0.0:80"), Accepted: 12}}, Devices: []string{"eth1"}},
	})
	all := Diagnose(h, l)
	if fs := find(all, IDAppOnIRQCPU); len(fs) != 0 {
		t.Errorf("app-on-irq-cpu reported beside interrupt-bound for the same CPU: %+v", fs)
	}
	fs := find(all, IDInterruptBound)
	if len(fs) != 1 {
		t.Fatalf("findings %+v", all)
	}
	fix := fs[0].Fix
	// RPS goes to CPUs 2 and 3 (CPU1, 72 % busy, has no room for a share);
	// nginx, the consumer (it owns the listening socket), then fits only
	// on CPU3: after RPS CPU2 is at 66 %, and its 40 % fits on CPU3's 38 %.
	for _, want := range []string{
		"echo 0000000c > /sys/class/net/eth1/queues/rx-0/rps_cpus",
		"CPU 2 40% busy → 66% after, CPU 3 12% busy → 38% after",
		"nginx (pid 100) reads the traffic of eth1: it owns the listening socket on tcp 0.0.0.0:80 (12 connections). Move it off CPU0: `taskset -apc 3 100` (CPU 3 38% busy → 78% after).",
	} {
		if !strings.Contains(fix, want) {
			t.Errorf("fix %q lacks %q", fix, want)
		}
	}
	if strings.Contains(fix, "<") || strings.Contains(fix, "dedicated-core") {
		t.Errorf("fix has a placeholder or contradicts itself: %q", fix)
	}
	// The merged finding carries the application's thread evidence once,
	// and none of the CPU's own evidence twice.
	seen := map[string]bool{}
	thread := false
	for _, e := range fs[0].Evidence {
		if seen[e.Name] {
			t.Errorf("evidence %q listed twice: %+v", e.Name, fs[0].Evidence)
		}
		seen[e.Name] = true
		thread = thread || strings.Contains(e.Name, "nginx")
	}
	if !thread {
		t.Errorf("merged finding lacks the application's thread evidence: %+v", fs[0].Evidence)
	}
	if !strings.Contains(fs[0].Summary, "nginx[100]") {
		t.Errorf("summary does not name the application: %q", fs[0].Summary)
	}
	// A server of another device's traffic is not this traffic's
	// consumer: it stays, and the fix says why.
	l.SetConsumers([]kernel.SocketOwner{
		{PID: 100, Comm: "nginx", Listening: []kernel.ListenSocket{{Proto: "tcp", Addr: netip.MustParseAddrPort("10.9.0.1:80"), Accepted: 3}}, Devices: []string{"eth9"}},
	})
	fs = find(Diagnose(h, l), IDInterruptBound)
	if len(fs) != 1 || strings.Contains(fs[0].Fix, "taskset") || !strings.Contains(fs[0].Fix, "nginx (pid 100) stays: it serves the traffic of eth9, not of eth1, whose interrupts land on CPU0.") {
		t.Errorf("server of another device moved or unexplained: %+v", fs)
	}
	for _, m := range fs[0].Moves {
		if m.PID != 0 {
			t.Errorf("move of a process: %+v", m)
		}
	}
}

// A thread uses at most one CPU: skewed tick reads over a short interval
// never show more than 100 %.
func TestTaskBusyAtMostOneCPU(t *testing.T) {
	c := craft(2).cpu(0, 50, 10, 0, 35, 5)
	c.a.Tasks = []TaskTimes{{PID: 7, TID: 7, Comm: "spin", UTime: 100, CPU: 0}}
	c.b.Tasks = []TaskTimes{{PID: 7, TID: 7, Comm: "spin", UTime: 235, CPU: 0}} // 135 ticks in 1 s
	l := c.load(t)
	if len(l.Tasks) != 1 || l.Tasks[0].Busy != 100 {
		t.Errorf("tasks %+v, want spin at 100%%", l.Tasks)
	}
}
