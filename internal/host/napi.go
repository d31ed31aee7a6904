package host

import (
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"

	"github.com/irqpilot/irqpilot/internal/cpuset"
	"github.com/irqpilot/irqpilot/internal/kernel"
	"github.com/irqpilot/irqpilot/internal/kernel/netdev"
)

// napiFile is the synthetic file in a capture that holds what the netdev
// generic-netlink family said, so a snapshot reproduces the live inventory.
const napiFile = "napi.json"

// NAPI is one NAPI instance: the kernel's unit of receive (and transmit
// completion) processing, polled in softirq context or — threaded — by a
// kernel thread of its own. The JSON names are a documented interface.
type NAPI struct {
	ID     uint32     `json:"id"`
	Device string     `json:"device"`
	Queues NAPIQueues `json:"queues"`
	// IRQ is the interrupt that schedules it (nil: none, as for veth).
	IRQ *int `json:"irq"`
	// PID is its kernel thread (nil: not threaded).
	PID *int `json:"pid"`
	// CPUs is where that thread may run (nil: no thread or unread).
	CPUs *cpuset.Set `json:"cpus"`
	// Threaded, DeferHardIRQs, GROFlushTimeout (ns) and IRQSuspendTimeout
	// (ns) are nil when the kernel does not report them (threaded before
	// 6.17, the others before 6.13).
	Threaded          *bool   `json:"threaded"`
	DeferHardIRQs     *uint32 `json:"defer_hard_irqs"`
	GROFlushTimeout   *uint64 `json:"gro_flush_timeout"`
	IRQSuspendTimeout *uint64 `json:"irq_suspend_timeout"`
	// PIDStart is the thread's start time (clock ticks after boot), so a
	// placement of it is never applied to a thread that reused the id.
	// Live machine only.
	PIDStart uint64 `json:"-"`
}

// NAPIQueues are the queue indexes a NAPI instance serves, as queue-get
// links them (drivers that do not link them, such as veth, give none).
type NAPIQueues struct {
	RX []int `json:"rx"`
	TX []int `json:"tx"`
}

// NAPIFacts is what a capture keeps: the netlink answers and the thread
// placements, or why there are none.
type NAPIFacts struct {
	Error   string         `json:"error,omitempty"`
	Ifindex map[string]int `json:"ifindex"`
	NAPIs   []netdev.NAPI  `json:"napis"`
	Queues  []netdev.Queue `json:"queues"`
	CPUs    map[int]string `json:"cpus,omitempty"` // thread pid → cpulist
	Unsup   bool           `json:"unsupported,omitempty"`
	// NAPISet: the family offers napi-set (probed; nil in older captures).
	NAPISet *bool `json:"napi_set,omitempty"`
}

// NAPIsOf returns the NAPI instances of device dev.
func (h *Host) NAPIsOf(dev string) []NAPI {
	var out []NAPI
	for _, n := range h.NAPI {
		if n.Device == dev {
			out = append(out, n)
		}
	}
	return out
}

// QueryNAPI asks the netdev family, in the calling thread's network
// namespace, for the NAPI instances and queues of the named devices
// (ifindex by name). A kernel without the family gives facts that say so.
func QueryNAPI(ifindex map[string]int) NAPIFacts {
	f := NAPIFacts{Ifindex: ifindex}
	c, err := netdev.Open()
	if err != nil {
		f.Error, f.Unsup = err.Error(), errors.Is(err, kernel.ErrUnsupported)
		if f.Unsup {
			no := false
			f.NAPISet = &no // no family, no napi-set
		}
		return f
	}
	defer c.Close()
	if ok, err := c.HasOp(netdev.CmdNAPISet); err == nil {
		f.NAPISet = &ok
	}
	if f.NAPIs, err = c.NAPIs(0); err != nil {
		f.Error, f.Unsup = err.Error(), errors.Is(err, kernel.ErrUnsupported)
		return f
	}
	if f.Queues, err = c.Queues(0); err != nil {
		f.Queues = nil // NAPIs without their queues are still worth listing
	}
	return f
}

