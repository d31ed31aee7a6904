package plan

import (
	"fmt"
	"path"
	"strings"

	"github.com/irqpilot/irqpilot/internal/setting"
)

// Kernel limits (net/core/sysctl_net_core.c, net/core/net-sysfs.c): counts
// above 2^29 are refused with EINVAL.
// maxFlowCount and maxSockFlowEntries bound the flow tables (see
// setting.MaxFlowCnt): a value the kernel accepts but that would cost
// gigabytes of kernel memory is a plan error, not a setting.
const (
	maxFlowCount       = setting.MaxFlowCnt
	maxSockFlowEntries = setting.MaxSockFlowEntries
)

// Check validates a plan built in Go (a policy's output, a plan edited in
// code) with the same static rules Load applies: one selector per entry,
// reasons, valid counts, no duplicates.
func Check(p *Plan) error {
	l := &errList{file: p.File, lines: p.fieldLines}
	check(p, l)
	return l.err()
}

// check applies the static rules that need no host.
func check(p *Plan, l *errList) {
	if p.Version != Version {
		l.add(0, "version", "unsupported plan version %d (this irqpilot reads version %d)", p.Version, Version)
	}
	reason := func(line int, field, r string) {
		switch {
		case strings.TrimSpace(r) == "":
			l.add(line, field+".reason", "missing (every entry says why, in one line)")
		case strings.ContainsAny(r, "\n\r"):
			l.add(line, field+".reason", "must be one line")
		}
	}

	// IRQ entries: one selector, non-empty CPUs, no two entries for the same selector.
	seenIRQ := map[string]int{}
	for i, e := range p.IRQs {
		f := fmt.Sprintf("irqs[%d]", i)
		reason(e.Line, f, e.Reason)
		n := 0
		var key string
		if e.IRQ != nil {
			n++
			key = "irq " + itoa(*e.IRQ)
		}
		if e.Device != "" || e.Queue != nil {
			n++
			switch {
			case e.Device == "":
				l.add(e.Line, f+".device", "missing (queue selects a device's queue: give device too)")
			case e.Queue == nil:
				l.add(e.Line, f+".queue", "missing (device selects by queue: give queue too, or use action: \"%s*\")", e.Device)
			default:
				key = fmt.Sprintf("device %s queue %d", e.Device, *e.Queue)
			}
		}
		if e.Action != "" {
			n++
			key = "action " + e.Action
			if _, err := path.Match(e.Action, ""); err != nil {
				l.add(e.Line, f+".action", "bad pattern %q: %v", e.Action, err)
			}
		}
		switch {
		case n == 0:
			l.add(e.Line, f, "no selector (give one of irq, device+queue, action)")
		case n > 1:
			l.add(e.Line, f, "more than one selector (give only one of irq, device+queue, action)")
		}
		if e.CPUs.IsEmpty() {
			l.add(e.Line, f+".cpus", "missing or empty (an IRQ needs at least one CPU)")
		}
		if n == 1 && key != "" {
			if first, dup := seenIRQ[key]; dup {
				l.add(e.Line, f, "duplicate: %s is already set by the entry at %s", key, where(first))
			} else {
				seenIRQ[key] = e.Line
			}
		}
	}

	type qkey struct {
		dev   string
		queue int // -1: all queues
	}
	qname := func(dir string, k qkey) string {
		if k.queue < 0 {
			return fmt.Sprintf("every %s queue of %s", dir, k.dev)
		}
		return fmt.Sprintf("%s %s-%d", k.dev, dir, k.queue)
	}

	// Duplicates are found by map, in time linear in the entries: an entry
	// for every queue of a device (queue: -1 here) overlaps each entry for
	// one of its queues. The error names the earliest entry it overlaps.
	type qset struct {
		all   int         // index+1 of the first every-queue entry; 0: none
		any   int         // index+1 of the first entry of any queue
		queue map[int]int // queue → index+1 of its first entry
	}
	type qattr map[string]*qset // device → entries setting one attribute
	earliest := func(ids ...int) int {
		m := 0
		for _, id := range ids {
			if id > 0 && (m == 0 || id < m) {
				m = id
			}
		}
		return m
	}
	// seen returns the earliest entry that k overlaps (index+1, 0: none)
	// and records entry id for k.
	seen := func(a qattr, k qkey, id int) int {
		q := a[k.dev]
		if q == nil {
			q = &qset{queue: map[int]int{}}
			a[k.dev] = q
		}
		var hit int
		if k.queue < 0 {
			hit = q.any
		} else {
			hit = earliest(q.all, q.queue[k.queue])
		}
		if q.any == 0 {
			q.any = id
		}
		if k.queue < 0 {
			if q.all == 0 {
				q.all = id
			}
		} else if q.queue[k.queue] == 0 {
			q.queue[k.queue] = id
		}
		return hit
	}

	rxCPUs, rxCnt := qattr{}, qattr{}
	for i, e := range p.RxQueues {
		f := fmt.Sprintf("rx_queues[%d]", i)
		reason(e.Line, f, e.Reason)
		if e.Device == "" {
			l.add(e.Line, f+".device", "missing")
			continue
		}
		if e.RPSCPUs == nil && e.RPSFlowCnt == nil {
			l.add(e.Line, f, "nothing to set (give rps_cpus and/or rps_flow_cnt)")
		}
		if e.RPSFlowCnt != nil && !powerOfTwoOrZero(*e.RPSFlowCnt) {
			l.add(e.Line, f+".rps_flow_cnt", "%d is not a power of two (the kernel rounds it up to %d and reports that; write %d)",
				*e.RPSFlowCnt, ceilPow2(*e.RPSFlowCnt), ceilPow2(*e.RPSFlowCnt))
		}
		k := qkey{e.Device, -1}
		if e.Queue != nil {
			k.queue = *e.Queue
		}
		var hits []int
		if e.RPSCPUs != nil {
			hits = append(hits, seen(rxCPUs, k, i+1))
		}
		if e.RPSFlowCnt != nil {
			hits = append(hits, seen(rxCnt, k, i+1))
		}
		if o := earliest(hits...); o > 0 {
			l.add(e.Line, f, "duplicate: %s is already set by the entry at %s", qname("rx", k), where(p.RxQueues[o-1].Line))
		}
	}

	txCPUs := qattr{}
	for i, e := range p.TxQueues {
		f := fmt.Sprintf("tx_queues[%d]", i)
		reason(e.Line, f, e.Reason)
		if e.Device == "" {
			l.add(e.Line, f+".device", "missing")
			continue
		}
		k := qkey{e.Device, -1}
		if e.Queue != nil {
			k.queue = *e.Queue
		}
		if o := seen(txCPUs, k, i+1); o > 0 {
			l.add(e.Line, f, "duplicate: %s is already set by the entry at %s", qname("tx", k), where(p.TxQueues[o-1].Line))
		}
	}

	if e := p.RPSSockFlowEntries; e != nil {
		reason(e.Line, "rps_sock_flow_entries", e.Reason)
		if e.Value < 0 || e.Value > maxSockFlowEntries {
			l.add(e.Line, "rps_sock_flow_entries.value", "%d is outside 0..%d", e.Value, maxSockFlowEntries)
		} else if !powerOfTwoOrZero(e.Value) {
			l.add(e.Line, "rps_sock_flow_entries.value", "%d is not a power of two (the kernel rounds it up to %d and reports that; write %d)",
				e.Value, ceilPow2(e.Value), ceilPow2(e.Value))
		}
	}

	seenApp := map[string]int{}
	for i, e := range p.Apps {
		f := fmt.Sprintf("apps[%d]", i)
		reason(e.Line, f, e.Reason)
		n := 0
		for _, set := range []bool{e.PID != 0, e.Comm != "", e.Unit != "", e.Cgroup != ""} {
			if set {
				n++
			}
		}
		switch {
		case n == 0:
			l.add(e.Line, f, "no selector (give one of pid, comm, unit, cgroup)")
		case n > 1:
			l.add(e.Line, f, "more than one selector (give only one of pid, comm, unit, cgroup)")
		default:
			if e.PID < 0 {
				l.add(e.Line, f+".pid", "%d is negative", e.PID)
			}
			k := e.Selector()
			if first, dup := seenApp[k]; dup {
				l.add(e.Line, f, "duplicate: %s is already placed by the entry at %s", k, where(first))
			} else {
				seenApp[k] = e.Line
			}
		}
		if e.CPUs.IsEmpty() {
			l.add(e.Line, f+".cpus", "missing or empty")
		}
	}

	if e := p.Irqbalance; e != nil {
		reason(e.Line, "irqbalance", e.Reason)
		switch e.Mode {
		case IrqbalanceLeave, IrqbalanceStop:
			if e.BannedCPUs != nil {
				l.add(e.Line, "irqbalance.banned_cpus", "only meaningful with mode: ban")
			}
		case IrqbalanceBan:
			if e.BannedCPUs == nil || e.BannedCPUs.IsEmpty() {
				l.add(e.Line, "irqbalance.banned_cpus", "missing (mode ban needs the CPUs to keep IRQs off)")
			}
		case "":
			l.add(e.Line, "irqbalance.mode", "missing (one of leave, ban, stop)")
		default:
			l.add(e.Line, "irqbalance.mode", "%q is not one of leave, ban, stop", e.Mode)
		}
	}

	seenCo := map[string]int{}
	for i, e := range p.Coalesce {
		f := fmt.Sprintf("coalesce[%d]", i)
		reason(e.Line, f, e.Reason)
		if e.Device == "" {
			l.add(e.Line, f+".device", "missing")
			continue
		}
		if e.RxUsecs == nil && e.RxFrames == nil && e.TxUsecs == nil && e.TxFrames == nil && e.AdaptiveRx == nil && e.AdaptiveTx == nil {
			l.add(e.Line, f, "nothing to set (give rx_usecs, rx_frames, tx_usecs, tx_frames, adaptive_rx or adaptive_tx)")
		}
		if first, dup := seenCo[e.Device]; dup {
			l.add(e.Line, f, "duplicate: coalescing of %s is already set by the entry at %s", e.Device, where(first))
		} else {
			seenCo[e.Device] = e.Line
		}
	}
	checkNAPI(p, l, reason)
}

