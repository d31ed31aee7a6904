package report

import (
	"bytes"
	"image/png"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"gonum.org/v1/plot/vg"

	"github.com/irqpilot/irqpilot/internal/load"
)

// rolloutRuns lays the real loads of testRuns' two captures on one time
// grid per node, as the Prometheus source does: two intervals of the first
// capture ("before"), two without data (the node down), two of the second
// capture ("after").
func rolloutRuns(t *testing.T) ([]*Run, time.Time) {
	t.Helper()
	src := testRuns(t)
	t0 := time.Date(2026, 1, 2, 3, 0, 0, 0, time.UTC)
	step := 5 * time.Second
	var runs []*Run
	for _, name := range []string{"node1", "node2"} {
		var loads []*load.Load
		for i := 0; i < 6; i++ {
			l := &load.Load{Start: t0.Add(time.Duration(i) * step), End: t0.Add(time.Duration(i+1) * step), Interval: step}
			switch {
			case i < 2:
				l.CPUs = src[0].Loads[0].CPUs
			case i >= 4:
				l.CPUs = src[1].Loads[0].CPUs
			}
			loads = append(loads, l)
		}
		r, err := RunOf(name, "test", loads, nil)
		if err != nil {
			t.Fatal(err)
		}
		runs = append(runs, r)
	}
	return runs, t0
}

func TestGaps(t *testing.T) {
	runs, t0 := rolloutRuns(t)
	var got []string
	for _, g := range Gaps(runs) {
		got = append(got, g.String())
	}
	want := []string{
		"node1: no data from 2026-01-02T03:00:10Z to 2026-01-02T03:00:20Z (10s)",
		"node2: no data from 2026-01-02T03:00:10Z to 2026-01-02T03:00:20Z (10s)",
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("gaps (-want +got):\n%s", d)
	}
	// A gap at the end of the range is reported up to the range's end.
	runs[0].Loads[5].CPUs = nil
	gs := Gaps(runs[:1])
	if len(gs) != 2 || !gs[1].From.Equal(t0.Add(25*time.Second)) || !gs[1].To.Equal(t0.Add(30*time.Second)) {
		t.Errorf("trailing gap: %v", gs)
	}
}

func TestWithinAndShare(t *testing.T) {
	runs, t0 := rolloutRuns(t)
	src := testRuns(t)
	before := Window{Name: "before", From: t0, To: t0.Add(10 * time.Second)}
	if runs[0].Within(Window{From: t0.Add(10 * time.Second), To: t0.Add(20 * time.Second)}) != nil {
		t.Error("a window that holds only the gap has data")
	}
	w := runs[0].Within(before)
	if w == nil || len(w.Loads) != 2 {
		t.Fatalf("before window: %+v", w)
	}
	share := w.InterruptShare()
	// The share, by hand from the capture's per-CPU irq + softirq.
	total := 0.0
	for _, c := range src[0].Loads[0].CPUs {
		total += c.IRQ + c.SoftIRQ
	}
	sum := 0.0
	for i, c := range src[0].Loads[0].CPUs {
		want := 100 * (c.IRQ + c.SoftIRQ) / total
		if math.Abs(share[i]-want) > 1e-9 {
			t.Errorf("CPU %d share %.3f, want %.3f", c.ID, share[i], want)
		}
		sum += share[i]
	}
	if math.Abs(sum-100) > 1e-9 {
		t.Errorf("shares sum to %g", sum)
	}
}

func TestParseWindow(t *testing.T) {
	w, err := ParseWindow("before", "2026-01-02T03:00:00Z,1767322860")
	if err != nil {
		t.Fatal(err)
	}
	if d := w.To.Sub(w.From); d != time.Minute {
		t.Errorf("window of %s, want 1m", d)
	}
	for _, bad := range []string{"2026-01-02T03:00:00Z", "x,y", "1767322860,1767322800"} {
		if _, err := ParseWindow("after", bad); err == nil || !strings.Contains(err.Error(), "--after") {
			t.Errorf("ParseWindow(%q): %v", bad, err)
		}
	}
}

func TestRolloutCharts(t *testing.T) {
	runs, t0 := rolloutRuns(t)
	before := Window{Name: "before", From: t0, To: t0.Add(10 * time.Second)}
	after := Window{Name: "after", From: t0.Add(20 * time.Second), To: t0.Add(30 * time.Second)}
	charts, err := RolloutCharts(runs, before, after, Options{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, c := range charts {
		names = append(names, c.Name)
	}
	want := "cluster-before cluster-after interrupt-share irq-soft-over-time irq-soft-over-time-scale busy-over-time busy-over-time-scale"
	if got := strings.Join(names, " "); got != want {
		t.Errorf("charts: %s\nwant %s", got, want)
	}
	// These nodes recorded no IRQ: no empty IRQ-rate panel, and a caption
	// says why.
	if !strings.Contains(charts[2].Title, "no IRQ-rate chart: no IRQ fired") {
		t.Errorf("share chart caption %q does not say why there is no IRQ-rate chart", charts[2].Title)
	}
	b, err := imageBytes("png", charts, 10*vg.Inch)
	if err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	// The share chart's "after" bars are drawn (its colour is its own).
	if _, match := countInk(img, colAfter); match == 0 {
		t.Error("no purple (after) in the image")
	}
	// A window without data on any node is an error naming it.
	empty := Window{Name: "after", From: t0.Add(10 * time.Second), To: t0.Add(20 * time.Second)}
	if _, err := RolloutCharts(runs, before, empty, Options{}); err == nil || !strings.Contains(err.Error(), "after") {
		t.Errorf("empty window: %v", err)
	}
}
