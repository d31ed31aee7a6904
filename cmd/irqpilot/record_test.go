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
	"syscall"
	"testing"
	"time"

	"github.com/irqpilot/irqpilot/internal/record"
)

// diskActivity writes and fsyncs a file until stop is closed, so
// that the block device's IRQ fires during a recording.
//
// The file goes to /var/tmp, on the real disk: the test's own temporary
// directory may be on tmpfs (make test sets TMPDIR=/dev/shm), where fsync
// does no I/O and no IRQ fires.
func diskActivity(t *testing.T, stop <-chan struct{}) {
	t.Helper()
	dir, err := os.MkdirTemp("/var/tmp", "irqpilot-fsync-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	f, err := os.Create(filepath.Join(dir, "fsync.dat"))
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		defer f.Close()
		buf := bytes.Repeat([]byte("irqpilot"), 512)
		for {
			select {
			case <-stop:
				return
			default:
			}
			_, _ = f.Write(buf)
			_ = f.Sync()
			time.Sleep(5 * time.Millisecond)
		}
	}()
}

// recordLive makes a real recording of this machine under the given host name.
func recordLive(t *testing.T, path, hostName string) string {
	t.Helper()
	_, stderr, err := runIrqpilot(t, "record", "--interval", "100ms", "--duration", "1s", "-o", path, "--hostname", hostName)
	if err != nil {
		t.Fatalf("record: %v\n%s", err, stderr)
	}
	return stderr
}

func TestRecordLive(t *testing.T) {
	cpus := onlineCPUs(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "run.jsonl")
	stderr := recordLive(t, path, "alpha")
	if !strings.Contains(stderr, "% of one CPU") || !strings.Contains(stderr, "samples over") {
		t.Errorf("no CPU-time summary on stderr: %q", stderr)
	}
	rec, err := record.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	h := rec.Header
	if rec.Host() != "alpha" || h.IntervalDuration() != 100*time.Millisecond || h.Start.IsZero() || rec.Truncated {
		t.Errorf("header: host %q interval %v start %v truncated %v", rec.Host(), h.IntervalDuration(), h.Start, rec.Truncated)
	}
	if h.Inventory == nil || len(h.Inventory.CPUs) != len(cpus) {
		t.Fatalf("inventory missing or with the wrong CPUs: %+v", h.Inventory)
	}
	// --duration 1s at 100ms: at most 11 samples (one at 0 s, one per tick).
	if n := len(rec.Samples); n < 2 || n > 11 {
		t.Fatalf("%d samples", n)
	}
	for i, s := range rec.Samples {
		if len(s.CPUs) != len(cpus) || s.Interrupts == nil || len(s.Interrupts.Lines) == 0 {
			t.Fatalf("sample %d incomplete: %d cpus", i, len(s.CPUs))
		}
		if i > 0 && s.Clock <= rec.Samples[i-1].Clock {
			t.Errorf("sample %d: clock %v not after %v", i, s.Clock, rec.Samples[i-1].Clock)
		}
	}
}

// A recorder killed with SIGKILL leaves a readable recording; cut in the
// middle of its last line it is read up to the last complete sample, and
// `report` charts it. SIGTERM stops a recording cleanly (status 0).
func TestRecordKilledAndTruncated(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "killed.jsonl")
	cmd := selfCmd(nil, "record", "--interval", "50ms", "--duration", "0", "-o", path)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	deadline := time.Now().Add(30 * time.Second)
	for {
		data, _ := os.ReadFile(path)
		if bytes.Count(data, []byte("\n")) >= 5 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("recorder wrote fewer than 5 lines in 30 s")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()

	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	rec, err := record.ReadFile(path)
	if err != nil {
		t.Fatalf("killed recording: %v", err)
	}
	complete := bytes.Count(data, []byte("\n")) - 1 // minus the header
	if len(rec.Samples) < complete || len(rec.Samples) < 4 {
		t.Fatalf("killed recording: %d samples, %d complete lines", len(rec.Samples), complete)
	}
	// Cut the last complete sample line in half.
	end := bytes.LastIndexByte(data, '\n')
	start := bytes.LastIndexByte(data[:end], '\n') + 1
	cut := start + (end-start)/2
	if err := os.Truncate(path, int64(cut)); err != nil {
		t.Fatal(err)
	}
	cutRec, err := record.ReadFile(path)
	if err != nil {
		t.Fatalf("truncated recording: %v", err)
	}
	if !cutRec.Truncated || len(cutRec.Samples) != complete-1 {
		t.Fatalf("truncated recording: %d samples (truncated %v), want %d", len(cutRec.Samples), cutRec.Truncated, complete-1)
	}
	last := cutRec.Samples[len(cutRec.Samples)-1]
	if !last.Time.Equal(rec.Samples[complete-2].Time) {
		t.Errorf("last sample read is from %v, want %v", last.Time, rec.Samples[complete-2].Time)
	}
	out, stderr, err := runIrqpilot(t, "report", path, "-o", filepath.Join(dir, "killed.png"))
	if err != nil || !strings.Contains(stderr, "last line incomplete") || !strings.Contains(out, "wrote") {
		t.Errorf("report on a truncated recording: %v\nstdout %s\nstderr %s", err, out, stderr)
	}

	// SIGTERM: clean stop, exit status 0, summary printed, complete file.
	term := filepath.Join(dir, "term.jsonl")
	cmd = selfCmd(nil, "record", "--interval", "50ms", "--duration", "0", "-o", term)
	var errb bytes.Buffer
	cmd.Stderr = &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	for {
		data, _ := os.ReadFile(term)
		if bytes.Count(data, []byte("\n")) >= 3 {
			break
		}
		if time.Now().After(deadline.Add(30 * time.Second)) {
			t.Fatal("recorder wrote fewer than 3 lines")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Errorf("record after SIGTERM: %v\n%s", err, errb.String())
	}
	if !strings.Contains(errb.String(), "% of one CPU") {
		t.Errorf("no summary after SIGTERM: %q", errb.String())
	}
	if rec, err := record.ReadFile(term); err != nil || rec.Truncated || len(rec.Samples) < 2 {
		t.Errorf("recording stopped by SIGTERM: %v", err)
	}
}

func TestRecordErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"record"}, `"output" not set`},
		{[]string{"record", "-o", "x.jsonl", "--interval", "0s"}, "--interval 0s: must be positive"},
		{[]string{"record", "-o", filepath.Join(t.TempDir(), "no", "such", "dir", "x.jsonl")}, "no such file or directory"},
	} {
		_, stderr, err := runIrqpilot(t, tc.args...)
		if err == nil || !strings.Contains(stderr, tc.want) {
			t.Errorf("%v: err %v, stderr %q, want %q", tc.args, err, stderr, tc.want)
		}
	}
}

// A recording that cannot start (here: a root with no /proc to sample)
// leaves the file an earlier one wrote as it was.
func TestRecordThatCannotStartKeepsTheOldFile(t *testing.T) {
	dir := t.TempDir()
	old := filepath.Join(dir, "rec.jsonl")
	if err := os.WriteFile(old, []byte("{\"earlier\": true}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, stderr, err := runIrqpilot(t, "--root", t.TempDir(), "record", "-o", old, "--cost", "counts"); err == nil {
		t.Fatalf("record on an empty root started: %s", stderr)
	}
	if b, _ := os.ReadFile(old); string(b) != "{\"earlier\": true}\n" {
		t.Errorf("the earlier recording now holds %q", b)
	}
}

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
