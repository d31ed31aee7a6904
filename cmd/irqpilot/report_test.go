package main

import (
	"bytes"
	"encoding/xml"
	"image/png"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// Two real recordings of this machine made at the same time under two host
// names (record --hostname alpha / beta), while a goroutine writes and
// fsyncs a file so the disk IRQ fires, then charted together.
func TestReportTwoHosts(t *testing.T) {
	dir := t.TempDir()
	stop := make(chan struct{})
	diskActivity(t, stop)
	a, b := filepath.Join(dir, "alpha.jsonl"), filepath.Join(dir, "beta.jsonl")
	var wg sync.WaitGroup
	errs := make([]error, 2)
	outs := make([]bytes.Buffer, 2)
	for i, r := range []struct{ path, host string }{{a, "alpha"}, {b, "beta"}} {
		cmd := selfCmd(nil, "record", "--interval", "100ms", "--duration", "1s", "-o", r.path, "--hostname", r.host)
		cmd.Stderr = &outs[i]
		wg.Add(1)
		go func() { defer wg.Done(); errs[i] = cmd.Run() }()
	}
	wg.Wait()
	close(stop)
	for i, err := range errs {
		if err != nil {
			t.Fatalf("record %d: %v\n%s", i, err, outs[i].String())
		}
	}

	pngPath, svgPath, htmlPath := filepath.Join(dir, "r.png"), filepath.Join(dir, "r.svg"), filepath.Join(dir, "r.html")
	for _, out := range []string{pngPath, svgPath, htmlPath} {
		stdout, stderr, err := runIrqpilot(t, "report", a, b, "-o", out, "--top", "5")
		if err != nil || !strings.Contains(stdout, "2 recording(s), 14 charts") {
			t.Fatalf("report -o %s: %v\n%s%s", out, err, stdout, stderr)
		}
	}

	f, err := os.Open(pngPath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("png: %v", err)
	}
	bnd := img.Bounds()
	if bnd.Dx() != 960 || bnd.Dy() < 900 {
		t.Errorf("png is %dx%d, want 960 wide (10 in at 96 dpi) and every chart high", bnd.Dx(), bnd.Dy())
	}
	// Non-empty plot: count pixels that are not white background.
	ink := 0
	for y := bnd.Min.Y; y < bnd.Max.Y; y++ {
		for x := bnd.Min.X; x < bnd.Max.X; x++ {
			r, g, b, _ := img.At(x, y).RGBA()
			if r < 0xf000 || g < 0xf000 || b < 0xf000 {
				ink++
			}
		}
	}
	if frac := float64(ink) / float64(bnd.Dx()*bnd.Dy()); frac < 0.05 || frac > 0.7 {
		t.Errorf("png: %.1f%% of pixels are not background", 100*frac)
	}

	svg, err := os.ReadFile(svgPath)
	if err != nil {
		t.Fatal(err)
	}
	dec := xml.NewDecoder(bytes.NewReader(svg))
	var text strings.Builder
	rootSeen, paths := "", 0
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("svg: %v", err)
		}
		switch e := tok.(type) {
		case xml.StartElement:
			if rootSeen == "" {
				rootSeen = e.Name.Local
			}
			if e.Name.Local == "path" {
				paths++
			}
		case xml.CharData:
			text.Write(e)
			text.WriteByte('|')
		}
	}
	if rootSeen != "svg" || paths < 50 {
		t.Errorf("svg root %q with %d paths", rootSeen, paths)
	}
	for _, want := range []string{"alpha", "beta", "alpha cpu0", "beta cpu0", "IRQ", "Interrupts per CPU by device", "NET_RX softirqs", "Interrupt time per CPU by source"} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("svg text lacks %q", want)
		}
	}

	page, err := os.ReadFile(htmlPath)
	if err != nil {
		t.Fatal(err)
	}
	if n := bytes.Count(page, []byte(`src="data:image/png;base64,`)); n != 14 {
		t.Errorf("html has %d inline images, want 14 (one per chart)", n)
	}
	if bytes.Contains(page, []byte("http://")) || bytes.Contains(page, []byte("https://")) {
		t.Error("html refers to the network")
	}

	_, stderr, err := runIrqpilot(t, "report", a, "-o", filepath.Join(dir, "r.pdf"))
	if err == nil || !strings.Contains(stderr, `unknown report format ".pdf"`) {
		t.Errorf("report -o r.pdf: %v %q", err, stderr)
	}
	junk := filepath.Join(dir, "junk.dat")
	os.WriteFile(junk, bytes.Repeat([]byte("irqpilot"), 512), 0o644)
	_, stderr, err = runIrqpilot(t, "report", junk, "-o", pngPath)
	if err == nil || !strings.Contains(stderr, "junk.dat:1") {
		t.Errorf("report on a non-recording: %v %q", err, stderr)
	}
}
