// The NIC and block device sections of the text inventory: one table row
// per queue with its IRQ's placement and the queue's steering.

package main

import (
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/irqpilot/irqpilot/internal/host"
)

// row is one table row: a label ("rx", "tx", "rx/tx", "hctx"), a queue index
// and the other cells. Consecutive rows without an IRQ and with equal cells
// are merged into one ("rx 0-63"), which keeps virtual devices with many
// queues to one line.
type row struct {
	label string
	index int
	cells []string
}

func mergeRows(rows []row) [][]string {
	var out [][]string
	for i := 0; i < len(rows); {
		j := i + 1
		if rows[i].cells[0] == "-" {
			for j < len(rows) && rows[j].label == rows[i].label && rows[j].index == rows[j-1].index+1 &&
				strings.Join(rows[j].cells, "\x00") == strings.Join(rows[i].cells, "\x00") {
				j++
			}
		}
		idx := strconv.Itoa(rows[i].index)
		if j-i > 1 {
			idx += "-" + strconv.Itoa(rows[j-1].index)
		}
		out = append(out, append([]string{rows[i].label + " " + idx}, rows[i].cells...))
		i = j
	}
	return out
}

func table(w io.Writer, indent string, header []string, rows [][]string) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, indent+strings.Join(header, "\t"))
	for _, r := range rows {
		fmt.Fprintln(tw, indent+strings.Join(r, "\t"))
	}
	tw.Flush()
}

// irqCells are the placement columns of an IRQ: number, allowed, lands, count.
func (t *inventoryText) irqCells(n *int) []string {
	h := t.h
	if n == nil {
		return []string{"-", "", "", ""}
	}
	q := h.IRQ(*n)
	if q == nil {
		return []string{strconv.Itoa(*n), "?", "?", "?"}
	}
	num := strconv.Itoa(q.Number)
	if q.Managed == host.ManagedYes {
		num += " (managed)"
	}
	return []string{num, t.optSet(q.Affinity), t.landsStr(q), countStr(q)}
}

func (t *inventoryText) writeNICs() {
	w, h := t.w, t.h
	fmt.Fprintf(w, "NICs: %d\n", len(h.NICs))
	for i := range h.NICs {
		n := &h.NICs[i]
		var b strings.Builder
		fmt.Fprintf(&b, "  %s  driver %s", n.Name, orUnknown(n.Driver))
		if n.Virtual {
			b.WriteString("  virtual")
			if n.Kind != "" {
				b.WriteString(" (" + n.Kind + ")")
			}
		}
		if n.BusAddr != "" {
			b.WriteString("  bus " + n.BusAddr)
		}
		if n.Lower != "" {
			b.WriteString("  on " + n.Lower)
		}
		if n.Node >= 0 {
			fmt.Fprintf(&b, "  node %d", n.Node)
		}
		if !n.LocalCPUs.IsEmpty() {
			b.WriteString("  local cpus " + n.LocalCPUs.String())
		}
		fmt.Fprintf(&b, "  %d rx / %d tx queues", len(n.RxQueues), len(n.TxQueues))
		fmt.Fprintln(w, b.String())
		if c := n.Channels; c != nil {
			fmt.Fprintf(w, "    channels: %s\n", channelsStr(c))
		}
		if c := n.Coalesce; c != nil {
			fmt.Fprintf(w, "    coalesce: rx-usecs %d rx-frames %d tx-usecs %d tx-frames %d adaptive-rx %s adaptive-tx %s\n",
				c.RxUsecs, c.RxFrames, c.TxUsecs, c.TxFrames, onOff(c.AdaptiveRx), onOff(c.AdaptiveTx))
		}
		t.writeNAPI(n.Name)
		var rows []row
		queueIRQs := map[int]bool{}
		nq := len(n.RxQueues)
		if len(n.TxQueues) > nq {
			nq = len(n.TxQueues)
		}
		for qi := 0; qi < nq; qi++ {
			var rx *host.RxQueue
			var tx *host.TxQueue
			if qi < len(n.RxQueues) {
				rx = &n.RxQueues[qi]
			}
			if qi < len(n.TxQueues) {
				tx = &n.TxQueues[qi]
			}
			if rx != nil && tx != nil && rx.IRQ != nil && tx.IRQ != nil && *rx.IRQ == *tx.IRQ {
				queueIRQs[*rx.IRQ] = true
				rows = append(rows, row{"rx/tx", qi, append(t.irqCells(rx.IRQ), steerStr(rx.RPSCPUs), optInt(rx.RPSFlowCnt), steerStr(tx.XPSCPUs))})
				continue
			}
			if rx != nil {
				if rx.IRQ != nil {
					queueIRQs[*rx.IRQ] = true
				}
				rows = append(rows, row{"rx", rx.Index, append(t.irqCells(rx.IRQ), steerStr(rx.RPSCPUs), optInt(rx.RPSFlowCnt), "")})
			}
			if tx != nil {
				if tx.IRQ != nil {
					queueIRQs[*tx.IRQ] = true
				}
				rows = append(rows, row{"tx", tx.Index, append(t.irqCells(tx.IRQ), "", "", steerStr(tx.XPSCPUs))})
			}
		}
		// rx rows first, then tx, so that merging sees consecutive indices
		sort.SliceStable(rows, func(i, j int) bool { return labelOrder(rows[i].label) < labelOrder(rows[j].label) })
		if len(rows) > 0 {
			table(w, "    ", []string{"queue", "irq", "allowed", "lands on", "count", "rps", "flows", "xps"}, mergeRows(rows))
		}
		t.printOtherIRQs(n.IRQs, queueIRQs)
	}
	fmt.Fprintln(w)
}

