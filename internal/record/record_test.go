package record

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/irqpilot/irqpilot/internal/kernel"
	"github.com/irqpilot/irqpilot/internal/load"
)

// liveSamples takes n samples of this machine's counters.
func liveSamples(t *testing.T, n int) []*load.Sample {
	t.Helper()
	s := load.NewSampler(kernel.New("/"))
	var out []*load.Sample
	for i := 0; i < n; i++ {
		if i > 0 {
			time.Sleep(20 * time.Millisecond)
		}
		smp, err := s.Sample()
		if err != nil {
			t.Skipf("live /proc not readable: %v", err)
		}
		out = append(out, smp)
	}
	return out
}

func writeRecording(t *testing.T, hostName string, samples []*load.Sample) []byte {
	t.Helper()
	var buf bytes.Buffer
	w, err := NewWriter(&buf, Header{Host: hostName, Start: samples[0].Time, Interval: int64(20 * time.Millisecond)})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range samples {
		if err := w.Write(s); err != nil {
			t.Fatal(err)
		}
	}
	if w.Samples() != len(samples) {
		t.Fatalf("Samples() = %d, want %d", w.Samples(), len(samples))
	}
	return buf.Bytes()
}

func sameSample(t *testing.T, i int, got, want *load.Sample) {
	t.Helper()
	if !got.Time.Equal(want.Time) || got.Clock != want.Clock || got.ClockSource != want.ClockSource {
		t.Errorf("sample %d: time/clock %v %v %s, want %v %v %s", i, got.Time, got.Clock, got.ClockSource, want.Time, want.Clock, want.ClockSource)
	}
	if d := cmp.Diff(want.CPUs, got.CPUs); d != "" {
		t.Errorf("sample %d: cpus (-want +got):\n%s", i, d)
	}
	if d := cmp.Diff(want.Softirqs, got.Softirqs); d != "" {
		t.Errorf("sample %d: softirqs (-want +got):\n%s", i, d)
	}
	if d := cmp.Diff(want.Softnet, got.Softnet); d != "" {
		t.Errorf("sample %d: softnet (-want +got):\n%s", i, d)
	}
	if !cmp.Equal(got.Interrupts.CPUs, want.Interrupts.CPUs) || len(got.Interrupts.Lines) != len(want.Interrupts.Lines) {
		t.Fatalf("sample %d: interrupts columns/rows differ", i)
	}
	for j := range want.Interrupts.Lines {
		g, w := got.Interrupts.Lines[j], want.Interrupts.Lines[j]
		if len(w.Actions) == 0 {
			w.Actions = nil
		}
		if len(g.Actions) == 0 {
			g.Actions = nil
		}
		if d := cmp.Diff(w, g); d != "" {
			t.Errorf("sample %d: interrupts row %d (-want +got):\n%s", i, j, d)
		}
	}
}

// A live recording reads back to the same counters, rates computed from it
// equal rates from the original samples, and irq_info is only written when
// it changes.
func TestRoundTripLive(t *testing.T) {
	samples := liveSamples(t, 4)
	data := writeRecording(t, "alpha", samples)
	lines := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
	if len(lines) != 5 {
		t.Fatalf("%d lines, want header + 4 samples", len(lines))
	}
	// infoRows is a sample line's irq_info: its rows, and how many of them
	// name their actions.
	infoRows := func(text string) (rows, withActions int) {
		t.Helper()
		var l line
		if err := json.Unmarshal([]byte(text), &l); err != nil {
			t.Fatal(err)
		}
		for _, info := range l.IRQInfo {
			if len(info.Actions) > 0 {
				withActions++
			}
		}
		return len(l.IRQInfo), withActions
	}
	rows, first := infoRows(lines[1])
	if rows == 0 {
		t.Errorf("first sample carries no irq_info: %.200s", lines[1])
	}
	// Actions do not change in 60 ms on an idle test machine; if they did,
	// only the changed rows would be repeated, never all of them.
	for _, l := range lines[2:] {
		if _, n := infoRows(l); n >= first && first > 2 {
			t.Errorf("irq_info repeated in full (%d rows with actions, %d in the first sample): %.200s", n, first, l)
		}
	}
	rec, err := Read(bytes.NewReader(data), "live.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	if rec.Host() != "alpha" || rec.Header.IntervalDuration() != 20*time.Millisecond || rec.Truncated {
		t.Errorf("header: host %q interval %v truncated %v", rec.Host(), rec.Header.IntervalDuration(), rec.Truncated)
	}
	if len(rec.Samples) != 4 {
		t.Fatalf("%d samples, want 4", len(rec.Samples))
	}
	for i := range samples {
		sameSample(t, i, rec.Samples[i], samples[i])
	}
	want, err := load.Rates(samples[0], samples[3])
	if err != nil {
		t.Fatal(err)
	}
	got, err := load.Rates(rec.Samples[0], rec.Samples[3])
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(want.CPUs, got.CPUs); d != "" {
		t.Errorf("CPU rates from the recording differ from rates from the samples (-want +got):\n%s", d)
	}
	if d := cmp.Diff(want.IRQs, got.IRQs); d != "" {
		t.Errorf("IRQ rates from the recording differ from rates from the samples (-want +got):\n%s", d)
	}
}

