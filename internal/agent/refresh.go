package agent

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/irqpilot/irqpilot/internal/cpuset"
	"github.com/irqpilot/irqpilot/internal/host"
	"github.com/irqpilot/irqpilot/internal/plan"
	"github.com/irqpilot/irqpilot/internal/setting"
)

// resolveLocked re-reads the host and resolves the plan against it.
func (ag *Agent) resolveLocked() {
	ag.lastResolve = time.Now()
	// Settings that left the plan, devices that went away: open afresh.
	ag.files.Release()
	h, err := ag.readHost()
	if err != nil {
		ag.lastErr = err.Error()
		ag.log.Error("read the host", "error", err)
		return
	}
	// Entry by entry: one that does not resolve (a queue a re-created
	// device no longer has) waits, with its reason; the rest is enforced.
	changes, skipped, waiting, _, err := resolveEach(ag.o.FS, h, ag.pl)
	if err != nil {
		if ag.devs.resolveErr != err.Error() {
			ag.log.Error("plan does not resolve on the host as it is now; enforcing nothing until it does", "plan", ag.source(), "error", err)
		}
		ag.devs.resolveErr = err.Error()
		ag.lastErr = err.Error()
		ag.changes, ag.skipped = []setting.Change{}, nil
		return
	}
	ag.devs.resolveErr = ""
	ag.needResolve = false
	if !slices.Equal(waiting, ag.waiting) {
		for _, w := range waiting {
			if !slices.Contains(ag.waiting, w) {
				ag.log.Info("waiting for "+w, "plan", ag.source())
			}
		}
	}
	ag.waiting = waiting
	keys := map[string]bool{}
	for i := range changes {
		keys[setting.Key(&changes[i])] = true
	}
	// A setting that left the plan because its device went away starts
	// afresh when it comes back: writing it then is an apply, not a
	// repair. One that left while an entry waits for an offline CPU and
	// its device stayed (or it has none: an IRQ of a disk) is still the
	// agent's: the kernel broke its value, and writing it back when the
	// CPU returns is a repair — one that counts no ping-pong, since no
	// other tool is at work. Once no entry waits for a CPU, a setting
	// still out of the plan left it for another reason and is forgotten.
	if ag.keyDev == nil || ag.heldForCPU == nil {
		ag.keyDev, ag.heldForCPU = map[string]string{}, map[string]bool{}
	}
	cpuWait := false
	for _, w := range waiting {
		cpuWait = cpuWait || strings.HasPrefix(w, "CPU ")
	}
	for i := range ag.changes {
		ag.keyDev[setting.Key(&ag.changes[i])] = ag.changes[i].Device
	}
	for k := range ag.established {
		if keys[k] {
			if ag.heldForCPU[k] {
				ag.heldForCPU[k] = false // back in the plan: its next repair is the kernel's doing
			}
			continue
		}
		if cpuWait && ag.sameIncarnation(ag.keyDev[k]) {
			ag.heldForCPU[k] = true
			continue
		}
		ag.forgetKey(k)
	}
	for i := range changes {
		ag.keyDev[setting.Key(&changes[i])] = changes[i].Device
	}
	for k := range ag.keyDev {
		if !keys[k] && !ag.established[k] {
			delete(ag.keyDev, k) // bounded by the plan in force
		}
	}
	ag.trackDevices(ag.changes, changes)
	if changes == nil {
		changes = []setting.Change{} // resolved: nothing to enforce
	}
	ag.changes, ag.skipped = changes, skipped
}

// sameIncarnation reports whether device dev is the one the settings
// were resolved against (its ifindex unchanged); "" (no device) is.
func (ag *Agent) sameIncarnation(dev string) bool {
	if dev == "" {
		return true
	}
	ix, live := ag.ifindex(dev)
	return live && ix == ag.devs.index[dev]
}

// forgetKey: a setting starts afresh — its next write is an apply, not a
// repair, and this run's first writer of it is the next journal.
func (ag *Agent) forgetKey(k string) {
	delete(ag.established, k)
	delete(ag.heldForCPU, k)
	delete(ag.keyDev, k)
	delete(ag.repairTimes, k)
	delete(ag.firstWriter, k)
}

// dropOffline removes the plan entries whose CPU lists name a CPU that
// exists but is offline now; the returned lines say what waits for which
// CPU. Writing such a list would fail (or, for steering masks, silently
// steer to a CPU that is not there).
func dropOffline(p *plan.Plan, h *host.Host) []string {
	online := h.Topology.Online
	if online.IsEmpty() {
		return nil
	}
	exists := h.Topology.Possible.Union(online)
	for _, c := range h.CPUs {
		exists = exists.Add(c.ID)
	}
	var waiting []string
	off := func(s cpuset.Set, line int, what string) bool {
		d := s.Difference(online)
		// A CPU that does not exist at all is the plan's error (Resolve
		// reports it), not something to wait for.
		if d.IsEmpty() || !s.IsSubsetOf(exists) {
			return false
		}
		waiting = append(waiting, fmt.Sprintf("CPU %s to come online (%s, plan line %d)", d, what, line))
		return true
	}
	p.IRQs = slices.DeleteFunc(p.IRQs, func(e plan.IRQEntry) bool { return off(e.CPUs, e.Line, "irqs") })
	p.RxQueues = slices.DeleteFunc(p.RxQueues, func(e plan.RxQueueEntry) bool {
		return e.RPSCPUs != nil && off(*e.RPSCPUs, e.Line, "rx_queues "+e.Device)
	})
	p.TxQueues = slices.DeleteFunc(p.TxQueues, func(e plan.TxQueueEntry) bool { return off(e.XPSCPUs, e.Line, "tx_queues "+e.Device) })
	p.Apps = slices.DeleteFunc(p.Apps, func(e plan.AppEntry) bool { return off(e.CPUs, e.Line, "apps "+e.Selector()) })
	if p.Irqbalance != nil && p.Irqbalance.BannedCPUs != nil && off(*p.Irqbalance.BannedCPUs, p.Irqbalance.Line, "irqbalance") {
		p.Irqbalance = nil
	}
	return waiting
}
