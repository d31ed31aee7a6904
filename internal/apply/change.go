// Package apply turns a resolved plan into kernel writes, safely: it takes a
// lock, records every old value in a write-ahead journal before touching
// anything, skips writes that change nothing, reads every value back, and on
// an unexpected failure restores every change already made. Journals stay in
// the state directory so `revert` can restore exactly what was there.
package apply

import (
	"fmt"
	"strconv"

	"github.com/irqpilot/irqpilot/internal/plan"
)

// Kind is what a change writes; it decides how values are compared.
type Kind string

// Kinds of change.
const (
	KindIRQAffinity    Kind = "irq-affinity"    // /proc/irq/N/smp_affinity_list (cpulist)
	KindRPSCPUs        Kind = "rps-cpus"        // queues/rx-N/rps_cpus (hex mask)
	KindRPSFlowCnt     Kind = "rps-flow-cnt"    // queues/rx-N/rps_flow_cnt (integer)
	KindXPSCPUs        Kind = "xps-cpus"        // queues/tx-N/xps_cpus (hex mask)
	KindSysctl         Kind = "sysctl"          // /proc/sys/... (integer or text)
	KindThreadAffinity Kind = "thread-affinity" // sched_setaffinity on one thread (cpulist)
	KindCoalesce       Kind = "coalesce"        // ethtool -C on Device ("rx_usecs=8 adaptive_rx=off")
	KindIrqbalance     Kind = "irqbalance"      // the daemon: "running" or "stopped"
	KindIrqbalanceBan  Kind = "irqbalance-ban"  // IRQBALANCE_BANNED_CPULIST in Path (a cpulist; "" = unset)
)

// Change is one desired setting: a kernel file (or a thread) and the value it
// should hold. Value is in the form the file takes: a cpulist for
// smp_affinity_list and thread affinity, a hex mask for rps_cpus/xps_cpus, a
// decimal for counts.
type Change struct {
	Kind   Kind   `json:"kind"`
	Target string `json:"target"`           // for people: "irq 38 (eth0 rx 0)", "eth0 rx-0"
	Path   string `json:"path,omitempty"`   // root-relative kernel file
	TID    int    `json:"tid,omitempty"`    // thread-affinity
	Device string `json:"device,omitempty"` // coalesce
	Value  string `json:"value"`
	Reason string `json:"reason,omitempty"`
}

func (c Change) String() string {
	if c.Kind == KindThreadAffinity {
		return fmt.Sprintf("%s: thread %d → %s", c.Target, c.TID, c.Value)
	}
	return fmt.Sprintf("%s: %s → %s", c.Target, c.Path, c.Value)
}

// key identifies what a change writes, to find duplicates.
func (c Change) key() string {
	switch c.Kind {
	case KindThreadAffinity:
		return "tid:" + strconv.Itoa(c.TID)
	case KindCoalesce:
		return "coalesce:" + c.Device
	case KindIrqbalance:
		return "irqbalance"
	}
	return "path:" + c.Path
}

// sameValue compares two values of a kind by meaning ("0-3" equals
// "0,1,2,3"; mask "f" equals "00000000,0000000f"), with the plan's
// comparison: thread affinity and banned CPUs are cpulists like an app's.
func sameValue(k Kind, a, b string) (bool, error) {
	pk := plan.Kind(k)
	switch k {
	case KindThreadAffinity, KindIrqbalanceBan:
		pk = plan.KindApp
	}
	return plan.SameValue(pk, a, b)
}
