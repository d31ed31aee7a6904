package hostgen

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// writeInterrupts writes /proc/interrupts in the format of
// kernel/irq/proc.c and arch/x86/kernel/irq.c: only online CPUs have columns.
func (L *Layout) writeInterrupts(w *writer) {
	online := L.Online.CPUs()
	prec := 3
	for n := L.IRQs[len(L.IRQs)-1].Number + 1; n >= 1000; n /= 10 {
		prec++
	}
	var b strings.Builder
	b.Grow((len(L.IRQs) + 20) * (len(online)*11 + 60))
	b.WriteString(strings.Repeat(" ", prec+8))
	for _, c := range online {
		fmt.Fprintf(&b, "CPU%-8d", c)
	}
	b.WriteByte('\n')
	for _, q := range L.IRQs {
		fmt.Fprintf(&b, "%*d:", prec, q.Number)
		for _, c := range online {
			fmt.Fprintf(&b, " %10d", L.at(q.Base[c], q.Rate[c]))
		}
		fmt.Fprintf(&b, " %8s %*d-%-8s  %s\n", q.Chip, prec, q.HWIRQ, q.Trigger, strings.Join(q.Actions, ", "))
	}
	for _, row := range summaryRows {
		fmt.Fprintf(&b, "%*s:", prec, row.name)
		for _, c := range online {
			fmt.Fprintf(&b, " %10d", L.at(L.SummaryBase[row.name][c], L.SummaryRate[row.name][c]))
		}
		fmt.Fprintf(&b, "   %s\n", row.desc)
	}
	fmt.Fprintf(&b, "%*s: %10d\n", prec, "ERR", 0)
	fmt.Fprintf(&b, "%*s: %10d\n", prec, "MIS", 0)
	w.file("proc/interrupts", b.String())
}

func (L *Layout) ticks(c int) [10]uint64 {
	var t [10]uint64
	for i := range t {
		t[i] = L.at(L.TicksBase[c][i], L.TicksRate[c][i])
	}
	return t
}

func (L *Layout) writeStat(w *writer) {
	var b strings.Builder
	var total [10]uint64
	for _, c := range L.Online.CPUs() {
		t := L.ticks(c)
		for i := range t {
			total[i] += t[i]
		}
	}
	line := func(name string, t [10]uint64) {
		b.WriteString(name)
		for _, v := range t {
			fmt.Fprintf(&b, " %d", v)
		}
		b.WriteByte('\n')
	}
	line("cpu ", total)
	for _, c := range L.Online.CPUs() {
		line("cpu"+strconv.Itoa(c), L.ticks(c))
	}
	maxIRQ := L.IRQs[len(L.IRQs)-1].Number
	perIRQ := make([]uint64, maxIRQ+1)
	var sum uint64
	for _, q := range L.IRQs {
		for c := range q.Base {
			v := L.at(q.Base[c], q.Rate[c])
			perIRQ[q.Number] += v
			sum += v
		}
	}
	fmt.Fprintf(&b, "intr %d", sum)
	for _, v := range perIRQ {
		fmt.Fprintf(&b, " %d", v)
	}
	b.WriteByte('\n')
	el := uint64(L.Spec.Counts.Elapsed / time.Second)
	fmt.Fprintf(&b, "ctxt %d\nbtime %d\nprocesses %d\nprocs_running 2\nprocs_blocked 0\n",
		1000000*uptime+50000*el, 1700000000, 200000+10*el)
	var soft []uint64
	var softSum uint64
	for _, n := range softirqNames {
		var t uint64
		for c := range L.SoftirqBase[n] {
			t += L.at(L.SoftirqBase[n][c], L.SoftirqRate[n][c])
		}
		soft = append(soft, t)
		softSum += t
	}
	fmt.Fprintf(&b, "softirq %d", softSum)
	for _, v := range soft {
		fmt.Fprintf(&b, " %d", v)
	}
	b.WriteByte('\n')
	w.file("proc/stat", b.String())
}

// writeSoftirqs: /proc/softirqs has a column for every possible CPU.
func (L *Layout) writeSoftirqs(w *writer) {
	var b strings.Builder
	b.WriteString(strings.Repeat(" ", 20))
	cpus := L.Possible.CPUs()
	for _, c := range cpus {
		fmt.Fprintf(&b, "CPU%-8d", c)
	}
	b.WriteByte('\n')
	for _, n := range softirqNames {
		fmt.Fprintf(&b, "%12s:", n)
		for _, c := range cpus {
			fmt.Fprintf(&b, " %10d", L.at(L.SoftirqBase[n][c], L.SoftirqRate[n][c]))
		}
		b.WriteByte('\n')
	}
	w.file("proc/softirqs", b.String())
}

// writeSoftnet: one row per online CPU, hex, counters truncated to 32 bits as
// the kernel prints them, the CPU index in column 13.
func (L *Layout) writeSoftnet(w *writer) {
	var b strings.Builder
	for _, c := range L.Online.CPUs() {
		processed := uint32(L.at(L.SoftnetBase[c], L.SoftnetRate[c]))
		squeeze := processed / 100000
		fmt.Fprintf(&b, "%08x %08x %08x %08x %08x %08x %08x %08x %08x %08x %08x %08x %08x",
			processed, 0, squeeze, 0, 0, 0, 0, 0, 0, 0, 0, 0, c)
		if L.Spec.SoftnetColumns >= 15 {
			fmt.Fprintf(&b, " %08x %08x", 0, 0)
		}
		b.WriteByte('\n')
	}
	w.file("proc/net/softnet_stat", b.String())
}
