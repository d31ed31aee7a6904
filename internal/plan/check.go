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

// check applies the static rules that need no host, kind by kind in plan
// order (so errors come in file order within a kind). Plans built in Go
// get the range checks the parse applies.
func check(p *Plan, l *errList) {
	c := checker{l}
	if p.Version != Version {
		l.add(0, "version", "unsupported plan version %d (this irqpilot reads version %d)", p.Version, Version)
	}
	c.irqs(p.IRQs)
	c.rxQueues(p.RxQueues)
	c.txQueues(p.TxQueues)
	c.sockFlow(p.RPSSockFlowEntries)
	c.apps(p.Apps)
	c.irqbalance(p.Irqbalance)
	c.coalesce(p.Coalesce)
	c.napi(p.NAPI)
	c.busyPoll(p.BusyPoll)
	c.prediction(p.Prediction)
}

type checker struct{ *errList }

// reason: every entry says why, in one line.
func (c checker) reason(line int, field, r string) {
	switch {
	case strings.TrimSpace(r) == "":
		c.add(line, field+".reason", "missing (every entry says why, in one line)")
	case strings.ContainsAny(r, "\n\r"):
		c.add(line, field+".reason", "must be one line")
	}
}

// entry checks an entry's reason and, when it names a device, that it
// does; false when the device is missing (nothing more to check).
func (c checker) entry(line int, field, reason string, device *string) bool {
	c.reason(line, field, reason)
	if device != nil && *device == "" {
		c.add(line, field+".device", "missing")
		return false
	}
	return true
}

// duplicate reports an entry for k when an earlier one (at seen[k]) set
// it, else records this one's line.
func duplicate[K comparable](c checker, seen map[K]int, k K, line int, field, verb, what string) {
	if first, dup := seen[k]; dup {
		c.add(line, field, "duplicate: %s is already %s by the entry at %s", what, verb, where(first))
		return
	}
	seen[k] = line
}

// powerOfTwo reports a count the kernel would round up.
func (c checker) powerOfTwo(line int, field string, n int) {
	if !powerOfTwoOrZero(n) {
		c.add(line, field, "%d is not a power of two (the kernel rounds it up to %d and reports that; write %d)", n, ceilPow2(n), ceilPow2(n))
	}
}

// irqs: one selector, non-empty CPUs, no two entries for the same selector.
func (c checker) irqs(es []IRQEntry) {
	seen := map[string]int{}
	for i, e := range es {
		f := fmt.Sprintf("irqs[%d]", i)
		c.reason(e.Line, f, e.Reason)
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
				c.add(e.Line, f+".device", "missing (queue selects a device's queue: give device too)")
			case e.Queue == nil:
				c.add(e.Line, f+".queue", "missing (device selects by queue: give queue too, or use action: \"%s*\")", e.Device)
			default:
				key = fmt.Sprintf("device %s queue %d", e.Device, *e.Queue)
			}
		}
		if e.Action != "" {
			n++
			key = "action " + e.Action
			if _, err := path.Match(e.Action, ""); err != nil {
				c.add(e.Line, f+".action", "bad pattern %q: %v", e.Action, err)
			}
		}
		switch {
		case n == 0:
			c.add(e.Line, f, "no selector (give one of irq, device+queue, action)")
		case n > 1:
			c.add(e.Line, f, "more than one selector (give only one of irq, device+queue, action)")
		}
		if e.CPUs.IsEmpty() {
			c.add(e.Line, f+".cpus", "missing or empty (an IRQ needs at least one CPU)")
		}
		if n == 1 && key != "" {
			duplicate(c, seen, key, e.Line, f, "set", key)
		}
	}
}

func (c checker) rxQueues(es []RxQueueEntry) {
	cpus, cnt := queueAttr{}, queueAttr{}
	for i, e := range es {
		f := fmt.Sprintf("rx_queues[%d]", i)
		if !c.entry(e.Line, f, e.Reason, &e.Device) {
			continue
		}
		if e.RPSCPUs == nil && e.RPSFlowCnt == nil {
			c.add(e.Line, f, "nothing to set (give rps_cpus and/or rps_flow_cnt)")
		}
		if e.RPSFlowCnt != nil {
			c.powerOfTwo(e.Line, f+".rps_flow_cnt", *e.RPSFlowCnt)
		}
		k := newQueueKey(e.Device, e.Queue)
		var hits []int
		if e.RPSCPUs != nil {
			hits = append(hits, cpus.seen(k, i+1))
		}
		if e.RPSFlowCnt != nil {
			hits = append(hits, cnt.seen(k, i+1))
		}
		if o := earliest(hits...); o > 0 {
			c.add(e.Line, f, "duplicate: %s is already set by the entry at %s", k.name("rx"), where(es[o-1].Line))
		}
	}
}

