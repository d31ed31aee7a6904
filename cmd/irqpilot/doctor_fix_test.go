package main

import (
	"slices"
	"testing"

	"github.com/irqpilot/irqpilot/internal/cpuset"
	"github.com/irqpilot/irqpilot/internal/plan"
)

// A remedy's commands are its plan's entries written as the kernel files
// they set: IRQ affinity, RPS (a hex mask) and its flow count, the RFS
// table, NAPI threads, taskset for a process, irqbalance stopped.
func TestPlanCommands(t *testing.T) {
	irq, q, cnt := 40, 0, 4096
	rps := cpuset.Of(2, 3)
	napi := cpuset.Of(1)
	on := true
	p := &plan.Plan{
		Irqbalance:         &plan.IrqbalanceEntry{Mode: plan.IrqbalanceStop},
		IRQs:               []plan.IRQEntry{{IRQ: &irq, CPUs: cpuset.Of(1)}},
		RPSSockFlowEntries: &plan.SockFlowEntry{Value: 32768},
		RxQueues:           []plan.RxQueueEntry{{Device: "eth1", Queue: &q, RPSCPUs: &rps, RPSFlowCnt: &cnt}},
		NAPI:               []plan.NAPIEntry{{Device: "eth1", Threaded: &on, CPUs: &napi}},
		Apps:               []plan.AppEntry{{PID: 100, CPUs: cpuset.Of(3)}, {Comm: "nginx", CPUs: cpuset.Of(3)}},
	}
	want := []string{
		"systemctl stop irqbalance",
		"echo 1 > /proc/irq/40/smp_affinity_list",
		"sysctl -w net.core.rps_sock_flow_entries=32768",
		"echo " + rps.Mask(0) + " > /sys/class/net/eth1/queues/rx-0/rps_cpus",
		"echo 4096 > /sys/class/net/eth1/queues/rx-0/rps_flow_cnt",
		"echo 1 > /sys/class/net/eth1/threaded",
		"for p in $(pgrep '^napi/eth1-'); do taskset -pc 1 $p; done",
		"taskset -apc 3 100",
	}
	if got := planCommands(p); !slices.Equal(got, want) {
		t.Errorf("commands\n%q\nwant\n%q", got, want)
	}
}
