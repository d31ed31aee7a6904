package plan

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/irqpilot/irqpilot/internal/cpuset"
	"github.com/irqpilot/irqpilot/internal/host"
	"github.com/irqpilot/irqpilot/internal/setting"
)

// A resolved plan is a list of setting.Change: one per concrete setting on
// this host, with Old set from the host model ("" when unknown) and Status
// skipped (Note saying why) for what will not be written.

// ManagedSkip is the reason a kernel-managed IRQ is left alone.
const ManagedSkip = "kernel-managed affinity: the kernel spreads this queue's IRQ over the CPUs that use the queue and refuses writes; left as is"

// PerCPUSkip is the reason a timer or other per-CPU IRQ is left alone.
const PerCPUSkip = "per-CPU IRQ (a timer or a per-CPU event): every CPU has its own, so it has no affinity to move; left as is"

// Resolve checks the plan against the host and turns its selectors into
// concrete settings, in plan order: IRQs, rx queues, tx queues,
// rps_sock_flow_entries, apps, irqbalance, coalescing, NAPI, busy polling.
// Unknown IRQs, devices and queues, offline or absent CPUs, and two entries
// that select the same thing are errors naming the file, line and field.
// Kernel-managed IRQs come back with status skipped (note ManagedSkip), and
// so do timers and per-CPU IRQs (note PerCPUSkip).
func Resolve(p *Plan, h *host.Host) ([]setting.Change, error) {
	l := &errList{file: p.File, lines: p.fieldLines}
	check(p, l)
	if len(l.errs) > 0 {
		return nil, l.err()
	}
	checkPrediction(p.Prediction, h, l)
	v := ViewCPUs(h)
	var out []setting.Change
	claimed := map[string]int{} // path → line (or -1-index for generated) of the entry that set it
	claim := func(line int, field string, s setting.Change) {
		s.Line = line
		key := s.Path
		if key == "" {
			return
		}
		if first, dup := claimed[key]; dup {
			l.add(line, field, "%s is also set by the entry at %s", s.Target, where(first))
			return
		}
		claimed[key] = line
		out = append(out, s)
	}

	for i, e := range p.IRQs {
		f := fmt.Sprintf("irqs[%d]", i)
		if !supported(h, l, e.Line, f+".cpus", setting.KindIRQAffinity, "") {
			continue
		}
		v.check(l, e.Line, f+".cpus", e.CPUs)
		for _, q := range selectIRQs(h, e, l, f) {
			s := setting.IRQAffinity(q.Number, irqTarget(q), e.CPUs, e.Reason)
			s.Device, s.Queue, s.Old = q.Device, q.Queue, oldOf(q.Affinity, cpuset.Set.String)
			switch {
			case q.Class == host.ClassTimer || q.PerCPU():
				s.Status, s.Note = setting.StatusSkipped, PerCPUSkip
			case q.Managed == host.ManagedYes:
				s.Status, s.Note = setting.StatusSkipped, ManagedSkip
			}
			claim(e.Line, f, s)
		}
	}

	for i, e := range p.RxQueues {
		f := fmt.Sprintf("rx_queues[%d]", i)
		nic := findNIC(h, e.Device, l, e.Line, f+".device")
		if nic == nil {
			continue
		}
		if e.RPSCPUs != nil {
			v.check(l, e.Line, f+".rps_cpus", *e.RPSCPUs)
		}
		if (e.RPSCPUs != nil && !supported(h, l, e.Line, f+".rps_cpus", setting.KindRPSCPUs, "")) ||
			(e.RPSFlowCnt != nil && !supported(h, l, e.Line, f+".rps_flow_cnt", setting.KindRPSFlowCnt, "")) {
			continue
		}
		for _, rq := range pickRx(nic, e.Queue, l, e.Line, f+".queue") {
			if e.RPSCPUs != nil {
				s := setting.RPSCPUs(nic.Name, rq.Index, *e.RPSCPUs, v.NrCPUs, e.Reason)
				s.Old = oldOf(rq.RPSCPUs, v.mask)
				claim(e.Line, f, s)
			}
			if e.RPSFlowCnt != nil {
				s := setting.RPSFlowCnt(nic.Name, rq.Index, *e.RPSFlowCnt, e.Reason)
				s.Old = oldOf(rq.RPSFlowCnt, itoa)
				claim(e.Line, f, s)
			}
		}
	}

	for i, e := range p.TxQueues {
		f := fmt.Sprintf("tx_queues[%d]", i)
		nic := findNIC(h, e.Device, l, e.Line, f+".device")
		if nic == nil {
			continue
		}
		v.check(l, e.Line, f+".xps_cpus", e.XPSCPUs)
		if !supported(h, l, e.Line, f+".xps_cpus", setting.KindXPSCPUs, "") {
			continue
		}
		for _, tq := range pickTx(nic, e.Queue, l, e.Line, f+".queue") {
			s := setting.XPSCPUs(nic.Name, tq.Index, e.XPSCPUs, v.NrCPUs, e.Reason)
			s.Old = oldOf(tq.XPSCPUs, v.mask)
			claim(e.Line, f, s)
		}
	}

	if e := p.RPSSockFlowEntries; e != nil && supported(h, l, e.Line, "rps_sock_flow_entries", setting.KindSysctl, setting.SockFlowPath) {
		s := setting.SockFlowEntries(e.Value, e.Reason)
		s.Old = oldOf(h.RPSSockFlowEntries, itoa)
		claim(e.Line, "rps_sock_flow_entries", s)
	}

	for i, e := range p.Apps {
		f := fmt.Sprintf("apps[%d]", i)
		v.check(l, e.Line, f+".cpus", e.CPUs)
		out = append(out, setting.Change{Kind: setting.KindApp, Target: e.Selector(), Value: e.CPUs.String(), Reason: e.Reason,
			Line: e.Line, App: e.Processes()})
	}

	if e := p.Irqbalance; e != nil {
		s := setting.Change{Kind: setting.KindIrqbalance, Target: "irqbalance", Reason: e.Reason, Line: e.Line}
		state := map[bool]string{true: "running", false: "stopped"}[h.Irqbalance.Running]
		switch e.Mode {
		case IrqbalanceLeave:
			s.Value, s.Old = "leave", state
			s.Status, s.Note = setting.StatusSkipped, "irqbalance is left as it is"
		case IrqbalanceStop:
			s.Value, s.Old = "stopped", state
		case IrqbalanceBan:
			v.check(l, e.Line, "irqbalance.banned_cpus", *e.BannedCPUs)
			s.Value = "banned_cpus=" + e.BannedCPUs.String()
			s.Old = "banned_cpus=" + h.Irqbalance.BannedCPUs.String()
		}
		out = append(out, s)
	}

	for i, e := range p.Coalesce {
		f := fmt.Sprintf("coalesce[%d]", i)
		nic := findNIC(h, e.Device, l, e.Line, f+".device")
		if nic == nil {
			continue
		}
		s := setting.Change{Kind: setting.KindCoalesce, Target: nic.Name + " coalescing", Value: coalesceValue(e, nil),
			Reason: e.Reason, Line: e.Line, Device: nic.Name}
		if nic.Coalesce != nil {
			s.Old = coalesceValue(e, nic.Coalesce)
		}
		out = append(out, s)
	}

	out = append(out, resolveNAPI(p, h, v, l)...)

	if err := l.err(); err != nil {
		return nil, err
	}
	return out, nil
}