func (c checker) txQueues(es []TxQueueEntry) {
	cpus := queueAttr{}
	for i, e := range es {
		f := fmt.Sprintf("tx_queues[%d]", i)
		if !c.entry(e.Line, f, e.Reason, &e.Device) {
			continue
		}
		k := newQueueKey(e.Device, e.Queue)
		if o := cpus.seen(k, i+1); o > 0 {
			c.add(e.Line, f, "duplicate: %s is already set by the entry at %s", k.name("tx"), where(es[o-1].Line))
		}
	}
}

func (c checker) sockFlow(e *SockFlowEntry) {
	if e == nil {
		return
	}
	c.reason(e.Line, "rps_sock_flow_entries", e.Reason)
	if e.Value < 0 || e.Value > maxSockFlowEntries {
		c.add(e.Line, "rps_sock_flow_entries.value", "%d is outside 0..%d", e.Value, maxSockFlowEntries)
	} else {
		c.powerOfTwo(e.Line, "rps_sock_flow_entries.value", e.Value)
	}
}

func (c checker) apps(es []AppEntry) {
	seen := map[string]int{}
	for i, e := range es {
		f := fmt.Sprintf("apps[%d]", i)
		c.reason(e.Line, f, e.Reason)
		n := 0
		for _, set := range []bool{e.PID != 0, e.Comm != "", e.Unit != "", e.Cgroup != ""} {
			if set {
				n++
			}
		}
		switch {
		case n == 0:
			c.add(e.Line, f, "no selector (give one of pid, comm, unit, cgroup)")
		case n > 1:
			c.add(e.Line, f, "more than one selector (give only one of pid, comm, unit, cgroup)")
		default:
			if e.PID < 0 {
				c.add(e.Line, f+".pid", "%d is negative", e.PID)
			}
			duplicate(c, seen, e.Selector(), e.Line, f, "placed", e.Selector())
		}
		if e.CPUs.IsEmpty() {
			c.add(e.Line, f+".cpus", "missing or empty")
		}
	}
}

func (c checker) irqbalance(e *IrqbalanceEntry) {
	if e == nil {
		return
	}
	c.reason(e.Line, "irqbalance", e.Reason)
	switch e.Mode {
	case IrqbalanceLeave, IrqbalanceStop:
		if e.BannedCPUs != nil {
			c.add(e.Line, "irqbalance.banned_cpus", "only meaningful with mode: ban")
		}
	case IrqbalanceBan:
		if e.BannedCPUs == nil || e.BannedCPUs.IsEmpty() {
			c.add(e.Line, "irqbalance.banned_cpus", "missing (mode ban needs the CPUs to keep IRQs off)")
		}
	case "":
		c.add(e.Line, "irqbalance.mode", "missing (one of leave, ban, stop)")
	default:
		c.add(e.Line, "irqbalance.mode", "%q is not one of leave, ban, stop", e.Mode)
	}
}

func (c checker) coalesce(es []CoalesceEntry) {
	seen := map[string]int{}
	for i, e := range es {
		f := fmt.Sprintf("coalesce[%d]", i)
		if !c.entry(e.Line, f, e.Reason, &e.Device) {
			continue
		}
		if e.RxUsecs == nil && e.RxFrames == nil && e.TxUsecs == nil && e.TxFrames == nil && e.AdaptiveRx == nil && e.AdaptiveTx == nil {
			c.add(e.Line, f, "nothing to set (give rx_usecs, rx_frames, tx_usecs, tx_frames, adaptive_rx or adaptive_tx)")
		}
		duplicate(c, seen, e.Device, e.Line, f, "set", "coalescing of "+e.Device)
	}
}

