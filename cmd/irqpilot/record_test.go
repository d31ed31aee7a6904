package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
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
