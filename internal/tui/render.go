package tui

import (
	"fmt"
	"strconv"
	"strings"
)

// Style is the role of a cell; the terminal front end maps it to colours.
type Style uint8

// Cell roles.
const (
	StyleNormal Style = iota
	StyleTitle
	StyleHeader
	StyleUser
	StyleSystem
	StyleIRQ
	StyleSoft
	StyleOther // iowait + steal
	StyleIdle
	StyleDim
	StyleWarn
)

// Cell is one character cell.
type Cell struct {
	Ch    rune
	Style Style
}

// Screen is a rendered frame: exactly H lines of exactly W cells.
type Screen struct {
	W, H  int
	Lines [][]Cell
}

// Text returns the screen as strings with trailing blanks trimmed.
func (s *Screen) Text() []string {
	out := make([]string, len(s.Lines))
	for i, l := range s.Lines {
		var b strings.Builder
		for _, c := range l {
			b.WriteRune(c.Ch)
		}
		out[i] = strings.TrimRight(b.String(), " ")
	}
	return out
}

// Sort orders for the CPU rows ('s' cycles them). When not all CPUs fit, the
// first rows in this order are shown and the rest are summarised.
type Sort int

// CPU sort orders.
const (
	SortIRQTime Sort = iota // irq+soft, highest first
	SortBusy                // 100 − idle − iowait, highest first
	SortNetRx               // NET_RX softirqs/s, highest first
	SortID                  // CPU number
	numSorts
)

func (s Sort) String() string {
	switch s {
	case SortIRQTime:
		return "irq+soft"
	case SortBusy:
		return "busy"
	case SortNetRx:
		return "net_rx"
	case SortID:
		return "cpu"
	}
	return "?"
}

// Next is the following sort order, wrapping around.
func (s Sort) Next() Sort { return (s + 1) % numSorts }

// Model is everything the screen shows.
type Model struct {
	Frame *Frame // nil until two samples were taken
	Sort  Sort
	// Filter keeps IRQs whose number, name, device or class contains it
	// (case-insensitive).
	Filter string
	// Editing is set while the filter is typed ('/' … Enter).
	Editing bool
	Input   string
	// Status is a one-off message shown in the footer (errors).
	Status string
}

// line builds one screen line, clipping at the width.
type line struct {
	cells []Cell
	w     int
}

func (l *line) put(s string, st Style) {
	for _, r := range s {
		if len(l.cells) >= l.w {
			return
		}
		l.cells = append(l.cells, Cell{r, st})
	}
}

func (l *line) fill(n int, r rune, st Style) {
	for ; n > 0 && len(l.cells) < l.w; n-- {
		l.cells = append(l.cells, Cell{r, st})
	}
}

func (l *line) done() []Cell {
	l.fill(l.w-len(l.cells), ' ', StyleNormal)
	return l.cells
}

// Widths of the fixed parts of a CPU row.
const (
	cpuNumW  = 4 + 5*6 + 1                           // "CPU" + five " 12.3" + space
	cpuRateW = 7 + 7 + 7 + 6 + 6                     // NET_RX NET_TX BLOCK drop sqz
	minBarW  = 6                                     // narrower than this: no bar
	irqFixW  = 5 + 1 + 9 + 1 + 6 + 1 + 9 + 1 + 4 + 1 // IRQ, rate, ms/s, device, queue
)