// napi: a device-wide entry or one NAPI instance (id) per device, each
// once, with values the kernel takes.
func (c checker) napi(es []NAPIEntry) {
	type key struct {
		dev string
		id  uint32 // 0: the device-wide entry
	}
	seen := map[key]int{}
	for i, e := range es {
		f := fmt.Sprintf("napi[%d]", i)
		if !c.entry(e.Line, f, e.Reason, &e.Device) {
			continue
		}
		if !setting.DeviceNameOK(e.Device) {
			c.add(e.Line, f+".device", "%q is not a network interface name", e.Device)
			continue
		}
		if e.Threaded == nil && e.DeferHardIRQs == nil && e.GROFlushTimeout == nil && e.IRQSuspendTimeout == nil && e.CPUs == nil {
			c.add(e.Line, f, "nothing to set (give threaded, defer_hard_irqs, gro_flush_timeout, irq_suspend_timeout or cpus)")
		}
		if e.ID != nil && *e.ID == 0 {
			c.add(e.Line, f+".id", "0 is not a NAPI id (ids start at 1; see inventory's napi[])")
		}
		if e.ID == nil && e.IRQSuspendTimeout != nil {
			c.add(e.Line, f+".irq_suspend_timeout", "per NAPI instance only (the kernel has no device-wide file): give id, from inventory's napi[]")
		}
		if e.DeferHardIRQs != nil && *e.DeferHardIRQs > setting.MaxDeferHardIRQs {
			c.add(e.Line, f+".defer_hard_irqs", "%d exceeds the maximum %d", *e.DeferHardIRQs, setting.MaxDeferHardIRQs)
		}
		for _, t := range []struct {
			name string
			v    *uint64
		}{{"gro_flush_timeout", e.GROFlushTimeout}, {"irq_suspend_timeout", e.IRQSuspendTimeout}} {
			if t.v != nil && *t.v > setting.MaxNAPITimeoutNs {
				c.add(e.Line, f+"."+t.name, "%d ns exceeds the maximum %d (100 ms)", *t.v, setting.MaxNAPITimeoutNs)
			}
		}
		if e.CPUs != nil && e.CPUs.IsEmpty() {
			c.add(e.Line, f+".cpus", "empty (a thread needs at least one CPU)")
		}
		k, what := key{dev: e.Device}, e.Device+" (device-wide)"
		if e.ID != nil && *e.ID != 0 {
			k.id, what = *e.ID, fmt.Sprintf("%s napi %d", e.Device, *e.ID)
		}
		duplicate(c, seen, k, e.Line, f, "set", what)
	}
}

func (c checker) busyPoll(e *BusyPollEntry) {
	if e == nil {
		return
	}
	c.reason(e.Line, "busy_poll", e.Reason)
	if e.BusyRead == nil && e.BusyPoll == nil {
		c.add(e.Line, "busy_poll", "nothing to set (give busy_read and/or busy_poll, in µs)")
	}
	for _, t := range []struct {
		name string
		v    *int
	}{{"busy_read", e.BusyRead}, {"busy_poll", e.BusyPoll}} {
		if t.v != nil && (*t.v < 0 || *t.v > setting.MaxBusyPollUsecs) {
			c.add(e.Line, "busy_poll."+t.name, "%d µs is outside 0..%d", *t.v, setting.MaxBusyPollUsecs)
		}
	}
}

// queueKey is a device's queue, or all of them (queue -1).
type queueKey struct {
	dev   string
	queue int
}

func newQueueKey(dev string, q *int) queueKey {
	if q == nil {
		return queueKey{dev, -1}
	}
	return queueKey{dev, *q}
}

func (k queueKey) name(dir string) string {
	if k.queue < 0 {
		return fmt.Sprintf("every %s queue of %s", dir, k.dev)
	}
	return fmt.Sprintf("%s %s-%d", k.dev, dir, k.queue)
}

// queueAttr finds duplicate queue entries by map, in time linear in the
// entries: an entry for every queue of a device overlaps each entry for one
// of its queues, and the error names the earliest entry it overlaps.
// Per device: the entries setting one attribute.
type queueAttr map[string]*queueSet

type queueSet struct {
	all   int         // index+1 of the first every-queue entry; 0: none
	any   int         // index+1 of the first entry of any queue
	queue map[int]int // queue → index+1 of its first entry
}

// seen returns the earliest entry that k overlaps (index+1, 0: none) and
// records entry id for k.
func (a queueAttr) seen(k queueKey, id int) int {
	q := a[k.dev]
	if q == nil {
		q = &queueSet{queue: map[int]int{}}
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

// earliest is the smallest positive id (0: none).
func earliest(ids ...int) int {
	m := 0
	for _, id := range ids {
		if id > 0 && (m == 0 || id < m) {
			m = id
		}
	}
	return m
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
