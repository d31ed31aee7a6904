package load

import "fmt"

// Per-queue packet rates: the drivers' counters of each queue of a
// multi-queue hardware device (kernel.FS.NetQueuePackets), sampled with the
// rest, say how a device's traffic divides between its queues.

// counterRates is the per-second rate of each counter in both maps; a
// counter that went backwards counts 0 and is listed in Resets.
func counterRates(l *Load, what string, a, b map[int]uint64, sec float64) map[int]float64 {
	out := map[int]float64{}
	for k, vb := range b {
		va, ok := a[k]
		switch {
		case !ok:
		case vb < va:
			l.Resets = append(l.Resets, Reset{Source: "ethtool -S", Counter: fmt.Sprintf("%s %d packets", what, k), CPU: -1, Prev: va, Cur: vb})
			out[k] = 0
		default:
			out[k] = float64(vb-va) / sec
		}
	}
	return out
}

// MinTraffic is the packet rate (packets/s) below which traffic is too
// small to compare: a rate that changed, or how a device's packets split
// over its queues.
const MinTraffic = 200.0

// QueueShares is each multi-queue hardware device's share of its received
// packets by queue (0 to 1, from the drivers' per-queue counters), for the
// devices that received at least MinTraffic packets per second; nil where
// the counters were not read.
func (l *Load) QueueShares() map[string]map[int]float64 {
	var out map[string]map[int]float64
	for dev, per := range l.QueueRx {
		var total float64
		for _, v := range per {
			total += v
		}
		if total < MinTraffic {
			continue
		}
		if out == nil {
			out = map[string]map[int]float64{}
		}
		out[dev] = map[int]float64{}
		for q, v := range per {
			out[dev][q] = v / total
		}
	}
	return out
}
