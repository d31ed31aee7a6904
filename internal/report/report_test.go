package report

import (
	"bytes"
	"encoding/base64"
	"encoding/xml"
	"fmt"
	"html"
	"image"
	"image/color"
	"image/png"
	"io"
	"math"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"gonum.org/v1/plot/vg"

	"github.com/irqpilot/irqpilot/internal/kernel"
	"github.com/irqpilot/irqpilot/internal/load"
	"github.com/irqpilot/irqpilot/internal/record"
)

// recordTrees records the given kernel trees' counters, in order, as one
// host's recording, via the real writer and reader.
func recordTrees(t *testing.T, host string, dirs ...string) *record.Recording {
	t.Helper()
	var buf bytes.Buffer
	var w *record.Writer
	for _, d := range dirs {
		s, err := load.NewSampler(kernel.New(d)).Sample()
		if err != nil {
			t.Fatal(err)
		}
		if w == nil {
			if w, err = record.NewWriter(&buf, record.Header{Host: host, Start: s.Time, Interval: int64(time.Second)}); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Write(s); err != nil {
			t.Fatal(err)
		}
	}
	rec, err := record.Read(&buf, host+".jsonl")
	if err != nil {
		t.Fatal(err)
	}
	return rec
}

// The capture pairs of internal/tui (2-CPU VM under load) and of
// internal/load (same VM: stress-cpu, disk-io, udp-loopback).
func testRuns(t *testing.T) []*Run {
	t.Helper()
	tui := "../tui/testdata/busy/"
	ld := "../load/testdata/"
	alpha := recordTrees(t, "alpha", tui+"a", tui+"b")
	// beta: another capture of the same VM (load's UDP loopback pair) when present.
	beta := recordTrees(t, "beta", tui+"a", tui+"b")
	if m, _ := filepath.Glob(ld + "udp-loopback/a"); len(m) == 1 {
		beta = recordTrees(t, "beta", ld+"udp-loopback/a", ld+"udp-loopback/b")
	}
	var runs []*Run
	for _, rec := range []*record.Recording{alpha, beta} {
		r, err := NewRun(rec)
		if err != nil {
			t.Fatal(err)
		}
		runs = append(runs, r)
	}
	return runs
}

func TestMeanCPUs(t *testing.T) {
	runs := testRuns(t)
	l := runs[0].Loads[0]
	means := runs[0].MeanCPUs()
	if len(means) != 2 || len(runs[0].Loads) != 1 {
		t.Fatalf("%d cpus, %d loads", len(means), len(runs[0].Loads))
	}
	// One interval: the mean is that interval.
	for i, m := range means {
		c := l.CPUs[i]
		if m.ID != c.ID || math.Abs(m.SoftIRQ-c.SoftIRQ) > 1e-9 || math.Abs(m.System-c.System) > 1e-9 ||
			math.Abs(m.Others()-(c.Nice+c.IOWait+c.Steal)) > 1e-9 {
			t.Errorf("cpu %d: mean %+v, load %+v", c.ID, m, c)
		}
		if sum := m.User + m.System + m.IRQ + m.SoftIRQ + m.Others() + m.Idle; math.Abs(sum-100) > 0.01 {
			t.Errorf("cpu %d: components add up to %.3f", m.ID, sum)
		}
	}
	// IRQ 36 (vda) is the busiest IRQ of the busy capture.
	s := runs[0].IRQSeries()
	var best IRQSeries
	for _, q := range s {
		if q.Mean > best.Mean {
			best = q
		}
	}
	if best.IRQ != 36 || !strings.Contains(best.Label, "virtio1-req.0") {
		t.Errorf("busiest IRQ %d %q", best.IRQ, best.Label)
	}
}

// countInk counts pixels that differ from white, and pixels close to c.
func countInk(img image.Image, c color.RGBA) (ink, match int) {
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			r, g, bl, _ := img.At(x, y).RGBA()
			if r>>8 < 250 || g>>8 < 250 || bl>>8 < 250 {
				ink++
			}
			if absDiff(r>>8, uint32(c.R)) < 6 && absDiff(g>>8, uint32(c.G)) < 6 && absDiff(bl>>8, uint32(c.B)) < 6 {
				match++
			}
		}
	}
	return ink, match
}

func absDiff(a, b uint32) uint32 {
	if a > b {
		return a - b
	}
	return b - a
}