// A recording file cut at every byte of its last line is readable up to the
// last complete sample; cut at a line end it is complete.
func TestTruncatedRecording(t *testing.T) {
	samples := liveSamples(t, 3)
	data := writeRecording(t, "alpha", samples)
	path := filepath.Join(t.TempDir(), "run.jsonl")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	lastStart := bytes.LastIndexByte(data[:len(data)-1], '\n') + 1
	// Every cut inside the last line (step keeps the test fast on big hosts).
	step := max(1, (len(data)-lastStart)/200)
	for cut := lastStart + 1; cut < len(data)-1; cut += step {
		if err := os.Truncate(path, int64(cut)); err != nil {
			t.Fatal(err)
		}
		rec, err := ReadFile(path)
		if err != nil {
			t.Fatalf("cut at %d of %d: %v", cut, len(data), err)
		}
		if len(rec.Samples) != 2 || !rec.Truncated {
			t.Fatalf("cut at %d: %d samples, truncated %v; want 2, true", cut, len(rec.Samples), rec.Truncated)
		}
		sameSample(t, 1, rec.Samples[1], samples[1])
	}
	// Cut right after the last newline but one: two complete samples.
	if err := os.Truncate(path, int64(lastStart)); err != nil {
		t.Fatal(err)
	}
	rec, err := ReadFile(path)
	if err != nil || len(rec.Samples) != 2 || rec.Truncated {
		t.Fatalf("cut at line end: %v samples=%d truncated=%v", err, len(rec.Samples), rec.Truncated)
	}
	// Cut only the final newline: the last sample is complete JSON, keep it.
	if err := os.WriteFile(path, data[:len(data)-1], 0o644); err != nil {
		t.Fatal(err)
	}
	if rec, err = ReadFile(path); err != nil || len(rec.Samples) != 3 || rec.Truncated {
		t.Fatalf("without final newline: %v samples=%d truncated=%v", err, len(rec.Samples), rec.Truncated)
	}
}

func TestBadRecordings(t *testing.T) {
	samples := liveSamples(t, 3)
	data := writeRecording(t, "alpha", samples)
	lines := strings.SplitAfter(string(data), "\n")
	tests := []struct {
		name, data, want string
	}{
		{"empty", "", "empty recording"},
		{"not a recording", `{"hello":1}` + "\n", "not an irqpilot recording"},
		{"newer version", strings.Replace(lines[0], `"version":1`, `"version":99`, 1), "newer"},
		{"broken middle line", lines[0] + lines[1][:40] + "\n" + lines[2], "bad.jsonl:2"},
		{"cpu-less sample", lines[0] + `{"type":"sample","cpus":[]}` + "\n", "no cpus"},
		{"wrong count", lines[0] + `{"type":"sample","cpus":[{"id":0}],"irq_cpus":[0,1],"irqs":[["5",[1]],["6",[1,2,3]]]}` + "\n", "irq 6: 3 counts for 2 CPUs"},
	}
	for _, tc := range tests {
		_, err := Read(strings.NewReader(tc.data), "bad.jsonl")
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want it to contain %q", tc.name, err, tc.want)
		}
	}
	// Unknown line types from newer recorders are skipped.
	ok := lines[0] + `{"type":"marker","text":"load started"}` + "\n" + lines[1]
	rec, err := Read(strings.NewReader(ok), "x")
	if err != nil || len(rec.Samples) != 1 {
		t.Errorf("unknown line type: %v, %d samples", err, len(rec.Samples))
	}
}

// BenchmarkWrite is one sample written (the recorder's per-interval cost
// besides reading /proc).
func BenchmarkWrite(b *testing.B) {
	s, err := load.NewSampler(kernel.New("/")).Sample()
	if err != nil {
		b.Skip(err)
	}
	w, err := NewWriter(&bytes.Buffer{}, Header{Host: "x"})
	if err != nil {
		b.Fatal(err)
	}
	var sink bytes.Buffer
	w.w = &sink
	b.ReportAllocs()
	for b.Loop() {
		sink.Reset()
		if err := w.Write(s); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSampleAndWrite is the recorder's whole per-interval work.
func BenchmarkSampleAndWrite(b *testing.B) {
	smp := load.NewSampler(kernel.New("/"))
	var sink bytes.Buffer
	w, err := NewWriter(&sink, Header{Host: "x"})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		sink.Reset()
		s, err := smp.Sample()
		if err != nil {
			b.Skip(err)
		}
		if err := w.Write(s); err != nil {
			b.Fatal(err)
		}
	}
}
