package bench

import (
	"fmt"
	"sort"
	"strings"

	"github.com/irqpilot/irqpilot/internal/bench/workload"
	"github.com/irqpilot/irqpilot/internal/host"
	"github.com/irqpilot/irqpilot/internal/kernel"
	"github.com/irqpilot/irqpilot/internal/setting"
)

// Scope is what a bench or tune run may change: the devices under test and
// nothing else. A policy plans for the whole machine (dedicated-core moves
// every movable IRQ, a storage run has no network device so rps-spread
// would steer eth0); the machine's other devices — eth0 above all, which
// the machine's own traffic uses — must never be touched by a measurement.
// Every Setup goes through Restrict before it is applied.
type Scope struct {
	// NetDevice is the testbed's server device ("" for none).
	NetDevice string `json:"net_device,omitempty"`
	// Disk is the storage workload's block device ("" for none).
	Disk string `json:"disk,omitempty"`
	// IRQs are the IRQ numbers of NetDevice and Disk (ascending).
	IRQs []int `json:"irqs"`
	// PIDs are processes whose threads may be placed (the application) and
	// NAPIThreads the testbed's threaded-NAPI kernel threads.
	PIDs        []int `json:"-"`
	NAPIThreads []int `json:"-"`

	// fs is the machine the application runs on (AppInfo.FS), where a
	// thread's process is looked up; nil: threads are matched by PIDs alone.
	fs *kernel.FS
}

// NewScope is the scope of app on h: the IRQs whose device is the testbed
// device or the storage disk (by the host model's IRQ-to-device mapping and
// the block device's IRQ list).
func NewScope(h *host.Host, app workload.AppInfo) Scope {
	s := Scope{NetDevice: app.Device, Disk: app.Disk, PIDs: app.PIDs, NAPIThreads: app.NAPIThreads, fs: app.FS}
	seen := map[int]bool{}
	add := func(n int) {
		if !seen[n] {
			seen[n] = true
			s.IRQs = append(s.IRQs, n)
		}
	}
	for _, q := range h.IRQs {
		if q.Device != "" && (q.Device == app.Device || q.Device == app.Disk) {
			add(q.Number)
		}
	}
	if app.Disk != "" {
		for _, b := range h.Block {
			if b.Name == app.Disk {
				for _, n := range b.IRQs {
					add(n)
				}
			}
		}
	}
	if app.Device != "" {
		if nic := h.NIC(app.Device); nic != nil {
			for _, n := range nic.IRQs {
				add(n)
			}
		}
	}
	sort.Ints(s.IRQs)
	return s
}

// Describe is the scope for people: "devices under test: veth vs4104;
// IRQs: none".
func (s Scope) Describe() string {
	var devs []string
	if s.NetDevice != "" {
		devs = append(devs, "network device "+s.NetDevice)
	}
	if s.Disk != "" {
		devs = append(devs, "disk "+s.Disk)
	}
	if len(devs) == 0 {
		devs = []string{"none"}
	}
	irqs := "none"
	if len(s.IRQs) > 0 {
		var b strings.Builder
		for i, n := range s.IRQs {
			if i > 0 {
				b.WriteString(", ")
			}
			fmt.Fprintf(&b, "%d", n)
		}
		irqs = b.String()
	}
	return "devices under test: " + strings.Join(devs, ", ") + "; IRQs: " + irqs
}

func (s Scope) hasIRQ(n int) bool {
	i := sort.SearchInts(s.IRQs, n)
	return i < len(s.IRQs) && s.IRQs[i] == n
}

// Restrict keeps the changes inside the scope and describes each dropped
// one, by what each change belongs to (setting.ScopeOf): IRQ moves of IRQs
// not belonging to the devices under test, settings of other devices,
// machine-wide settings (only rps_sock_flow_entries is kept, and only when
// a device under test is steered: RFS needs it), thread placements of
// threads that are neither the application's nor the testbed's NAPI
// threads, and the irqbalance daemon (bench measures irqbalance itself).
func (s Scope) Restrict(changes []setting.Change) (kept []setting.Change, dropped []string) {
	steersDevice := false
	for i := range changes {
		if sc := setting.ScopeOf(&changes[i]); s.NetDevice != "" && sc.NetDevice == s.NetDevice {
			steersDevice = true
		}
	}
	drop := func(c setting.Change, why string) {
		dropped = append(dropped, fmt.Sprintf("%s (%s → %s): %s", c.Target, c.Name(), setting.Display(c.Kind, c.Value), why))
	}
	for _, c := range changes {
		sc := setting.ScopeOf(&c)
		switch {
		case sc.IRQ >= 0:
			if !s.hasIRQ(sc.IRQ) {
				drop(c, fmt.Sprintf("IRQ %d is not an IRQ of the devices under test", sc.IRQ))
				continue
			}
		case sc.TID > 0:
			if !s.ownsThread(sc.TID) {
				drop(c, fmt.Sprintf("thread %d is neither the application's nor a NAPI thread of the device under test", sc.TID))
				continue
			}
		case sc.NetDevice != "":
			if s.NetDevice == "" || sc.NetDevice != s.NetDevice {
				drop(c, "not a queue of the device under test")
				continue
			}
		case sc.MachineWide && c.Path == setting.SockFlowPath:
			if !steersDevice {
				drop(c, "system-wide setting not needed by the device under test")
				continue
			}
		case sc.MachineWide:
			drop(c, string(c.Kind)+" is system-wide: not changed by bench")
			continue
		default:
			drop(c, string(c.Kind)+" is not changed by bench")
			continue
		}
		kept = append(kept, c)
	}
	return kept, dropped
}

// ownsThread: tid is a NAPI thread of the device or a thread of one of the
// application's processes (its Tgid).
func (s Scope) ownsThread(tid int) bool {
	for _, t := range s.NAPIThreads {
		if t == tid {
			return true
		}
	}
	tg := tgid(s.fs, tid)
	for _, p := range s.PIDs {
		if p == tid || (tg > 0 && p == tg) {
			return true
		}
	}
	return false
}

// tgid is the process of thread tid on fs's machine; 0 when unknown.
func tgid(fs *kernel.FS, tid int) int {
	if fs == nil {
		return 0
	}
	n, err := fs.Tgid(tid)
	if err != nil {
		return 0
	}
	return n
}

// ForeignIRQs are the IRQs of h outside the scope: irqbalance is told to
// leave them alone (--banirq).
func (s Scope) ForeignIRQs(h *host.Host) []int {
	var out []int
	for _, q := range h.IRQs {
		if !s.hasIRQ(q.Number) {
			out = append(out, q.Number)
		}
	}
	return out
}
