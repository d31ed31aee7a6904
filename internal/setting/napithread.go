package setting

import (
	"fmt"

	"github.com/irqpilot/irqpilot/internal/cpuset"
	"github.com/irqpilot/irqpilot/internal/host"
)

// NAPI thread placement is a thread-affinity change (thread.go) of the
// kernel thread napi/DEV-ID that runs a threaded NAPI instance: journaled by
// pid and start time like any thread, so revert never re-pins a thread that
// reused the id (a NAPI thread is stopped when threading is turned off).

// NAPIThread is the change that places the kernel thread of NAPI instance n
// on cpus. n must be threaded (n.PID set).
func NAPIThread(n host.NAPI, cpus cpuset.Set, reason string) (Change, error) {
	if n.PID == nil {
		return Change{}, fmt.Errorf("%s napi %d has no kernel thread (not threaded)", n.Device, n.ID)
	}
	c := ThreadAffinity(*n.PID, n.PIDStart, fmt.Sprintf("%s napi %d thread napi/%s-%d", n.Device, n.ID, n.Device, n.ID), cpus, reason)
	c.Device = n.Device
	return c, nil
}