// checkNAPI applies the static rules of napi and busy_poll entries (plans
// built in Go get the same range checks the decoder applies).
func checkNAPI(p *Plan, l *errList, reason func(line int, field, r string)) {
	type key struct {
		dev string
		id  uint32 // 0: the device-wide entry
	}
	seen := map[key]int{}
	for i, e := range p.NAPI {
		f := fmt.Sprintf("napi[%d]", i)
		reason(e.Line, f, e.Reason)
		if e.Device == "" {
			l.add(e.Line, f+".device", "missing")
			continue
		}
		if !setting.DeviceNameOK(e.Device) {
			l.add(e.Line, f+".device", "%q is not a network interface name", e.Device)
			continue
		}
		if e.Threaded == nil && e.DeferHardIRQs == nil && e.GROFlushTimeout == nil && e.IRQSuspendTimeout == nil && e.CPUs == nil {
			l.add(e.Line, f, "nothing to set (give threaded, defer_hard_irqs, gro_flush_timeout, irq_suspend_timeout or cpus)")
		}
		if e.ID != nil && *e.ID == 0 {
			l.add(e.Line, f+".id", "0 is not a NAPI id (ids start at 1; see inventory's napi[])")
		}
		if e.ID == nil && e.IRQSuspendTimeout != nil {
			l.add(e.Line, f+".irq_suspend_timeout", "per NAPI instance only (the kernel has no device-wide file): give id, from inventory's napi[]")
		}
		if e.DeferHardIRQs != nil && *e.DeferHardIRQs > setting.MaxDeferHardIRQs {
			l.add(e.Line, f+".defer_hard_irqs", "%d exceeds the maximum %d", *e.DeferHardIRQs, setting.MaxDeferHardIRQs)
		}
		for _, t := range []struct {
			name string
			v    *uint64
		}{{"gro_flush_timeout", e.GROFlushTimeout}, {"irq_suspend_timeout", e.IRQSuspendTimeout}} {
			if t.v != nil && *t.v > setting.MaxNAPITimeoutNs {
				l.add(e.Line, f+"."+t.name, "%d ns exceeds the maximum %d (100 ms)", *t.v, setting.MaxNAPITimeoutNs)
			}
		}
		if e.CPUs != nil && e.CPUs.IsEmpty() {
			l.add(e.Line, f+".cpus", "empty (a thread needs at least one CPU)")
		}
		k := key{dev: e.Device}
		if e.ID != nil {
			k.id = *e.ID
		}
		if first, dup := seen[k]; dup {
			what := e.Device + " (device-wide)"
			if k.id != 0 {
				what = fmt.Sprintf("%s napi %d", e.Device, k.id)
			}
			l.add(e.Line, f, "duplicate: %s is already set by the entry at %s", what, where(first))
		} else {
			seen[k] = e.Line
		}
	}
	if e := p.BusyPoll; e != nil {
		reason(e.Line, "busy_poll", e.Reason)
		if e.BusyRead == nil && e.BusyPoll == nil {
			l.add(e.Line, "busy_poll", "nothing to set (give busy_read and/or busy_poll, in µs)")
		}
		for _, t := range []struct {
			name string
			v    *int
		}{{"busy_read", e.BusyRead}, {"busy_poll", e.BusyPoll}} {
			if t.v != nil && (*t.v < 0 || *t.v > setting.MaxBusyPollUsecs) {
				l.add(e.Line, "busy_poll."+t.name, "%d µs is outside 0..%d", *t.v, setting.MaxBusyPollUsecs)
			}
		}
	}
}

func where(line int) string {
	if line <= 0 {
		return "an earlier entry"
	}
	return "line " + itoa(line)
}

func powerOfTwoOrZero(n int) bool { return n >= 0 && n&(n-1) == 0 }

func ceilPow2(n int) int {
	p := 1
	for p < n {
		p <<= 1
	}
	return p
}