// Render draws m into a w×h screen. It is pure: the same model gives the
// same cells, whatever the terminal.
func Render(m *Model, w, h int) *Screen {
	if w < 1 {
		w = 1
	}
	if h < 1 {
		h = 1
	}
	var lines [][]Cell
	add := func(l *line) { lines = append(lines, l.done()) }
	nl := func() *line { return &line{w: w, cells: make([]Cell, 0, w)} }

	f := m.Frame
	// Title.
	t := nl()
	t.put("irqpilot top", StyleTitle)
	if f != nil {
		var irqTotal float64
		for i := range f.IRQs {
			irqTotal += f.IRQs[i].Rate
		}
		t.put(fmt.Sprintf("  %s  %d CPUs  %.1fs  irqs %s/s  %s  cost %s", f.Host, len(f.CPUs), f.Interval,
			human(irqTotal), f.Time.Format("15:04:05"), costWord(f.CostSource)), StyleTitle)
	}
	add(t)

	if f == nil {
		l := nl()
		l.put("sampling…", StyleDim)
		add(l)
		return finish(lines, footer(m, w), w, h)
	}

	irqs := filterIRQs(f.IRQs, m.Filter)
	cpus := sortCPUs(f.CPUs, m.Sort)

	// Rows: title, CPU header, CPU rows [+ summary], blank, IRQ header, IRQ rows, footer.
	avail := h - 5
	// CPUs come first as long as a few IRQs still show; when they do not
	// all fit, the IRQs get a third of the rows and the rest of the CPUs
	// one summary line.
	irqWant := min(len(irqs), 3)
	if len(irqs) == 0 {
		irqWant = 1 // "no IRQs match"
	}
	cpuRows := len(cpus)
	if cpuRows > avail-irqWant {
		minIRQ := max(irqWant, min(len(irqs), avail/3))
		cpuRows = max(avail-minIRQ-1, 0)
	}
	summary := cpuRows < len(cpus)
	irqRows := max(avail-cpuRows, 0)
	if summary {
		irqRows--
	}
	irqRows = max(min(irqRows, len(irqs)), 0)

	barW := w - cpuNumW - cpuRateW - 3
	showRates := true
	if barW < minBarW {
		barW = 0
		if w < cpuNumW+cpuRateW {
			showRates = false
		}
	}

	hd := nl()
	hd.put(fmt.Sprintf("%4s %5s %5s %5s %5s %5s ", "CPU", "usr", "sys", "irq", "soft", "idle"), StyleHeader)
	if barW > 0 {
		hd.put("[", StyleHeader)
		hd.put(legend(barW), StyleHeader)
		hd.put("] ", StyleHeader)
	}
	if showRates {
		hd.put(fmt.Sprintf("%7s%7s%7s%6s%6s", "NET_RX", "NET_TX", "BLOCK", "drop", "sqz"), StyleHeader)
	}
	add(hd)
	for i := 0; i < cpuRows; i++ {
		add(cpuLine(nl(), &cpus[i], strconv.Itoa(cpus[i].ID), barW, showRates))
	}
	if summary {
		rest := cpus[cpuRows:]
		avg := average(rest)
		l := nl()
		l.put(fmt.Sprintf("… %d more CPUs, avg usr %.1f sys %.1f irq %.1f soft %.1f idle %.1f, max irq+soft %.1f",
			len(rest), avg.User+avg.Nice, avg.System, avg.IRQ, avg.SoftIRQ, avg.Idle, maxIRQTime(rest)), StyleDim)
		add(l)
	}

	add(nl())
	ih := nl()
	ih.put(fmt.Sprintf("%5s %9s %6s %-9s %4s ", "IRQ", "RATE/s", "MS/s", "DEVICE", "Q"), StyleHeader)
	cpusW := max(min(14, w-irqFixW-10), 4)
	ih.put(fmt.Sprintf("%-*s NAME", cpusW, "CPUS"), StyleHeader)
	if m.Filter != "" {
		ih.put("  (filter: "+m.Filter+")", StyleWarn)
	}
	add(ih)
	if len(irqs) == 0 && avail > cpuRows {
		l := nl()
		l.put("      no IRQs", StyleDim)
		if m.Filter != "" {
			l.put(" match "+strconv.Quote(m.Filter), StyleDim)
		}
		add(l)
	}
	for i := 0; i < irqRows; i++ {
		q := &irqs[i]
		l := nl()
		qs := "-"
		if q.Queue != nil {
			qs = strconv.Itoa(*q.Queue)
		}
		dev := q.Device
		if dev == "" {
			dev = "-"
		}
		l.put(fmt.Sprintf("%5d %9s %6s %-9s %4s ", q.IRQ, human(q.Rate), ms(q.Time), clip(dev, 9), qs), StyleNormal)
		l.put(fmt.Sprintf("%-*s %s", cpusW, clip(q.CPUs.String(), cpusW), q.Name), StyleNormal)
		add(l)
	}
	// Interrupt time per CPU by source, when the rows left allow it.
	if tbl := costTable(f, cpus[:cpuRows]); len(lines)+len(tbl)+1 <= h-1 {
		add(nl())
		for _, s := range tbl {
			l := nl()
			l.put(s.text, s.style)
			add(l)
		}
	}
	return finish(lines, footer(m, w), w, h)
}

// finish pads or cuts lines to h-1 and appends the footer.
func finish(lines [][]Cell, foot []Cell, w, h int) *Screen {
	if len(lines) > h-1 {
		lines = lines[:max(h-1, 0)]
	}
	for len(lines) < h-1 {
		l := &line{w: w}
		lines = append(lines, l.done())
	}
	lines = append(lines, foot)
	return &Screen{W: w, H: h, Lines: lines}
}

func footer(m *Model, w int) []Cell {
	l := &line{w: w}
	switch {
	case m.Editing:
		l.put("filter IRQs: "+m.Input+"_", StyleWarn)
		l.put("   Enter apply  Esc clear", StyleDim)
	case m.Status != "":
		l.put(m.Status, StyleWarn)
	default:
		l.put("s", StyleHeader)
		l.put(" sort:"+m.Sort.String()+"  ", StyleDim)
		l.put("/", StyleHeader)
		l.put(" filter  ", StyleDim)
		l.put("q", StyleHeader)
		l.put(" quit", StyleDim)
	}
	return l.done()
}