func TestImages(t *testing.T) {
	runs := testRuns(t)
	charts, err := Charts(runs, Options{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, c := range charts {
		names = append(names, c.Name)
	}
	// Which CPU is overloaded by interrupts, and by which device: the
	// cluster view, interrupts by device and queue per CPU, heat maps of
	// interrupt time and of NET_RX/NET_TX/BLOCK softirqs per CPU, each with
	// its colour scale, busy time, and the busy IRQs' rates.
	if got := strings.Join(names, " "); got != "cluster irq-by-device irq-soft-over-time irq-soft-over-time-scale net-rx-over-time net-rx-over-time-scale net-tx-over-time net-tx-over-time-scale block-over-time block-over-time-scale busy-over-time busy-over-time-scale irq-rates interrupt-time" {
		t.Fatalf("charts: %s", got)
	}
	var totalH vg.Length
	for _, c := range charts {
		totalH += c.Height
	}

	var pngBuf bytes.Buffer
	if err := WriteImage(&pngBuf, "png", charts, 10*vg.Inch); err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(&pngBuf)
	if err != nil {
		t.Fatal(err)
	}
	wantW, wantH := 10*DPI, int(math.Round(float64(totalH/vg.Inch)*DPI))
	if b := img.Bounds(); b.Dx() != wantW || b.Dy() != wantH {
		t.Errorf("png %dx%d, want %dx%d", b.Dx(), b.Dy(), wantW, wantH)
	}
	clusterPx := int(math.Round(float64(charts[0].Height/vg.Inch) * DPI))
	// The cluster chart (top 4.2 in) shows the stacked bars: system time
	// (both captures had heavy system load) in its blue, user in green.
	top := img.(interface {
		SubImage(image.Rectangle) image.Image
	}).SubImage(image.Rect(0, 0, wantW, clusterPx))
	ink, blue := countInk(top, colSystem)
	_, green := countInk(top, colUser)
	if blue < 500 || green < 500 {
		t.Errorf("cluster chart: %d system-blue and %d user-green pixels; bars missing", blue, green)
	}
	if frac := float64(ink) / float64(wantW*clusterPx); frac < 0.03 || frac > 0.6 {
		t.Errorf("cluster chart: %.1f%% of pixels inked", 100*frac)
	}
	all, _ := countInk(img, color.RGBA{})
	if frac := float64(all) / float64(wantW*wantH); frac < 0.05 {
		t.Errorf("whole image: only %.1f%% of pixels inked", 100*frac)
	}

	var svgBuf bytes.Buffer
	if err := WriteImage(&svgBuf, "svg", charts, 10*vg.Inch); err != nil {
		t.Fatal(err)
	}
	svgText := svgBuf.String()
	dec := xml.NewDecoder(&svgBuf)
	var root xml.StartElement
	paths, texts := 0, []string{}
	inText := false
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("svg is not XML: %v", err)
		}
		switch e := tok.(type) {
		case xml.StartElement:
			if root.Name.Local == "" {
				root = e
			}
			if e.Name.Local == "path" {
				paths++
			}
			inText = e.Name.Local == "text"
		case xml.CharData:
			if inText {
				texts = append(texts, string(e))
			}
		case xml.EndElement:
			inText = false
		}
	}
	if root.Name.Local != "svg" {
		t.Fatalf("svg root element %q", root.Name.Local)
	}
	attr := map[string]string{}
	for _, a := range root.Attr {
		attr[a.Name.Local] = a.Value
	}
	if !regexp.MustCompile(`^720(\.0+)?pt$`).MatchString(attr["width"]) {
		t.Errorf("svg width %q, want 720pt (10 in)", attr["width"])
	}
	if paths < 100 {
		t.Errorf("svg has %d paths", paths)
	}
	textHas(t, fmt.Sprintf("svg text (%d bytes)", len(svgText)), strings.Join(texts, "|"), "alpha", "beta", "Per-core utilisation", "virtio1-req.0", "alpha cpu0", "beta cpu1")
}

func TestHTMLSelfContained(t *testing.T) {
	runs := testRuns(t)
	charts, err := Charts(runs, Options{TopIRQs: 3})
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := WriteHTML(&b, runs, charts, 8*vg.Inch); err != nil {
		t.Fatal(err)
	}
	page := b.String()
	if regexp.MustCompile(`(?i)(src|href)="(https?:)?//`).MatchString(page) || strings.Contains(page, "<script") {
		t.Error("HTML refers to the network or runs scripts")
	}
	imgs := regexp.MustCompile(`src="data:image/png;base64,([^"]+)"`).FindAllStringSubmatch(page, -1)
	if len(imgs) != len(charts) {
		t.Fatalf("%d inline images, want %d", len(imgs), len(charts))
	}
	for i, m := range imgs {
		// Attribute values are HTML-escaped (+ as &#43;); a browser unescapes them.
		data, err := base64.StdEncoding.DecodeString(html.UnescapeString(m[1]))
		if err != nil {
			t.Fatal(err)
		}
		img, err := png.Decode(bytes.NewReader(data))
		if err != nil {
			t.Fatalf("image %d: %v", i, err)
		}
		if img.Bounds().Dx() != 8*DPI {
			t.Errorf("image %d is %d px wide", i, img.Bounds().Dx())
		}
	}
	// Only two IRQs average 10/s or more; the 2–9/s ones are not drawn.
	textHas(t, "HTML", page, "<td>alpha</td>", "<td>beta</td>", "Top 2 IRQs", "Interrupts per CPU by device and queue", "NET_RX softirqs per second per CPU")
}

func TestFormatOf(t *testing.T) {
	for name, want := range map[string]string{"r.png": "png", "R.SVG": "svg", "x/r.html": "html", "r.htm": "html"} {
		if got, err := FormatOf(name); err != nil || got != want {
			t.Errorf("FormatOf(%q) = %q, %v", name, got, err)
		}
	}
	if _, err := FormatOf("r.pdf"); err == nil || !strings.Contains(err.Error(), "r.pdf") {
		t.Errorf("FormatOf(r.pdf): %v", err)
	}
}

func TestNewRunNeedsTwoSamples(t *testing.T) {
	rec := recordTrees(t, "solo", "../tui/testdata/busy/a")
	if _, err := NewRun(rec); err == nil || !strings.Contains(err.Error(), "solo.jsonl: 1 sample") {
		t.Errorf("NewRun with one sample: %v", err)
	}
}
