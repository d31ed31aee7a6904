package agent

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"

	"github.com/irqpilot/irqpilot/internal/apply"
	"github.com/irqpilot/irqpilot/internal/host"
	"github.com/irqpilot/irqpilot/internal/kernel"
	"github.com/irqpilot/irqpilot/internal/plan"
	"github.com/irqpilot/irqpilot/internal/setting"
)

// unresolved is a plan entry that does not resolve on the host as it is
// now; the rest of the plan is enforced without it.
type unresolved struct {
	// Waiting says what it waits for ("rx_queues entry at plan line 7 to
	// resolve: va0 has no rx queue 3 (it has 2 rx queues)").
	Waiting string
	// Shape: it names a queue, IRQ or NAPI instance the device does not
	// have now — the device's shape, which changes when it is re-created
	// or reconfigured. Anything else (a duplicate, a block device named as
	// a NIC) is a mistake in the plan.
	Shape bool
	Err   *plan.Error
}

// planField is a resolve error's field: a section with an entry index
// ("rx_queues[1].queue") or a single-entry section ("irqbalance").
var planField = regexp.MustCompile(`^([a-z_]+)(?:\[([0-9]+)\])?(?:\.([a-z_]+))?`)

// maxResolveRounds bounds the retries of resolveEach (each drops every
// entry the previous round named).
const maxResolveRounds = 8

// resolveEach resolves the plan entry by entry: an entry that does not
// resolve (a queue the device does not have since it was re-created with
// fewer) is left out and returned, and every other entry is resolved and
// enforced. err is an error not about one entry (the plan as a whole).
func resolveEach(fs *kernel.FS, h *host.Host, p *plan.Plan) (changes, skipped []setting.Change, waiting []string, bad []unresolved, err error) {
	cp := p.Clone()
	for _, d := range plan.DropMissingDevices(cp, h) {
		waiting = append(waiting, "device "+d)
	}
	waiting = append(waiting, dropOffline(cp, h)...)
	for round := 0; ; round++ {
		changes, skipped, err = apply.Changes(setting.Env{FS: fs}, h, cp)
		var errs plan.Errors
		if err == nil || !errors.As(err, &errs) || round == maxResolveRounds {
			return changes, skipped, waiting, bad, err
		}
		drop := map[string][]int{}
		for _, e := range errs {
			m := planField.FindStringSubmatch(e.Field)
			if m == nil || !entrySection(cp, m[1], m[2] != "") {
				return nil, nil, waiting, bad, err // not about one entry
			}
			if m[2] != "" {
				i, _ := strconv.Atoi(m[2])
				if slices.Contains(drop[m[1]], i) {
					continue // another field of the same entry
				}
				drop[m[1]] = append(drop[m[1]], i)
			} else if _, ok := drop[m[1]]; ok {
				continue
			} else {
				drop[m[1]] = nil
			}
			u := unresolved{Err: e, Shape: m[3] == "queue" || m[3] == "irq" || m[3] == "action" || m[3] == "id"}
			// The entry's own line: indices are the clone's, after entries
			// were left out, so the error's line lookup may be another's.
			if line := entryLine(cp, m[1], m[2]); line > 0 {
				u.Waiting = fmt.Sprintf("%s entry at plan line %d to resolve: %s", m[1], line, e.Msg)
			} else {
				u.Waiting = fmt.Sprintf("%s entry to resolve: %s", m[1], e.Msg)
			}
			bad = append(bad, u)
			waiting = append(waiting, u.Waiting)
		}
		dropEntries(cp, drop)
	}
}

// entrySection reports whether section names entries of a plan (indexed
// when the field had an index) that dropEntries can leave out.
func entrySection(p *plan.Plan, section string, indexed bool) bool {
	switch section {
	case "irqs", "rx_queues", "tx_queues", "apps", "coalesce", "napi":
		return indexed
	case "irqbalance", "rps_sock_flow_entries", "busy_poll":
		return !indexed
	}
	return false
}

// entryLine is the plan line of an entry by section and index ("" for a
// single-entry section), 0 when unknown.
func entryLine(p *plan.Plan, section, index string) int {
	i, _ := strconv.Atoi(index)
	at := func(n int, line func(int) int) int {
		if i < 0 || i >= n {
			return 0
		}
		return line(i)
	}
	switch section {
	case "irqs":
		return at(len(p.IRQs), func(i int) int { return p.IRQs[i].Line })
	case "rx_queues":
		return at(len(p.RxQueues), func(i int) int { return p.RxQueues[i].Line })
	case "tx_queues":
		return at(len(p.TxQueues), func(i int) int { return p.TxQueues[i].Line })
	case "apps":
		return at(len(p.Apps), func(i int) int { return p.Apps[i].Line })
	case "coalesce":
		return at(len(p.Coalesce), func(i int) int { return p.Coalesce[i].Line })
	case "napi":
		return at(len(p.NAPI), func(i int) int { return p.NAPI[i].Line })
	case "irqbalance":
		if p.Irqbalance != nil {
			return p.Irqbalance.Line
		}
	case "rps_sock_flow_entries":
		if p.RPSSockFlowEntries != nil {
			return p.RPSSockFlowEntries.Line
		}
	case "busy_poll":
		if p.BusyPoll != nil {
			return p.BusyPoll.Line
		}
	}
	return 0
}

// dropEntries removes entries by section and index (indices of p as it
// is); a single-entry section named with no index is removed whole.
func dropEntries(p *plan.Plan, drop map[string][]int) {
	del := func(section string) func(i int) bool {
		return func(i int) bool { return slices.Contains(drop[section], i) }
	}
	p.IRQs = deleteIndexed(p.IRQs, del("irqs"))
	p.RxQueues = deleteIndexed(p.RxQueues, del("rx_queues"))
	p.TxQueues = deleteIndexed(p.TxQueues, del("tx_queues"))
	p.Apps = deleteIndexed(p.Apps, del("apps"))
	p.Coalesce = deleteIndexed(p.Coalesce, del("coalesce"))
	p.NAPI = deleteIndexed(p.NAPI, del("napi"))
	if _, ok := drop["irqbalance"]; ok {
		p.Irqbalance = nil
	}
	if _, ok := drop["rps_sock_flow_entries"]; ok {
		p.RPSSockFlowEntries = nil
	}
	if _, ok := drop["busy_poll"]; ok {
		p.BusyPoll = nil
	}
}

func deleteIndexed[T any](s []T, drop func(int) bool) []T {
	out := s[:0:0]
	for i, v := range s {
		if !drop(i) {
			out = append(out, v)
		}
	}
	return out
}
