package tui

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/gdamore/tcell/v2"

	"github.com/irqpilot/irqpilot/internal/host"
	"github.com/irqpilot/irqpilot/internal/kernel"
	"github.com/irqpilot/irqpilot/internal/load"
)

// loadPair samples two kernel trees with the real sampler and computes rates.
func loadPair(t *testing.T, a, b string) *load.Load {
	t.Helper()
	sa, err := load.NewSampler(kernel.New(a)).Sample()
	if err != nil {
		t.Fatal(err)
	}
	sb, err := load.NewSampler(kernel.New(b)).Sample()
	if err != nil {
		t.Fatal(err)
	}
	l, err := load.Rates(sa, sb)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// checkGeometry: exactly h lines of exactly w cells, and the text never
// runs past the width.
func checkGeometry(t *testing.T, s *Screen, w, h int) {
	t.Helper()
	if s.W != w || s.H != h || len(s.Lines) != h {
		t.Fatalf("screen %dx%d with %d lines, want %dx%d", s.W, s.H, len(s.Lines), w, h)
	}
	for i, l := range s.Lines {
		if len(l) != w {
			t.Errorf("line %d has %d cells, want %d", i, len(l), w)
		}
	}
	for i, l := range s.Text() {
		if n := utf8.RuneCountInString(l); n > w {
			t.Errorf("line %d is %d runes wide: %q", i, n, l)
		}
	}
}

// findRow returns the CPU row for cpu, nil if absent.
func findRow(lines []string, cpu int) []string {
	for _, l := range lines {
		f := strings.Fields(l)
		if len(f) > 6 && f[0] == fmt.Sprint(cpu) && strings.Contains(l, "[") {
			return f
		}
	}
	return nil
}

// The busy pair was captured on this project's 2-CPU VM under stress-ng,
// UDP loopback traffic and direct disk writes.
func TestRender80x24Busy(t *testing.T) {
	l := loadPair(t, "testdata/busy/a", "testdata/busy/b")
	q := 0
	h := &host.Host{IRQs: []host.IRQ{{Number: 36, Device: "vda", Queue: &q, Class: host.ClassStorage}}}
	f := NewFrame("vm", h, l)
	s := Render(&Model{Frame: f}, 80, 24)
	checkGeometry(t, s, 80, 24)
	text := s.Text()
	t.Logf("\n%s", strings.Join(text, "\n"))

	if !strings.HasPrefix(text[0], fmt.Sprintf("irqpilot top  vm  2 CPUs  %.1fs", l.Interval.Seconds())) {
		t.Errorf("title %q", text[0])
	}
	for _, c := range l.CPUs {
		row := findRow(text, c.ID)
		if row == nil {
			t.Fatalf("no row for CPU %d", c.ID)
		}
		want := []string{fmt.Sprintf("%.1f", c.User+c.Nice), fmt.Sprintf("%.1f", c.System),
			fmt.Sprintf("%.1f", c.IRQ), fmt.Sprintf("%.1f", c.SoftIRQ), fmt.Sprintf("%.1f", c.Idle)}
		if strings.Join(row[1:6], " ") != strings.Join(want, " ") {
			t.Errorf("CPU %d numbers %v, want %v", c.ID, row[1:6], want)
		}
	}
	// CPU1 took the loopback traffic's NET_RX (814951-629876 over 2.34 s)
	// and all of vda's completions (BLOCK).
	c1 := l.CPU(1)
	if c1.NetRx < 50000 || c1.Block < 20 {
		t.Fatalf("capture changed? cpu1 net_rx %.0f block %.0f", c1.NetRx, c1.Block)
	}
	row := findRow(text, 1)
	if got := row[len(row)-5]; got != human(c1.NetRx) {
		t.Errorf("CPU1 NET_RX column %q, want %q", got, human(c1.NetRx))
	}
	// Sorted by irq+soft: the hotter CPU comes first.
	first := findRow(text[2:3], l.CPUs[0].ID) != nil
	if hot := l.CPU(0).IRQTime() > l.CPU(1).IRQTime(); hot != first {
		t.Errorf("sort by irq+soft: CPU0 first = %v, CPU0 hotter = %v", first, hot)
	}
	// IRQ 36 (vda, disk writes) is the busiest IRQ, shown with device and queue.
	var irqLine string
	for i, ln := range text {
		if strings.HasPrefix(ln, "  IRQ") {
			irqLine = text[i+1]
		}
	}
	if f := strings.Fields(irqLine); len(f) < 7 || f[0] != "36" || f[3] != "vda" || f[4] != "0" || f[5] != "1" || f[6] != "virtio1-req.0" {
		t.Errorf("top IRQ line %q, want IRQ 36 vda queue 0 on CPU 1", irqLine)
	}
	if !strings.Contains(text[23], "q quit") {
		t.Errorf("footer %q", text[23])
	}
}

// writeTree writes a synthetic n-CPU /proc at "time" step k: CPU i spends
// i%7 % of its time in irq and 3*(i%11) % in softirq, except CPU 17, which
// spends 60 % in softirq (the core-0 pattern on another core).
func writeTree(t *testing.T, dir string, n, k int) {
	t.Helper()
	var st, in, si, sn strings.Builder
	fmt.Fprintf(&st, "cpu  0 0 0 0 0 0 0 0 0 0\n")
	fmt.Fprintf(&in, "     ")
	fmt.Fprintf(&si, "     ")
	for i := 0; i < n; i++ {
		irq, soft := i%7, 3*(i%11)
		if i == 17 {
			irq, soft = 0, 60
		}
		user, sys := 20, 10
		idle := 100 - irq - soft - user - sys
		// Ticks: 1000 base plus k seconds of 100 ticks.
		f := func(pct int) int { return 1000 + k*pct }
		fmt.Fprintf(&st, "cpu%d %d 0 %d %d 0 %d %d 0 0 0\n", i, f(user), f(sys), f(idle), f(irq), f(soft))
		fmt.Fprintf(&in, " CPU%d", i)
		fmt.Fprintf(&si, " CPU%d", i)
		fmt.Fprintf(&sn, "%08x %08x %08x 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 %08x\n",
			100+k*1000*(i%5), k*(i%3), k*(i%2), i)
	}
	in.WriteString("\n")
	for irq := 100; irq < 140; irq++ {
		fmt.Fprintf(&in, "%4d:", irq)
		for i := 0; i < n; i++ {
			c := 0
			if i == (irq*3)%n {
				c = k * irq * 10
			}
			fmt.Fprintf(&in, " %d", c)
		}
		fmt.Fprintf(&in, "  PCI-MSIX-0000:3b:00.0 %d-edge      ice-eth0-TxRx-%d\n", irq-100, irq-100)
	}
	si.WriteString("\n")
	for _, typ := range []string{"HI", "TIMER", "NET_TX", "NET_RX", "BLOCK"} {
		fmt.Fprintf(&si, "%8s:", typ)
		for i := 0; i < n; i++ {
			fmt.Fprintf(&si, " %d", k*(i+1)*len(typ))
		}
		si.WriteString("\n")
	}
	files := map[string]string{
		"proc/stat": st.String(), "proc/interrupts": in.String(), "proc/softirqs": si.String(),
		"proc/net/softnet_stat": sn.String(), "proc/uptime": fmt.Sprintf("%d.00 0.00\n", 100+k),
	}
	for name, data := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// A generated 256-CPU host fits 80x24: the busiest CPUs are listed, the
// rest summarised in one line, nothing overflows.
func TestRender256CPUs(t *testing.T) {
	dir := t.TempDir()
	writeTree(t, filepath.Join(dir, "a"), 256, 0)
	writeTree(t, filepath.Join(dir, "b"), 256, 1)
	l := loadPair(t, filepath.Join(dir, "a"), filepath.Join(dir, "b"))
	if len(l.CPUs) != 256 {
		t.Fatalf("%d CPUs", len(l.CPUs))
	}
	f := NewFrame("big", nil, l)
	for _, size := range [][2]int{{80, 24}, {120, 50}, {40, 10}, {200, 300}} {
		w, h := size[0], size[1]
		s := Render(&Model{Frame: f}, w, h)
		checkGeometry(t, s, w, h)
		text := s.Text()
		if size == [2]int{80, 24} {
			t.Logf("\n%s", strings.Join(text, "\n"))
			// The first CPU row is CPU 17 with 60 % softirq.
			if row := strings.Fields(text[2]); row[0] != "17" || row[4] != "60.0" {
				t.Errorf("first CPU row %q, want CPU 17 at 60.0 soft", text[2])
			}
		}
		rows, summary := 0, ""
		for _, ln := range text[2:] {
			if strings.HasPrefix(ln, "…") {
				summary = ln
				break
			}
			if f := strings.Fields(ln); len(f) > 5 && f[1] == "20.0" {
				rows++
			}
		}
		if h < 300 {
			// Everything beyond the listed rows is summarised; all CPUs
			// spend 20 % in user and 10 % in system time.
			want := fmt.Sprintf("… %d more CPUs, avg usr 20.0 sys 10.0", 256-rows)
			if w < len(want) {
				want = want[:w-2]
			}
			if !strings.HasPrefix(summary, want) {
				t.Errorf("%dx%d: summary %q, want prefix %q", w, h, summary, want)
			}
		} else if summary != "" {
			t.Errorf("%dx%d: all CPUs fit but got summary %q", w, h, summary)
		}
	}
	// The summary counts exactly the CPUs not shown.
	s := Render(&Model{Frame: f}, 80, 24).Text()
	rows := 0
	for _, ln := range s[2:] {
		if strings.HasPrefix(ln, "…") {
			if want := fmt.Sprintf("… %d more CPUs", 256-rows); !strings.HasPrefix(ln, want) {
				t.Errorf("summary %q, want prefix %q", ln, want)
			}
			break
		}
		rows++
	}
	if rows < 8 {
		t.Errorf("only %d CPU rows at 80x24", rows)
	}
}

func TestKeys(t *testing.T) {
	l := loadPair(t, "testdata/busy/a", "testdata/busy/b")
	m := &Model{Frame: NewFrame("vm", nil, l)}
	key := func(r rune) bool { return HandleKey(m, tcell.NewEventKey(tcell.KeyRune, r, 0)) }
	special := func(k tcell.Key) bool { return HandleKey(m, tcell.NewEventKey(k, 0, 0)) }

	if key('s'); m.Sort != SortBusy {
		t.Errorf("s: sort %v", m.Sort)
	}
	key('s')
	key('s')
	if m.Sort != SortID {
		t.Errorf("sort %v, want cpu", m.Sort)
	}
	text := Render(m, 80, 24).Text()
	if findRow(text[2:3], 0) == nil || findRow(text[3:4], 1) == nil {
		t.Errorf("sort cpu: rows %q %q", text[2], text[3])
	}
	// '/' then "virtio2" Enter: only eth0's virtio2 IRQs remain.
	key('/')
	for _, r := range "virtio2x" {
		key(r)
	}
	special(tcell.KeyBackspace2)
	if key('q') {
		t.Fatal("q while typing a filter quit")
	}
	special(tcell.KeyBackspace2)
	special(tcell.KeyEnter)
	if m.Filter != "virtio2" || m.Editing {
		t.Fatalf("filter %q editing %v", m.Filter, m.Editing)
	}
	text = Render(m, 80, 24).Text()
	n := 0
	for _, ln := range text {
		if f := strings.Fields(ln); len(f) > 1 && f[0] != "IRQ" && strings.HasPrefix(f[len(f)-1], "virtio") {
			n++
			if !strings.HasPrefix(f[len(f)-1], "virtio2-") {
				t.Errorf("filtered line %q", ln)
			}
		}
	}
	if n == 0 {
		t.Errorf("no virtio2 IRQ shown:\n%s", strings.Join(text, "\n"))
	}
	key('/')
	special(tcell.KeyEscape)
	if m.Filter != "" || m.Editing {
		t.Errorf("Esc: filter %q editing %v", m.Filter, m.Editing)
	}
	if !key('q') {
		t.Error("q did not quit")
	}
}

func TestHuman(t *testing.T) {
	for v, want := range map[float64]string{0: "0", 0.01: "0", 2.5: "2.5", 999.4: "999", 12345: "12.3k", 4.567e6: "4.57M", 2e9: "2.00G"} {
		if got := human(v); got != want {
			t.Errorf("human(%v) = %q, want %q", v, got, want)
		}
	}
}