// readNAPI fills h.NAPI: from netlink on the live machine (saved for a
// capture), from the capture's napi.json otherwise.
func readNAPI(kfs *kernel.FS, h *Host) {
	if len(h.NICs) == 0 {
		return
	}
	ifindex := map[string]int{}
	for _, n := range h.NICs {
		if v, err := kfs.IfIndex(n.Name); err == nil {
			ifindex[n.Name] = v
		}
	}
	var facts NAPIFacts
	if kfs.IsLive() {
		facts = QueryNAPI(ifindex)
		facts.CPUs = map[int]string{}
		for _, n := range facts.NAPIs {
			if n.PID != nil {
				if s, err := kfs.ThreadAffinity(*n.PID); err == nil {
					facts.CPUs[*n.PID] = s.String()
				}
			}
		}
		if b, err := json.Marshal(facts); err == nil {
			kfs.SaveSynthetic(napiFile, b)
		}
	} else {
		b, err := kfs.ReadSynthetic(napiFile)
		if err != nil {
			h.unavailable("napi", "/"+kernel.SyntheticDir+"/"+napiFile,
				fmt.Errorf("unsupported here: not in this capture (NAPI instances are read with netlink on the live machine): %w", err))
			return
		}
		if err := json.Unmarshal(b, &facts); err != nil {
			h.unavailable("napi", "/"+kernel.SyntheticDir+"/"+napiFile, err)
			return
		}
	}
	applyNAPI(kfs, h, facts)
}

func applyNAPI(kfs *kernel.FS, h *Host, f NAPIFacts) {
	h.NAPISet = f.NAPISet
	if f.Error != "" {
		reason := f.Error
		if f.Unsup {
			reason = "unsupported: " + reason
		}
		h.unavailable("napi", "netlink family netdev", errors.New(reason))
		return
	}
	names := map[int]string{}
	for name, ix := range f.Ifindex {
		names[ix] = name
	}
	byID := map[uint32]*NAPI{}
	for _, n := range f.NAPIs {
		dev, ok := names[n.Ifindex]
		if !ok {
			continue // a device the model does not list
		}
		m := NAPI{ID: n.ID, Device: dev, IRQ: n.IRQ, PID: n.PID, Threaded: n.Threaded, DeferHardIRQs: n.DeferHardIRQs,
			GROFlushTimeout: n.GROFlushTimeout, IRQSuspendTimeout: n.IRQSuspendTimeout,
			Queues: NAPIQueues{RX: []int{}, TX: []int{}}}
		if n.PID != nil {
			if s, ok := f.CPUs[*n.PID]; ok {
				if set, err := cpuset.Parse(s); err == nil {
					m.CPUs = &set
				}
			}
			if kfs.IsLive() {
				if st, err := kfs.TaskStart(*n.PID); err == nil {
					m.PIDStart = st
				}
			}
		}
		h.NAPI = append(h.NAPI, m)
	}
	sort.Slice(h.NAPI, func(i, j int) bool {
		if h.NAPI[i].Device != h.NAPI[j].Device {
			return h.NAPI[i].Device < h.NAPI[j].Device
		}
		return h.NAPI[i].ID < h.NAPI[j].ID
	})
	for i := range h.NAPI {
		byID[h.NAPI[i].ID] = &h.NAPI[i]
	}
	for _, q := range f.Queues {
		if q.NAPIID == nil {
			continue
		}
		n, ok := byID[*q.NAPIID]
		if !ok {
			continue
		}
		switch q.Type {
		case "rx":
			n.Queues.RX = append(n.Queues.RX, int(q.ID))
		case "tx":
			n.Queues.TX = append(n.Queues.TX, int(q.ID))
		}
	}
	for i := range h.NAPI {
		sort.Ints(h.NAPI[i].Queues.RX)
		sort.Ints(h.NAPI[i].Queues.TX)
	}
	// Hardware NICs whose driver registered no NAPI instance (or a kernel
	// that reports none) say so; virtual devices without NAPI are the norm.
	for _, nic := range h.NICs {
		if nic.Virtual || len(h.NAPIsOf(nic.Name)) > 0 {
			continue
		}
		ix, ok := f.Ifindex[nic.Name]
		path := "netlink napi-get"
		if ok {
			path += " ifindex " + strconv.Itoa(ix)
		}
		h.unavailable("nic "+nic.Name+" napi", path, errors.New("unsupported: the device reports no NAPI instance"))
	}
}
