// Package record is irqpilot's recording format: JSON Lines, one object per
// line. The first line is a Header (host name, start time, interval and the
// host inventory); every further line is one Sample of raw counters, from
// which a report computes rates (load.Rates) for any pair of samples.
//
// Raw counters rather than computed load are stored because they survive a
// lost line (the next pair still gives a rate), can be re-analysed by a newer
// irqpilot, and cost nothing to compute while recording.
//
// A recording cut off mid-line (the recorder was killed) stays readable up to
// its last complete sample: every line is written with a single write(2), and
// Read ignores a last line that is incomplete.
//
// Line format (stable, documented in the README):
//
//	{"type":"header","format":"irqpilot-record","version":1,"host":"db1",
//	 "start":"2024-…Z","interval_ns":1000000000,"inventory":{…host.Host…}}
//	{"type":"sample","time":"…","clock_ns":…,"clock_source":"monotonic",
//	 "cpus":[{"id":0,"user":…},…],                       // /proc/stat, seconds
//	 "irq_cpus":[0,1],                                     // /proc/interrupts columns
//	 "irqs":[["38",[12,3456]],["LOC",[…]],…],              // row label, per-column counts
//	 "irq_info":{"38":{"chip":"PCI-MSIX-0000:00:03.0","actions":["virtio0-input.0"]}},
//	 "softirqs":{"cpus":[0,1],"types":["HI",…],"counts":[[…],…]},
//	 "softnet":[{"cpu":0,"processed":…},…],
//	 "cost":{"clock_ns":…,"boot_ns":…,"cpus":[0,1],        // eBPF collector (absent: counts only)
//	         "hardirqs":[{"id":36,"time_ns":[…],"count":[…]},…],
//	         "softirqs":[{"id":3,"time_ns":[…],"count":[…]},…],   // id: vector number
//	         "napi":[{"dev":"eth0","napi_id":8193,"polls":[…],"work":[…],"exhausted":[…]}]}}
//
// irq_info carries the chip, hwirq, trigger, actions and description of a
// /proc/interrupts row only in the first sample and whenever they change;
// the reader carries them forward.
package record

import (
	"time"

	"github.com/irqpilot/irqpilot/internal/host"
	"github.com/irqpilot/irqpilot/internal/kernel"
	"github.com/irqpilot/irqpilot/internal/kernel/bpfcost"
	"github.com/irqpilot/irqpilot/internal/load"
)

// Format and Version identify the recording format in the header.
const (
	Format  = "irqpilot-record"
	Version = 1
)

// Header is the first line of a recording.
type Header struct {
	Type     string    `json:"type"` // "header"
	Format   string    `json:"format"`
	Version  int       `json:"version"`
	Host     string    `json:"host"`
	Start    time.Time `json:"start"`
	Interval int64     `json:"interval_ns"`
	// Inventory is the host model read once at the start (host.Read).
	Inventory *host.Host `json:"inventory,omitempty"`
}

// IntervalDuration is the sampling interval as a time.Duration.
func (h *Header) IntervalDuration() time.Duration { return time.Duration(h.Interval) }

// line is one sample line as stored.
type line struct {
	Type        string                 `json:"type"` // "sample"
	Time        time.Time              `json:"time"`
	Clock       int64                  `json:"clock_ns"`
	ClockSource string                 `json:"clock_source"`
	CPUs        []load.CPUTimes        `json:"cpus"`
	IRQCPUs     []int                  `json:"irq_cpus"`
	IRQs        []irqRow               `json:"irqs"`
	IRQInfo     map[string]*irqInfo    `json:"irq_info,omitempty"`
	Softirqs    *kernel.Softirqs       `json:"softirqs,omitempty"`
	Softnet     []load.SoftnetCounters `json:"softnet,omitempty"`
	Unavailable []string               `json:"unavailable,omitempty"`
	Cost        *bpfcost.Snapshot      `json:"cost,omitempty"`
}

// irqRow is one /proc/interrupts row: [label, [counts…]]. Encoded as a
// two-element array to keep lines short.
type irqRow struct {
	Name   string
	Counts []uint64
}

// irqInfo is the descriptive part of a /proc/interrupts row.
type irqInfo struct {
	Chip        string   `json:"chip,omitempty"`
	HWIRQ       string   `json:"hwirq,omitempty"`
	Trigger     string   `json:"trigger,omitempty"`
	Actions     []string `json:"actions,omitempty"`
	Description string   `json:"description,omitempty"`
}

func (a *irqInfo) equal(b *irqInfo) bool {
	if a == nil || b == nil {
		return a == b
	}
	if a.Chip != b.Chip || a.HWIRQ != b.HWIRQ || a.Trigger != b.Trigger ||
		a.Description != b.Description || len(a.Actions) != len(b.Actions) {
		return false
	}
	for i := range a.Actions {
		if a.Actions[i] != b.Actions[i] {
			return false
		}
	}
	return true
}
