package plan

import (
	"fmt"
	"strings"

	"github.com/irqpilot/irqpilot/internal/host"
	"github.com/irqpilot/irqpilot/internal/setting"
)

// DropUnsupported takes out of p every field that needs a kernel feature
// h's probes found missing (an entry left with nothing to set goes too),
// and returns one line per missing feature naming it and what was looked
// for. A policy's plan is cut this way before it is shown, so a plan made
// on a machine always applies there; a plan written by hand is refused by
// Resolve instead.
func DropUnsupported(p *Plan, h *host.Host) []string {
	var order []string
	fields := map[string][]string{}
	miss := func(k setting.Kind, path, field string) bool {
		f, missing := setting.Unsupported(h, &setting.Change{Kind: k, Path: path})
		if missing {
			line := setting.MissingText(f)
			if _, ok := fields[line]; !ok {
				order = append(order, line)
			}
			fields[line] = append(fields[line], field)
		}
		return missing
	}

	irqs := p.IRQs[:0]
	for i, e := range p.IRQs {
		if !miss(setting.KindIRQAffinity, "", fmt.Sprintf("irqs[%d]", i)) {
			irqs = append(irqs, e)
		}
	}
	p.IRQs = irqs

	rx := p.RxQueues[:0]
	for i, e := range p.RxQueues {
		f := fmt.Sprintf("rx_queues[%d]", i)
		if e.RPSCPUs != nil && miss(setting.KindRPSCPUs, "", f+".rps_cpus") {
			e.RPSCPUs = nil
		}
		if e.RPSFlowCnt != nil && miss(setting.KindRPSFlowCnt, "", f+".rps_flow_cnt") {
			e.RPSFlowCnt = nil
		}
		if e.RPSCPUs != nil || e.RPSFlowCnt != nil {
			rx = append(rx, e)
		}
	}
	p.RxQueues = rx

	tx := p.TxQueues[:0]
	for i, e := range p.TxQueues {
		if !miss(setting.KindXPSCPUs, "", fmt.Sprintf("tx_queues[%d].xps_cpus", i)) {
			tx = append(tx, e)
		}
	}
	p.TxQueues = tx

	if p.RPSSockFlowEntries != nil && miss(setting.KindSysctl, setting.SockFlowPath, "rps_sock_flow_entries") {
		p.RPSSockFlowEntries = nil
	}

	napi := p.NAPI[:0]
	for i, e := range p.NAPI {
		f := fmt.Sprintf("napi[%d]", i)
		dev := e.ID == nil
		pick := func(devKind, napiKind setting.Kind) setting.Kind {
			if dev {
				return devKind
			}
			return napiKind
		}
		if e.Threaded != nil && miss(pick(setting.KindDevThreaded, setting.KindNAPIThreaded), "", f+".threaded") {
			e.Threaded = nil
		}
		if e.DeferHardIRQs != nil && miss(pick(setting.KindDevDeferHardIRQs, setting.KindNAPIDeferHardIRQs), "", f+".defer_hard_irqs") {
			e.DeferHardIRQs = nil
		}
		if e.GROFlushTimeout != nil && miss(pick(setting.KindDevGROFlushTimeout, setting.KindNAPIGROFlushTimeout), "", f+".gro_flush_timeout") {
			e.GROFlushTimeout = nil
		}
		if e.IRQSuspendTimeout != nil && miss(setting.KindNAPIIRQSuspendTimeout, "", f+".irq_suspend_timeout") {
			e.IRQSuspendTimeout = nil
		}
		if e.Threaded != nil || e.DeferHardIRQs != nil || e.GROFlushTimeout != nil || e.IRQSuspendTimeout != nil || e.CPUs != nil {
			napi = append(napi, e)
		}
	}
	p.NAPI = napi

	if e := p.BusyPoll; e != nil {
		if e.BusyRead != nil && miss(setting.KindSysctl, setting.BusyReadPath, "busy_poll.busy_read") {
			e.BusyRead = nil
		}
		if e.BusyPoll != nil && miss(setting.KindSysctl, setting.BusyPollPath, "busy_poll.busy_poll") {
			e.BusyPoll = nil
		}
		if e.BusyRead == nil && e.BusyPoll == nil {
			p.BusyPoll = nil
		}
	}

	var out []string
	for _, line := range order {
		out = append(out, fmt.Sprintf("left out %s: %s", strings.Join(fields[line], ", "), line))
	}
	return out
}