// supported refuses an entry's field that needs a kernel feature the host's
// probes found missing: the error names the file, line and field, and the
// feature with what was looked for, so nothing is written.
func supported(h *host.Host, l *errList, line int, field string, k setting.Kind, path string) bool {
	f, missing := setting.Unsupported(h, &setting.Change{Kind: k, Path: path})
	if missing {
		l.add(line, field, "%s", setting.MissingText(f))
	}
	return !missing
}

// coalesceValue formats the fields e sets, with e's values (cur nil) or the
// current ones.
func coalesceValue(e CoalesceEntry, cur *host.Coalesce) string {
	var parts []string
	num := func(name string, want *uint32, have uint32) {
		if want == nil {
			return
		}
		x := *want
		if cur != nil {
			x = have
		}
		parts = append(parts, fmt.Sprintf("%s=%d", name, x))
	}
	onoff := func(name string, want *bool, have bool) {
		if want == nil {
			return
		}
		x := *want
		if cur != nil {
			x = have
		}
		parts = append(parts, name+"="+map[bool]string{true: "on", false: "off"}[x])
	}
	c := cur
	if c == nil {
		c = &host.Coalesce{}
	}
	num("rx_usecs", e.RxUsecs, c.RxUsecs)
	num("rx_frames", e.RxFrames, c.RxFrames)
	num("tx_usecs", e.TxUsecs, c.TxUsecs)
	num("tx_frames", e.TxFrames, c.TxFrames)
	onoff("adaptive_rx", e.AdaptiveRx, c.AdaptiveRx)
	onoff("adaptive_tx", e.AdaptiveTx, c.AdaptiveTx)
	return strings.Join(parts, " ")
}