func labelOrder(l string) int {
	switch l {
	case "rx/tx":
		return 0
	case "rx":
		return 1
	}
	return 2
}

func channelsStr(c *host.Channels) string {
	var parts []string
	add := func(name string, cur, max uint32) {
		if cur != 0 || max != 0 {
			parts = append(parts, fmt.Sprintf("%s %d (max %d)", name, cur, max))
		}
	}
	add("combined", c.Combined, c.MaxCombined)
	add("rx", c.Rx, c.MaxRx)
	add("tx", c.Tx, c.MaxTx)
	add("other", c.Other, c.MaxOther)
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

func (t *inventoryText) writeBlock() {
	w, h := t.w, t.h
	fmt.Fprintf(w, "Block devices with hardware queues: %d\n", len(h.Block))
	for i := range h.Block {
		d := &h.Block[i]
		var b strings.Builder
		fmt.Fprintf(&b, "  %s  driver %s", d.Name, orUnknown(d.Driver))
		if d.BusAddr != "" {
			b.WriteString("  bus " + d.BusAddr)
		}
		if d.Node >= 0 {
			fmt.Fprintf(&b, "  node %d", d.Node)
		}
		fmt.Fprintf(&b, "  %d hardware queues", len(d.Queues))
		fmt.Fprintln(w, b.String())
		var rows []row
		queueIRQs := map[int]bool{}
		for _, q := range d.Queues {
			if q.IRQ != nil {
				queueIRQs[*q.IRQ] = true
			}
			rows = append(rows, row{"hctx", q.Index, append(t.irqCells(q.IRQ), t.setStr(q.CPUs))})
		}
		if len(rows) > 0 {
			table(w, "    ", []string{"queue", "irq", "allowed", "lands on", "count", "submitting cpus"}, mergeRows(rows))
		}
		t.printOtherIRQs(d.IRQs, queueIRQs)
	}
	fmt.Fprintln(w)
}

// printOtherIRQs lists a device's IRQs that serve no queue (config, misc
// vectors) and marks all of its IRQs as shown.
func (t *inventoryText) printOtherIRQs(irqs []int, queueIRQs map[int]bool) {
	w, h, shown := t.w, t.h, t.shown
	for _, irq := range irqs {
		shown[irq] = true
		if !queueIRQs[irq] {
			if q := h.IRQ(irq); q != nil {
				fmt.Fprintf(w, "    %s\n", t.irqLine(q))
			}
		}
	}
	for q := range queueIRQs {
		shown[q] = true
	}
}
