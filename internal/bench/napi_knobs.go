package bench

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/irqpilot/irqpilot/internal/bench/workload"
	"github.com/irqpilot/irqpilot/internal/host"
	"github.com/irqpilot/irqpilot/internal/setting"
)

// Knobs is an explicit interrupt-mitigation setting of the device under
// test, the NAPI counterpart of Spec: configuration
// "napi:threaded=1,defer=2,flush=20000,suspend=20000000" sets threaded
// NAPI (0 or 1), napi_defer_hard_irqs (a count) and gro_flush_timeout (ns)
// for the whole device, and irq_suspend_timeout (ns) on each of its NAPI
// instances. Keys left out are left as they are. Busy polling is not a
// knob of the device but of the application's sockets: a run option
// ("napi:…/epollbusy=50", see CutRunOptions).
type Knobs struct {
	Threaded         *bool
	Defer            *uint32
	FlushNs, Suspend *uint64
}

// KnobFields are the KEY=VALUE fields of a napi: configuration.
var KnobFields = []string{"threaded", "defer", "flush", "suspend"}

// ParseKnobs reads a "napi:" configuration.
func ParseKnobs(config string) (*Knobs, error) {
	body, ok := strings.CutPrefix(config, "napi:")
	if !ok {
		return nil, fmt.Errorf("%q: not a napi: configuration", config)
	}
	k := &Knobs{}
	for _, kv := range strings.Split(body, ",") {
		key, v, ok := strings.Cut(kv, "=")
		n, err := strconv.ParseUint(v, 10, 64)
		if !ok || err != nil {
			return nil, fmt.Errorf("%q: %q is not KEY=NUMBER (threaded, defer, flush, suspend)", config, kv)
		}
		switch key {
		case "threaded":
			if n > 1 {
				return nil, fmt.Errorf("%q: threaded=%d: want 0 or 1", config, n)
			}
			on := n == 1
			k.Threaded = &on
		case "defer":
			if n > 1<<31-1 { // the kernel's limit for napi_defer_hard_irqs (S32_MAX)
				return nil, fmt.Errorf("%q: defer=%d is above %d", config, n, 1<<31-1)
			}
			d := uint32(n)
			k.Defer = &d
		case "flush":
			k.FlushNs = &n
		case "suspend":
			k.Suspend = &n
		default:
			return nil, fmt.Errorf("%q: unknown key %q (threaded, defer, flush, suspend)", config, key)
		}
	}
	return k, nil
}

// String renders knobs in canonical order.
func (k *Knobs) String() string {
	var parts []string
	if k.Threaded != nil {
		v := "0"
		if *k.Threaded {
			v = "1"
		}
		parts = append(parts, "threaded="+v)
	}
	if k.Defer != nil {
		parts = append(parts, fmt.Sprintf("defer=%d", *k.Defer))
	}
	if k.FlushNs != nil {
		parts = append(parts, fmt.Sprintf("flush=%d", *k.FlushNs))
	}
	if k.Suspend != nil {
		parts = append(parts, fmt.Sprintf("suspend=%d", *k.Suspend))
	}
	return "napi:" + strings.Join(parts, ",")
}

// knobSetup makes a "napi:" configuration's changes for the device under
// test (applied in the testbed's namespace: sysfs files and netlink).
func knobSetup(config string, h *host.Host, app workload.AppInfo) (*Setup, error) {
	k, err := ParseKnobs(config)
	if err != nil {
		return nil, err
	}
	if app.Device == "" {
		return nil, fmt.Errorf("%q: NAPI settings need a network device under test; this workload has none", config)
	}
	dev := app.Device
	s := &Setup{Config: config}
	if k.Threaded != nil {
		s.Changes = append(s.Changes, setting.DevThreaded(dev, *k.Threaded, config))
	}
	if k.Defer != nil {
		s.Changes = append(s.Changes, setting.DevDeferHardIRQs(dev, *k.Defer, config))
	}
	if k.FlushNs != nil {
		s.Changes = append(s.Changes, setting.DevGROFlushTimeout(dev, *k.FlushNs, config))
	}
	if k.Suspend != nil {
		napis := h.NAPIsOf(dev)
		for _, n := range napis {
			if n.IRQSuspendTimeout == nil {
				s.Notes = append(s.Notes, fmt.Sprintf("%s napi %d: the kernel reports no irq-suspend-timeout; not set", dev, n.ID))
				continue
			}
			s.Changes = append(s.Changes, setting.NAPISetting(setting.KindNAPIIRQSuspendTimeout, dev, n.ID, *k.Suspend, config))
		}
		if len(napis) == 0 {
			s.Notes = append(s.Notes, dev+" has no NAPI instance: no IRQ suspension to set")
		}
	}
	return s, nil
}

