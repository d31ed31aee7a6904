package plan

import (
	"maps"
	"slices"

	"github.com/irqpilot/irqpilot/internal/host"
)

// DropMissingDevices removes plan entries for network devices that do not
// exist yet (at boot, before a NIC or VLAN is created) and returns their
// names; the udev rule re-applies the plan when they appear.
func DropMissingDevices(p *Plan, h *host.Host) []string {
	missing := map[string]bool{}
	present := func(dev string) bool {
		if dev == "" || h.NIC(dev) != nil {
			return true
		}
		for _, q := range h.IRQs {
			if q.Device == dev {
				return true
			}
		}
		missing[dev] = true
		return false
	}
	p.IRQs = slices.DeleteFunc(p.IRQs, func(e IRQEntry) bool { return !present(e.Device) })
	p.RxQueues = slices.DeleteFunc(p.RxQueues, func(e RxQueueEntry) bool { return !present(e.Device) })
	p.TxQueues = slices.DeleteFunc(p.TxQueues, func(e TxQueueEntry) bool { return !present(e.Device) })
	p.Coalesce = slices.DeleteFunc(p.Coalesce, func(e CoalesceEntry) bool { return !present(e.Device) })
	p.NAPI = slices.DeleteFunc(p.NAPI, func(e NAPIEntry) bool { return !present(e.Device) })
	return slices.Sorted(maps.Keys(missing))
}