// oldOf formats a value the host model read ("" when it read none).
func oldOf[T any](v *T, format func(T) string) string {
	if v == nil {
		return ""
	}
	return format(*v)
}

// withOld sets c.Old from a value the host model read (nil: unknown).
func withOld(c setting.Change, v *uint64) setting.Change {
	if v != nil {
		c.Old = strconv.FormatUint(*v, 10)
	}
	return c
}

// resolveNAPI turns napi and busy_poll entries into changes. A host (or
// capture) without NAPI facts makes each per-instance setting a skipped
// change saying so, not an error.
func resolveNAPI(p *Plan, h *host.Host, v CPUView, l *errList) []setting.Change {
	var out []setting.Change
	add := func(e NAPIEntry, c setting.Change) {
		c.Line = e.Line
		out = append(out, c)
	}
	skip := func(e NAPIEntry, c setting.Change, note string) {
		c.Status, c.Note = setting.StatusSkipped, note
		add(e, c)
	}
	for i, e := range p.NAPI {
		f := fmt.Sprintf("napi[%d]", i)
		nic := findNIC(h, e.Device, l, e.Line, f+".device")
		if nic == nil {
			continue
		}
		if e.CPUs != nil {
			v.check(l, e.Line, f+".cpus", *e.CPUs)
		}
		ok := true
		for _, fk := range []struct {
			set   bool
			field string
			kind  setting.Kind
		}{
			{e.Threaded != nil && e.ID == nil, "threaded", setting.KindDevThreaded},
			{e.DeferHardIRQs != nil && e.ID == nil, "defer_hard_irqs", setting.KindDevDeferHardIRQs},
			{e.GROFlushTimeout != nil && e.ID == nil, "gro_flush_timeout", setting.KindDevGROFlushTimeout},
			{e.Threaded != nil && e.ID != nil, "threaded", setting.KindNAPIThreaded},
			{e.DeferHardIRQs != nil && e.ID != nil, "defer_hard_irqs", setting.KindNAPIDeferHardIRQs},
			{e.GROFlushTimeout != nil && e.ID != nil, "gro_flush_timeout", setting.KindNAPIGROFlushTimeout},
			{e.IRQSuspendTimeout != nil, "irq_suspend_timeout", setting.KindNAPIIRQSuspendTimeout},
		} {
			if fk.set && !supported(h, l, e.Line, f+"."+fk.field, fk.kind, "") {
				ok = false
			}
		}
		if !ok {
			continue
		}
		if e.ID == nil {
			// Old is the device-wide file as apply reads it ("" only
			// when the file is absent or unreadable).
			if e.Threaded != nil {
				add(e, withOld(setting.DevThreaded(nic.Name, *e.Threaded, e.Reason), nic.Threaded))
			}
			if e.DeferHardIRQs != nil {
				add(e, withOld(setting.DevDeferHardIRQs(nic.Name, *e.DeferHardIRQs, e.Reason), nic.DeferHardIRQs))
			}
			if e.GROFlushTimeout != nil {
				add(e, withOld(setting.DevGROFlushTimeout(nic.Name, *e.GROFlushTimeout, e.Reason), nic.GROFlushTimeout))
			}
			if e.CPUs != nil {
				napis := h.NAPIsOf(nic.Name)
				if len(napis) == 0 {
					skip(e, setting.Change{Kind: setting.KindThreadAffinity, Target: nic.Name + " napi threads", Device: nic.Name,
						Value: e.CPUs.String(), Reason: e.Reason}, NAPIUnsupported(h, nic.Name))
				}
				for _, n := range napis {
					out = append(out, napiThread(e, n)...)
				}
			}
			continue
		}
		id := *e.ID
		var inst *host.NAPI
		for _, n := range h.NAPIsOf(nic.Name) {
			if n.ID == id {
				inst = &n
				break
			}
		}
		why := NAPIUnsupported(h, nic.Name)
		if inst == nil && why == "" {
			var ids []string
			for _, n := range h.NAPIsOf(nic.Name) {
				ids = append(ids, strconv.FormatUint(uint64(n.ID), 10))
			}
			sort.Strings(ids)
			l.add(e.Line, f+".id", "%s has no NAPI instance %d (it has: %s; ids change when the device is reconfigured)", nic.Name, id, strings.Join(ids, ", "))
			continue
		}
		type field struct {
			kind setting.Kind
			want *uint64
			have *uint64
		}
		u64 := func(b *bool) *uint64 {
			if b == nil {
				return nil
			}
			x := uint64(0)
			if *b {
				x = 1
			}
			return &x
		}
		u32 := func(x *uint32) *uint64 {
			if x == nil {
				return nil
			}
			y := uint64(*x)
			return &y
		}
		var have host.NAPI
		if inst != nil {
			have = *inst
		}
		for _, fl := range []field{
			{setting.KindNAPIThreaded, u64(e.Threaded), u64(have.Threaded)},
			{setting.KindNAPIDeferHardIRQs, u32(e.DeferHardIRQs), u32(have.DeferHardIRQs)},
			{setting.KindNAPIGROFlushTimeout, e.GROFlushTimeout, have.GROFlushTimeout},
			{setting.KindNAPIIRQSuspendTimeout, e.IRQSuspendTimeout, have.IRQSuspendTimeout},
		} {
			if fl.want == nil {
				continue
			}
			c := setting.NAPISetting(fl.kind, nic.Name, id, *fl.want, e.Reason)
			switch {
			case inst == nil:
				skip(e, c, why)
			case fl.have == nil:
				skip(e, c, fmt.Sprintf("unsupported: this kernel does not report %s per NAPI instance (napi-set: 6.13, threaded: 6.17)", c.Name()))
			default:
				c.Old = strconv.FormatUint(*fl.have, 10)
				add(e, c)
			}
		}
		if e.CPUs != nil {
			if inst == nil {
				skip(e, setting.Change{Kind: setting.KindThreadAffinity, Target: fmt.Sprintf("%s napi %d thread", nic.Name, id), Device: nic.Name,
					Value: e.CPUs.String(), Reason: e.Reason}, why)
				continue
			}
			out = append(out, napiThread(e, *inst)...)
		}
	}
	if e := p.BusyPoll; e != nil {
		if e.BusyRead != nil && supported(h, l, e.Line, "busy_poll.busy_read", setting.KindSysctl, setting.BusyReadPath) {
			c := setting.BusyRead(*e.BusyRead, e.Reason)
			c.Line, c.Old = e.Line, oldOf(h.BusyRead, itoa)
			out = append(out, c)
		}
		if e.BusyPoll != nil && supported(h, l, e.Line, "busy_poll.busy_poll", setting.KindSysctl, setting.BusyPollPath) {
			c := setting.BusyPoll(*e.BusyPoll, e.Reason)
			c.Line, c.Old = e.Line, oldOf(h.BusyPoll, itoa)
			out = append(out, c)
		}
	}
	return out
}

// napiThread places the kernel thread of n, or says why it cannot.
func napiThread(e NAPIEntry, n host.NAPI) []setting.Change {
	c, err := setting.NAPIThread(n, *e.CPUs, e.Reason)
	c.Line = e.Line
	if err != nil {
		return []setting.Change{{Kind: setting.KindThreadAffinity, Target: fmt.Sprintf("%s napi %d thread", n.Device, n.ID), Device: n.Device,
			Value: e.CPUs.String(), Reason: e.Reason, Line: e.Line, Status: setting.StatusSkipped,
			Note: err.Error() + ": its thread exists once threaded is on; apply the plan again to place it"}}
	}
	if n.CPUs != nil {
		c.Old = n.CPUs.String()
	}
	return []setting.Change{c}
}
