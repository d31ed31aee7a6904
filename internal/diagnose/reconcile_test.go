package diagnose

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/irqpilot/irqpilot/internal/host"
	"github.com/irqpilot/irqpilot/internal/kernel"
	"github.com/irqpilot/irqpilot/internal/load"
	"github.com/irqpilot/irqpilot/internal/load/loadtest"
)

// An interrupt-bound CPU's finding names the NIC whose IRQs land there; an
// application on that same CPU is folded into it, instead of a second
// finding whose remedy (dedicated-core) would pile every IRQ onto that CPU
// (policy's TestRemedyInterruptBoundWithConsumer plans the remedy).
func TestInterruptBoundNamesDeviceAndReconciles(t *testing.T) {
	c := loadtest.Craft(4).CPU(0, 30, 11.2, 0, 52.8, 6).CPU(1, 50, 22, 0, 0, 28).CPU(2, 30, 10, 0, 0, 60).CPU(3, 8, 4, 0, 0, 88)
	c.Softirq("NET_RX", 0, 40000).IRQ(16, 9000, 0, 0, 0)
	c.A.Tasks = []load.TaskTimes{{PID: 100, TID: 100, Comm: "nginx", UTime: 5000 * time.Millisecond, CPU: 0}}
	c.B.Tasks = []load.TaskTimes{{PID: 100, TID: 100, Comm: "nginx", UTime: 5400 * time.Millisecond, CPU: 0}}
	h := hostN(4)
	h.IRQs = []host.IRQ{{Number: 16, Device: "eth1", Queue: intp(0), Managed: host.ManagedNo}}
	h.NICs = []host.NIC{{Name: "eth1", RxQueues: []host.RxQueue{{Index: 0, IRQ: intp(16)}}, IRQs: []int{16}}}
	l := c.Load(t)
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
	if f := fs[0]; f.Device != "eth1" || len(f.PIDs) != 1 || f.PIDs[0] != 100 {
		t.Errorf("subject: device %q pids %v", f.Device, f.PIDs)
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
}
