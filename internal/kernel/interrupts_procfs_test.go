package kernel

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prometheus/procfs"
)

// procfsInterrupts parses data with prometheus/procfs, the reference this
// parser is measured and checked against. procfs reads <dir>/interrupts
// through a Proc handle, so dir also needs a process directory.
func procfsInterrupts(tb testing.TB, dir string) procfs.Interrupts {
	tb.Helper()
	pfs, err := procfs.NewFS(dir)
	if err != nil {
		tb.Fatal(err)
	}
	p, err := pfs.Proc(1)
	if err != nil {
		tb.Fatal(err)
	}
	ints, err := p.Interrupts()
	if err != nil {
		tb.Fatal(err)
	}
	return ints
}

// procDir writes data as <tmp>/interrupts (plus the <tmp>/1 that procfs
// needs) and returns the directory.
func procDir(tb testing.TB, data []byte) string {
	tb.Helper()
	dir := tb.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "interrupts"), data, 0o644); err != nil {
		tb.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "1"), 0o755); err != nil {
		tb.Fatal(err)
	}
	return dir
}

// TestWhereProcfsIsWrong shows, on real files, the two cases where
// prometheus/procfs gives wrong answers and this parser does not.
func TestWhereProcfsIsWrong(t *testing.T) {
	t.Run("offline CPU columns", func(t *testing.T) {
		// sysstat root4: header "CPU0 … CPU5 CPU7 CPU8", CPU6 offline.
		data := readFixture(t, "sysstat/root4/proc/interrupts")
		ours, err := parseInterrupts("root4", data)
		if err != nil {
			t.Fatal(err)
		}
		theirs := procfsInterrupts(t, procDir(t, data))
		// procfs: counts are positional strings with no CPU ids, so the
		// obvious reading Values[cpu] gives CPU 8's local timer count
		// (12456) for CPU 7, and CPU 8 has no value at all.
		loc := theirs["LOC"].Values
		if len(loc) != 8 || loc[7] != "12456" {
			t.Fatalf("procfs LOC values %v: fixture or procfs changed", loc)
		}
		if got := countAt(t, ours, ours.Summary("LOC"), 7); got != 12605877 {
			t.Errorf("ours: LOC on CPU7 = %d, want 12605877", got)
		}
		if got := countAt(t, ours, ours.Summary("LOC"), 8); got != 12456 {
			t.Errorf("ours: LOC on CPU8 = %d, want 12456", got)
		}
		// xhci IRQ 27 fired 50 times on CPU 8, the last column.
		if v := theirs["27"].Values; len(v) != 8 || v[7] != "50" {
			t.Fatalf("procfs irq 27 values %v", v)
		}
		if got := countAt(t, ours, ours.Line(27), 8); got != 50 {
			t.Errorf("ours: irq 27 on CPU8 = %d, want 50", got)
		}
	})
	t.Run("glued arm64 IPI rows", func(t *testing.T) {
		data := readFixture(t, "node_exporter/proc/interrupts_aarch64")
		ours, err := parseInterrupts("aarch64", data)
		if err != nil {
			t.Fatal(err)
		}
		theirs := procfsInterrupts(t, procDir(t, data))
		// procfs cuts the last character off "IPI0:2768808080" to make
		// the key, and shifts every count one column left.
		if _, ok := theirs["IPI0"]; ok {
			t.Fatal("procfs now has IPI0: update this test")
		}
		bad, ok := theirs["IPI0:276880808"]
		if !ok || bad.Values[0] != "2844211768" || bad.Values[7] != "Rescheduling" {
			t.Fatalf("procfs IPI0 row is %+v: fixture or procfs changed", bad)
		}
		ipi0 := ours.Summary("IPI0")
		if ipi0 == nil || ipi0.Counts[0] != 2768808080 || ipi0.Counts[1] != 2844211768 || ipi0.Counts[7] != 2154252810 ||
			ipi0.Description != "Rescheduling interrupts" {
			t.Errorf("ours: IPI0 = %+v", ipi0)
		}
		// The non-glued rows agree.
		if theirs["IPI1"].Values[0] != "357815098" || ours.Summary("IPI1").Counts[0] != 357815098 {
			t.Error("IPI1 differs")
		}
	})
}

// procfsReadLimit is how much of a file prometheus/procfs reads
// (parsers.ReadFileNoStat: io.LimitReader(f, 1 MiB)).
const procfsReadLimit = 1 << 20

