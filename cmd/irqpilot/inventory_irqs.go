// The "Other IRQs" section of the text inventory: IRQs no device section
// listed, by class, with large groups of one kind summarised on one line.

package main

import (
	"fmt"
	"sort"
	"strings"

	"github.com/irqpilot/irqpilot/internal/cpuset"
	"github.com/irqpilot/irqpilot/internal/host"
)

// irqLine describes one IRQ on one line.
func (t *inventoryText) irqLine(q *host.IRQ) string {
	name := strings.Join(q.Actions, ",")
	if name == "" {
		name = "(no handler)"
	}
	s := fmt.Sprintf("irq %d %s  allowed %s  lands on %s  count %s", q.Number, name, t.optSet(q.Affinity), t.landsStr(q), countStr(q))
	if q.Managed == host.ManagedYes {
		s += "  managed"
	}
	return s
}

// landsStr is where q is delivered, and when that is outside its allowed
// CPUs, that the move written there waits for its next interrupt.
func (t *inventoryText) landsStr(q *host.IRQ) string {
	s := t.optSet(q.EffectiveAffinity)
	if q.MovePending() {
		s += " (" + host.MovePendingNote + ")"
	}
	return s
}

// countStr is an IRQ's total and where most of it landed: "3225 (cpu1 100%)".
func countStr(q *host.IRQ) string {
	if len(q.Counts) == 0 {
		return "?"
	}
	total := q.Total()
	if total == 0 {
		return "0"
	}
	best, bestN := -1, uint64(0)
	for c, n := range q.Counts {
		if n > bestN || (n == bestN && c < best) {
			best, bestN = c, n
		}
	}
	return fmt.Sprintf("%s (cpu%d %d%%)", humanCount(total), best, int(float64(bestN)*100/float64(total)+0.5))
}

// groupName is how other IRQs are grouped: their device, else their first
// action without a trailing number ("irdma-ceq12" → "irdma-ceq"), with the
// chip so that unrelated short names ("i8042", "i915") stay apart.
func groupName(q *host.IRQ) string {
	if q.Device != "" {
		return q.Device
	}
	if len(q.Actions) > 0 {
		return strings.TrimRight(q.Actions[0], "0123456789.-_") + "\x00" + q.Chip
	}
	return "(no handler)\x00" + q.Chip
}

// maxListed is the largest group of other IRQs listed one per line.
const maxListed = 4

func (t *inventoryText) writeOtherIRQs() {
	w, h, shown := t.w, t.h, t.shown
	byClass := map[host.Class]map[string][]*host.IRQ{}
	n := 0
	for i := range h.IRQs {
		q := &h.IRQs[i]
		if shown[q.Number] {
			continue
		}
		n++
		c := q.Class
		if c == "" {
			c = "unclassified"
		}
		if byClass[c] == nil {
			byClass[c] = map[string][]*host.IRQ{}
		}
		g := groupName(q)
		byClass[c][g] = append(byClass[c][g], q)
	}
	fmt.Fprintf(w, "Other IRQs: %d of %d\n", n, len(h.IRQs))
	classes := make([]string, 0, len(byClass))
	for c := range byClass {
		classes = append(classes, string(c))
	}
	sort.Strings(classes)
	type line struct {
		first int
		text  string
	}
	for _, c := range classes {
		var lines []line
		for _, qs := range byClass[host.Class(c)] {
			if len(qs) <= maxListed {
				for _, q := range qs {
					lines = append(lines, line{q.Number, t.irqLine(q)})
				}
				continue
			}
			lines = append(lines, line{qs[0].Number, t.groupLine(qs)})
		}
		sort.Slice(lines, func(i, j int) bool { return lines[i].first < lines[j].first })
		fmt.Fprintf(w, "  %s\n", c)
		for _, l := range lines {
			fmt.Fprintf(w, "    %s\n", l.text)
		}
	}
	fmt.Fprintln(w)
}

// groupLine summarises many IRQs of one kind on one line.
func (t *inventoryText) groupLine(qs []*host.IRQ) string {
	name := qs[0].Device
	if name == "" {
		first, last := strings.Join(qs[0].Actions, ","), strings.Join(qs[len(qs)-1].Actions, ",")
		name = first + " … " + last
	}
	var nums []int
	var allowed, lands cpuset.Set
	unknownAllowed, unknownLands, managed, pending := false, false, 0, 0
	var total uint64
	perCPU := map[int]uint64{}
	for _, q := range qs {
		nums = append(nums, q.Number)
		if q.Affinity != nil {
			allowed = allowed.Union(*q.Affinity)
		} else {
			unknownAllowed = true
		}
		if q.EffectiveAffinity != nil {
			lands = lands.Union(*q.EffectiveAffinity)
		} else {
			unknownLands = true
		}
		if q.Managed == host.ManagedYes {
			managed++
		}
		if q.MovePending() {
			pending++
		}
		for c, v := range q.Counts {
			perCPU[c] += v
			total += v
		}
	}
	s := fmt.Sprintf("%d IRQs %s (%s)  allowed %s  lands on %s  count %s", len(qs), cpuset.Of(nums...), name,
		t.unionStr(allowed, unknownAllowed), t.unionStr(lands, unknownLands), humanCount(total))
	if total > 0 {
		best, bestN := -1, uint64(0)
		for c, v := range perCPU {
			if v > bestN || (v == bestN && c < best) {
				best, bestN = c, v
			}
		}
		s += fmt.Sprintf(" (cpu%d %d%%)", best, int(float64(bestN)*100/float64(total)+0.5))
	}
	if managed > 0 {
		s += fmt.Sprintf("  %d managed", managed)
	}
	switch {
	case pending == 1:
		s += "  1 " + host.MovePendingNote
	case pending > 1:
		s += fmt.Sprintf("  %d moves pending until their next interrupt", pending)
	}
	return s
}

func (t *inventoryText) unionStr(s cpuset.Set, unknown bool) string {
	switch {
	case unknown && s.IsEmpty():
		return "?"
	case unknown:
		return s.String() + " (some ?)"
	}
	return t.setStr(s)
}

// writeByName lists the IRQs whose class and device come from their action
// names alone (host.IRQ.ByName): nothing in /sys ties them to the device, as
// on a bare /proc/interrupts. Nothing is printed when there are none.
func (t *inventoryText) writeByName() {
	w, h := t.w, t.h
	byDev := map[string][]int{}
	var keys []string
	n := 0
	for i := range h.IRQs {
		q := &h.IRQs[i]
		if !q.ByName {
			continue
		}
		n++
		k := string(q.Class)
		if q.Device != "" {
			k = q.Device + " (" + k + ")"
		}
		if _, ok := byDev[k]; !ok {
			keys = append(keys, k)
		}
		byDev[k] = append(byDev[k], q.Number)
	}
	if n == 0 {
		return
	}
	fmt.Fprintf(w, "Classed by name alone (nothing in /sys ties them to a device): %d of %d IRQs\n", n, len(h.IRQs))
	sort.Strings(keys)
	items := make([]string, 0, len(keys))
	for _, k := range keys {
		items = append(items, fmt.Sprintf("%s irq %s", k, cpuset.Of(byDev[k]...)))
	}
	wrap(w, "  ", items)
	fmt.Fprintln(w)
}