// Values of the knob candidates: the policies' own (internal/plan's
// efficiency and latency, from Documentation/networking/napi.rst and Cai
// & Karsten), and the 50 µs busy-poll time of
// Documentation/admin-guide/sysctl/net.rst.
const (
	knobDefer      = 2
	knobFlushEff   = 20_000
	knobFlushLat   = 200_000
	knobSuspend    = 20_000_000
	knobBusyPollUs = 50
)

// KnobCandidates are tune's interrupt-mitigation candidates for the device
// under test, each on the machine's own placement, and notes saying which
// kinds the machine cannot have and why:
//
//   - deferral + GRO flush (napi_defer_hard_irqs 2 with a 20 µs and a
//     200 µs gro_flush_timeout), for a device with NAPI instances;
//   - IRQ suspension (irq_suspend_timeout 20 ms with deferral 2/200 µs as
//     its safety net), where the kernel reports the attribute;
//   - threaded NAPI turned on (or off, when the device already has it);
//   - busy polling for opted-in sockets — socket busy polling and epoll
//     busy polling, the latter also with IRQ suspension, which engages
//     only while an application busy-polls through epoll — when the
//     workload's server can opt in (busyPolls: the udp sink);
//     net.core.busy_read/busy_poll would opt in every socket of the
//     machine, which bench never changes;
//   - interrupt coalescing: none; see the note it returns.
func KnobCandidates(h *host.Host, app workload.AppInfo, busyPolls bool) (cands, notes []string) {
	if app.Device == "" {
		return nil, []string{"no network device under test: no NAPI or coalescing candidates"}
	}
	dev := app.Device
	napis := h.NAPIsOf(dev)
	d, fe, fl, su := uint32(knobDefer), uint64(knobFlushEff), uint64(knobFlushLat), uint64(knobSuspend)
	suspend := ""
	if len(napis) == 0 {
		notes = append(notes, fmt.Sprintf("%s has no NAPI instance (a veth receives through NAPI only with GRO on: --gro): no deferral, IRQ-suspension or threaded-NAPI candidates", dev))
	} else {
		threaded := false
		canSuspend := true
		for _, n := range napis {
			threaded = threaded || (n.Threaded != nil && *n.Threaded)
			canSuspend = canSuspend && n.IRQSuspendTimeout != nil
		}
		on := !threaded
		cands = append(cands,
			(&Knobs{Defer: &d, FlushNs: &fe}).String(),
			(&Knobs{Defer: &d, FlushNs: &fl}).String(),
			(&Knobs{Threaded: &on}).String())
		if canSuspend {
			suspend = (&Knobs{Defer: &d, FlushNs: &fl, Suspend: &su}).String()
			cands = append(cands, suspend)
		} else {
			notes = append(notes, fmt.Sprintf("%s: the kernel reports no irq-suspend-timeout for its NAPI instances: no IRQ-suspension candidate", dev))
		}
	}
	if busyPolls {
		bp := strconv.Itoa(knobBusyPollUs)
		cands = append(cands, "default/busypoll="+bp, "default/epollbusy="+bp)
		if suspend != "" {
			cands = append(cands, suspend+"/epollbusy="+bp)
		}
	} else {
		notes = append(notes, "no busy-polling candidates: the workload's server does not opt its sockets in (SO_BUSY_POLL, epoll busy polling: only the udp sink can), and net.core.busy_read/busy_poll would opt in every socket of the machine, which bench does not change")
	}
	if nic := h.NIC(dev); nic == nil || nic.Coalesce == nil {
		notes = append(notes, fmt.Sprintf("no coalescing candidates: %s's driver reports no interrupt coalescing (ethtool -c; veth takes none)", dev))
	} else {
		notes = append(notes, fmt.Sprintf("no coalescing candidates: %s reports interrupt coalescing, but bench applies coalescing to no testbed device", dev))
	}
	return cands, notes
}
