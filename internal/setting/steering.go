package setting

import (
	"fmt"
	"strconv"

	"github.com/irqpilot/irqpilot/internal/cpuset"
)

// The steering kinds (Documentation/networking/scaling.rst): RPS CPUs and
// the RFS flow count of an rx queue, XPS CPUs of a tx queue. Masks are
// written nr_cpu_ids wide, as the kernel prints them.

// The steering files exist on a kernel built with CONFIG_RPS (and XPS);
// a queue directory without them says the kernel lacks them.
var (
	featRPS = feature{name: "RPS", probe: "sys/class/net/DEV/queues/rx-N/rps_cpus",
		glob: "sys/class/net/*/queues/rx-*/rps_cpus", evidence: "sys/class/net/*/queues/rx-*"}
	featRFSFlows = feature{name: "RFS flow tables", probe: "sys/class/net/DEV/queues/rx-N/rps_flow_cnt",
		glob: "sys/class/net/*/queues/rx-*/rps_flow_cnt", evidence: "sys/class/net/*/queues/rx-*"}
	featXPS = feature{name: "XPS", probe: "sys/class/net/DEV/queues/tx-N/xps_cpus",
		glob: "sys/class/net/*/queues/tx-*/xps_cpus", evidence: "sys/class/net/*/queues/tx-*"}
)

var rpsCPUsKind = fileKind{
	kind:  KindRPSCPUs,
	same:  sameMask,
	check: func(c *Change) error { return checkQueuePath(c, "rx", "rps_cpus") },
	scope: netScope,
	globs: []string{"sys/class/net/*/queues/rx-*/rps_cpus"},
	feat:  &featRPS,
}

var xpsCPUsKind = fileKind{
	kind:  KindXPSCPUs,
	same:  sameMask,
	check: func(c *Change) error { return checkQueuePath(c, "tx", "xps_cpus") },
	scope: netScope,
	globs: []string{"sys/class/net/*/queues/tx-*/xps_cpus"},
	feat:  &featXPS,
}

// rpsFlowCnt: the kernel rounds the size up to a power of two.
type rpsFlowCnt struct{ fileKind }

func (rpsFlowCnt) Expected(c *Change) string { return roundPow2(c.Value) }

var rpsFlowCntKind = rpsFlowCnt{fileKind{
	kind:  KindRPSFlowCnt,
	same:  sameInt,
	check: func(c *Change) error { return checkQueuePath(c, "rx", "rps_flow_cnt") },
	limit: func(v string, recorded bool) error {
		if recorded {
			return checkIntRange(v, 1<<31-1, "rps_flow_cnt") // the kernel refuses more than INT_MAX
		}
		return checkIntRange(v, MaxFlowCnt, "rps_flow_cnt")
	},
	scope: netScope,
	globs: []string{"sys/class/net/*/queues/rx-*/rps_flow_cnt"},
	feat:  &featRFSFlows,
}}

// RPSCPUs is the change that steers rx queue q of dev to cpus (mask nrCPUs wide).
func RPSCPUs(dev string, q int, cpus cpuset.Set, nrCPUs int, reason string) Change {
	return Change{Kind: KindRPSCPUs, Target: fmt.Sprintf("%s rx-%d", dev, q), Path: RxQueuePath(dev, q, "rps_cpus"),
		Device: dev, Queue: &q, Value: cpus.Mask(nrCPUs), Reason: reason}
}

// RPSFlowCnt is the change that sizes rx queue q's RFS flow table.
func RPSFlowCnt(dev string, q, n int, reason string) Change {
	return Change{Kind: KindRPSFlowCnt, Target: fmt.Sprintf("%s rx-%d", dev, q), Path: RxQueuePath(dev, q, "rps_flow_cnt"),
		Device: dev, Queue: &q, Value: strconv.Itoa(n), Reason: reason}
}

// XPSCPUs is the change that maps tx queue q of dev to cpus.
func XPSCPUs(dev string, q int, cpus cpuset.Set, nrCPUs int, reason string) Change {
	return Change{Kind: KindXPSCPUs, Target: fmt.Sprintf("%s tx-%d", dev, q), Path: TxQueuePath(dev, q, "xps_cpus"),
		Device: dev, Queue: &q, Value: cpus.Mask(nrCPUs), Reason: reason}
}
