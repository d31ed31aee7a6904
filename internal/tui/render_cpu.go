package tui

import (
	"fmt"
	"math"
	"sort"
	"strings"
)

func cpuLine(l *line, c *CPU, label string, barW int, rates bool) *line {
	l.put(fmt.Sprintf("%4s %5.1f %5.1f ", label, c.User+c.Nice, c.System), StyleNormal)
	irqSt := StyleNormal
	if c.IRQ+c.SoftIRQ >= 50 {
		irqSt = StyleWarn
	}
	l.put(fmt.Sprintf("%5.1f %5.1f ", c.IRQ, c.SoftIRQ), irqSt)
	idleSt := StyleNormal
	if c.Idle < 5 {
		idleSt = StyleWarn
	}
	l.put(fmt.Sprintf("%5.1f ", c.Idle), idleSt)
	if barW > 0 {
		l.put("[", StyleDim)
		bar(l, c, barW)
		l.put("] ", StyleDim)
	}
	if rates {
		dropSt := StyleNormal
		if c.Dropped > 0 || c.Squeezed > 0 {
			dropSt = StyleWarn
		}
		l.put(fmt.Sprintf("%7s%7s%7s", human(c.NetRx), human(c.NetTx), human(c.Block)), StyleNormal)
		l.put(fmt.Sprintf("%6s%6s", human(c.Dropped), human(c.Squeezed)), dropSt)
	}
	return l
}

// bar draws the stacked usr/sys/irq/soft/other bar, width n, idle as blanks.
// Segments are rounded by the largest-remainder method so they add up to the
// busy share exactly.
func bar(l *line, c *CPU, n int) {
	segs := []struct {
		v  float64
		ch rune
		st Style
	}{
		{c.User + c.Nice, 'u', StyleUser},
		{c.System, 's', StyleSystem},
		{c.IRQ, 'i', StyleIRQ},
		{c.SoftIRQ, 'S', StyleSoft},
		{c.IOWait + c.Steal, 'o', StyleOther},
	}
	var busy float64
	for _, s := range segs {
		busy += math.Max(s.v, 0)
	}
	total := int(math.Round(math.Min(busy, 100) / 100 * float64(n)))
	cells := make([]int, len(segs))
	type rem struct {
		i int
		r float64
	}
	var rems []rem
	used := 0
	for i, s := range segs {
		exact := math.Max(s.v, 0) / 100 * float64(n)
		cells[i] = int(exact)
		used += cells[i]
		rems = append(rems, rem{i, exact - float64(cells[i])})
	}
	sort.SliceStable(rems, func(a, b int) bool { return rems[a].r > rems[b].r })
	for k := 0; used < total && k < len(rems); k++ {
		cells[rems[k].i]++
		used++
	}
	for used > total { // rounding overshoot: trim the largest
		big := 0
		for i := range cells {
			if cells[i] > cells[big] {
				big = i
			}
		}
		cells[big]--
		used--
	}
	for i, s := range segs {
		l.fill(cells[i], s.ch, s.st)
	}
	l.fill(n-used, ' ', StyleIdle)
}

// legend is the bar header, "u s i S" spread over the bar width.
func legend(n int) string {
	s := "usr sys irq Soft"
	if n < len(s) {
		s = "u s i S"
	}
	if n < len(s) {
		return strings.Repeat(" ", n)
	}
	return s + strings.Repeat(" ", n-len(s))
}

func sortCPUs(in []CPU, s Sort) []CPU {
	out := append([]CPU(nil), in...)
	key := func(c *CPU) float64 {
		switch s {
		case SortIRQTime:
			return c.IRQ + c.SoftIRQ
		case SortBusy:
			return c.Busy()
		case SortNetRx:
			return c.NetRx
		}
		return 0
	}
	sort.SliceStable(out, func(i, j int) bool {
		if s != SortID {
			ki, kj := key(&out[i]), key(&out[j])
			if ki != kj {
				return ki > kj
			}
		}
		return out[i].ID < out[j].ID
	})
	return out
}

func average(cs []CPU) CPU {
	var a CPU
	if len(cs) == 0 {
		return a
	}
	for _, c := range cs {
		a.User += c.User
		a.Nice += c.Nice
		a.System += c.System
		a.IRQ += c.IRQ
		a.SoftIRQ += c.SoftIRQ
		a.Idle += c.Idle
	}
	n := float64(len(cs))
	a.User, a.Nice, a.System, a.IRQ, a.SoftIRQ, a.Idle = a.User/n, a.Nice/n, a.System/n, a.IRQ/n, a.SoftIRQ/n, a.Idle/n
	return a
}

func maxIRQTime(cs []CPU) float64 {
	var m float64
	for _, c := range cs {
		m = math.Max(m, c.IRQ+c.SoftIRQ)
	}
	return m
}
