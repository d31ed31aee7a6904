package policy

import (
	"sort"

	"github.com/irqpilot/irqpilot/internal/host"
	"github.com/irqpilot/irqpilot/internal/load"
)

// lineDevices is how a network IRQ's network softirq divides between the
// network devices whose handlers it runs: the IRQ's own device alone, or,
// for a legacy line shared with other NICs (host.IRQ.SharedWith; another
// driver's handler on it takes no network softirq), each NIC by its share
// of their received packets (/proc/net/dev), evenly where none were
// counted. Before this, a shared line's softirq was all its first
// device's, and RPS on the other was predicted to move nothing.
func lineDevices(h *host.Host, l *load.Load, q *host.IRQ) map[string]float64 {
	devs := []string{q.Device}
	for _, d := range q.SharedWith {
		if h.NIC(d) != nil {
			devs = append(devs, d)
		}
	}
	if len(devs) == 1 {
		return map[string]float64{q.Device: 1}
	}
	sort.Strings(devs)
	var total float64
	for _, d := range devs {
		total += l.NetDevRx[d]
	}
	out := make(map[string]float64, len(devs))
	for _, d := range devs {
		if total > 0 {
			out[d] = l.NetDevRx[d] / total
		} else {
			out[d] = 1 / float64(len(devs))
		}
	}
	return out
}