// pcpWithin returns the 1152-CPU pcp capture cut to fit in limit bytes, by
// whole rows: the header, as many numbered IRQ rows as fit, and every
// summary row. Every line is a real line of the capture.
func pcpWithin(tb testing.TB, limit int) (data []byte, nIRQ, nSummary int) {
	tb.Helper()
	lines := strings.SplitAfter(string(readFixture(tb, "pcp/interrupts-1152cpu-x86_64.bz2")), "\n")
	var irqs, sums []string
	for _, l := range lines[1:] {
		if f := strings.TrimSpace(l); f != "" && f[0] >= '0' && f[0] <= '9' {
			irqs = append(irqs, l)
		} else if f != "" {
			sums = append(sums, l)
		}
	}
	size := len(lines[0])
	for _, l := range sums {
		size += len(l)
	}
	out := []byte(lines[0])
	for _, l := range irqs {
		if size+len(l) > limit {
			break
		}
		size += len(l)
		out = append(out, l...)
		nIRQ++
	}
	for _, l := range sums {
		out = append(out, l...)
	}
	return out, nIRQ, len(sums)
}

func TestProcfsFailsOnLargeFile(t *testing.T) {
	data := readFixture(t, "pcp/interrupts-1152cpu-x86_64.bz2")
	ours, err := parseInterrupts("pcp", data)
	if err != nil || len(ours.Lines) != 1034+22 {
		t.Fatalf("ours: %v, %d rows", err, len(ours.Lines))
	}
	// procfs reads only the first MiB of the 13 MB file, so its last row
	// is cut short and parseInterrupts slices past the end of it.
	dir := procDir(t, data)
	panicked := func() (p any) {
		defer func() { p = recover() }()
		procfsInterrupts(t, dir)
		return nil
	}()
	if panicked == nil {
		t.Fatal("procfs parsed the 1152-CPU file: update this test and BenchmarkInterrupts")
	}
	t.Logf("procfs on the 1152-CPU file: panic %v", panicked)
	// On the cut-down file both agree on the rows and the values.
	small, nIRQ, nSum := pcpWithin(t, procfsReadLimit)
	in, err := parseInterrupts("pcp-1MiB", small)
	if err != nil || len(in.Lines) != nIRQ+nSum || nIRQ < 50 {
		t.Fatalf("ours on cut file: %v, %d rows, want %d+%d", err, len(in.Lines), nIRQ, nSum)
	}
	theirs := procfsInterrupts(t, procDir(t, small))
	if len(theirs) != nIRQ+nSum {
		t.Fatalf("procfs: %d rows, want %d", len(theirs), nIRQ+nSum)
	}
	for _, l := range in.Lines {
		v := theirs[l.Name].Values
		if len(v) != len(l.Counts) {
			t.Fatalf("row %s: procfs %d values, ours %d", l.Name, len(v), len(l.Counts))
		}
		for i := range v {
			if v[i] != utoa(l.Counts[i]) {
				t.Fatalf("row %s column %d: procfs %s, ours %d", l.Name, i, v[i], l.Counts[i])
			}
		}
	}
}

// BenchmarkInterrupts compares this parser with prometheus/procfs on the
// same file, each reading it from disk on every iteration. The input is the
// 1152-CPU pcp capture cut (by whole rows) to 1 MiB, the most procfs can read;
// "irqpilot-full" is ours on the whole 13 MB file, which procfs cannot parse:
//
//	go test -run '^$' -bench BenchmarkInterrupts -benchmem ./internal/kernel/
func BenchmarkInterrupts(b *testing.B) {
	small, nIRQ, nSum := pcpWithin(b, procfsReadLimit)
	dir := procDir(b, small)
	fs := New(dir)
	b.Run("irqpilot", func(b *testing.B) {
		b.SetBytes(int64(len(small)))
		b.ReportAllocs()
		for b.Loop() {
			raw, err := fs.ReadFile("interrupts")
			if err != nil {
				b.Fatal(err)
			}
			in, err := parseInterrupts("interrupts", raw)
			if err != nil || len(in.Lines) != nIRQ+nSum {
				b.Fatal(err)
			}
		}
	})
	b.Run("procfs", func(b *testing.B) {
		b.SetBytes(int64(len(small)))
		b.ReportAllocs()
		for b.Loop() {
			if ints := procfsInterrupts(b, dir); len(ints) != nIRQ+nSum {
				b.Fatal(len(ints))
			}
		}
	})
	full := readFixture(b, "pcp/interrupts-1152cpu-x86_64.bz2")
	fullFS := New(procDir(b, full))
	b.Run("irqpilot-full", func(b *testing.B) {
		b.SetBytes(int64(len(full)))
		b.ReportAllocs()
		for b.Loop() {
			raw, err := fullFS.ReadFile("interrupts")
			if err != nil {
				b.Fatal(err)
			}
			if in, err := parseInterrupts("interrupts", raw); err != nil || len(in.Lines) != 1056 {
				b.Fatal(err)
			}
		}
	})
}
