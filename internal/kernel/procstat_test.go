package kernel

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"

	"github.com/prometheus/procfs"
)

// statFixtures are the real /proc/stat and /proc/net/softnet_stat files:
// the tree, its CPU ids and softnet widths (see PROVENANCE.md).
var statFixtures = []struct {
	tree    string
	cpus    []int
	columns []int // softnet_stat widths, per row
}{
	{"procfs", []int{0, 1, 2, 3, 4, 5, 6, 7}, []int{13, 13, 11, 9, 10}},
	{"node_exporter", []int{0, 1, 2, 3, 4, 5, 6, 7}, []int{11, 11, 11, 11}},
	// sysstat's trees have an offline cpu6 (root3, root4) and a hot-added cpu8.
	{"sysstat/root3", []int{0, 1, 2, 3, 4, 5, 7}, []int{11, 11, 11, 11, 11, 11, 11}},
	{"sysstat/root4", []int{0, 1, 2, 3, 4, 5, 7, 8}, []int{13, 13, 13, 13, 13, 13, 13, 13}},
}

// TestParseStatCPUsFixtures checks every per-CPU line of the real files
// against prometheus/procfs, the parser the load sampler used before.
func TestParseStatCPUsFixtures(t *testing.T) {
	for _, fx := range statFixtures {
		t.Run(fx.tree, func(t *testing.T) {
			data := readFixture(t, fx.tree+"/proc/stat")
			got, err := parseStatCPUs("/proc/stat", data)
			if err != nil {
				t.Fatal(err)
			}
			var ids []int
			for _, c := range got {
				ids = append(ids, c.CPU)
				if c.Columns != 10 {
					t.Errorf("cpu%d: %d columns, want 10", c.CPU, c.Columns)
				}
			}
			if !slices.Equal(ids, fx.cpus) {
				t.Fatalf("cpus %v, want %v", ids, fx.cpus)
			}
			pfs, err := procfs.NewFS(filepath.Join(fixtures, fx.tree, "proc"))
			if err != nil {
				t.Fatal(err)
			}
			ref, err := pfs.Stat()
			if err != nil {
				t.Fatal(err)
			}
			if len(ref.CPU) != len(got) {
				t.Fatalf("procfs has %d CPUs, we %d", len(ref.CPU), len(got))
			}
			for _, c := range got {
				r, ok := ref.CPU[int64(c.CPU)]
				if !ok {
					t.Fatalf("cpu%d not in procfs", c.CPU)
				}
				// Both give seconds, converted from the same ticks the same way.
				ours := []float64{c.User, c.Nice, c.System, c.Idle, c.IOWait, c.IRQ, c.SoftIRQ, c.Steal, c.Guest, c.GuestNice}
				theirs := []float64{r.User, r.Nice, r.System, r.Idle, r.Iowait, r.IRQ, r.SoftIRQ, r.Steal, r.Guest, r.GuestNice}
				for i := range ours {
					if ours[i] != theirs[i] {
						t.Errorf("cpu%d column %d: %v s, procfs %v s", c.CPU, i+1, ours[i], theirs[i])
					}
				}
			}
		})
	}
	// Values read by eye, in seconds: node_exporter's cpu7 line is
	// "cpu7 29098 268 10164 1139282 555 0 31 0 9 8" (ticks).
	got, _ := parseStatCPUs("x", readFixture(t, "node_exporter/proc/stat"))
	if c := got[7]; c.CPU != 7 || c.User != 290.98 || c.Nice != 2.68 || c.Idle != 11392.82 || c.SoftIRQ != 0.31 || c.Guest != 0.09 || c.GuestNice != 0.08 {
		t.Errorf("node_exporter cpu7: %+v", c)
	}
	// Every tick count converts to the decimal it stands for, and back.
	for _, ticks := range []uint64{0, 1, 3, 7, 29098, 1139282, 123456789} {
		sec := tickSeconds(ticks)
		if want, _ := strconv.ParseFloat(fmt.Sprintf("%d.%02d", ticks/100, ticks%100), 64); sec != want || Ticks(sec) != ticks {
			t.Errorf("%d ticks: %v s (want %v), back %d", ticks, sec, want, Ticks(sec))
		}
	}
}

// TestParseStatCPUsRealCapture reads the /proc/stat of a whole capture of
// a real 480-CPU machine (PCP's bigsys archive, a kernel that printed 9
// columns: no guest_nice) and checks every CPU's seconds against
// prometheus/procfs reading the same file.
func TestParseStatCPUsRealCapture(t *testing.T) {
	data := readFixture(t, "pcp/bigsys-root-hpbl920gen8.tgz!proc/stat")
	got, err := parseStatCPUs("/proc/stat", data)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 480 || got[0].CPU != 0 || got[479].CPU != 479 {
		t.Fatalf("%d CPUs, want cpu0…cpu479", len(got))
	}
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "proc"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "proc", "stat"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	pfs, err := procfs.NewFS(filepath.Join(dir, "proc"))
	if err != nil {
		t.Fatal(err)
	}
	ref, err := pfs.Stat()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range got {
		r := ref.CPU[int64(c.CPU)]
		ours := []float64{c.User, c.Nice, c.System, c.Idle, c.IOWait, c.IRQ, c.SoftIRQ, c.Steal, c.Guest, c.GuestNice}
		theirs := []float64{r.User, r.Nice, r.System, r.Idle, r.Iowait, r.IRQ, r.SoftIRQ, r.Steal, r.Guest, r.GuestNice}
		if c.Columns != 9 || !slices.Equal(ours, theirs) {
			t.Errorf("cpu%d: %d columns, %v s; procfs %v s", c.CPU, c.Columns, ours, theirs)
		}
	}
	// Read by eye: "cpu0 516 27 21355 1784436 37 1 25 0 0" (ticks).
	if c := got[0]; c.User != 5.16 || c.Nice != 0.27 || c.System != 213.55 || c.Idle != 17844.36 || c.IOWait != 0.37 || c.IRQ != 0.01 || c.SoftIRQ != 0.25 {
		t.Errorf("cpu0: %+v", c)
	}
}

func TestParseStatCPUs(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		want     []CPUStat
	}{
		{"2.6.24: 8 columns, out of order",
			"cpu  9 9 9 9 9 9 9 9\ncpu1 1 2 3 4 5 6 7 8\ncpu0 10 20 30 40 50 60 70 80\nintr 5 1 2\n",
			[]CPUStat{
				{CPU: 0, User: 0.1, Nice: 0.2, System: 0.3, Idle: 0.4, IOWait: 0.5, IRQ: 0.6, SoftIRQ: 0.7, Steal: 0.8, Columns: 8},
				{CPU: 1, User: 0.01, Nice: 0.02, System: 0.03, Idle: 0.04, IOWait: 0.05, IRQ: 0.06, SoftIRQ: 0.07, Steal: 0.08, Columns: 8},
			}},
		{"2.4: 4 columns", "cpu0 100 200 300 400\n", []CPUStat{{CPU: 0, User: 1, Nice: 2, System: 3, Idle: 4, Columns: 4}}},
		{"a future 11th column is ignored", "cpu3 100 200 300 400 500 600 700 800 900 1000 1100\n",
			[]CPUStat{{CPU: 3, User: 1, Nice: 2, System: 3, Idle: 4, IOWait: 5, IRQ: 6, SoftIRQ: 7, Steal: 8, Guest: 9, GuestNice: 10, Columns: 10}}},
		{"cpu line without counters, blank lines, no trailing newline", "cpu5\n\n\ncpu2 150", []CPUStat{{CPU: 2, User: 1.5, Columns: 1}}},
		{"counters up to 2^64-1 (seconds rounded to float64)", "cpu0 18446744073709551615 0 0 0\n", []CPUStat{{CPU: 0, User: 184467440737095516.15, Columns: 4}}},
		{"no cpu lines", "ctxt 5\nbtime 7\n", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseStatCPUs("x", []byte(tc.in))
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(tc.want) {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Errorf("line %d: %+v, want %+v", i, got[i], tc.want[i])
				}
			}
		})
	}
	for _, bad := range []struct{ in, want string }{
		{"cpu 1 2\ncpuX 1 2\n", `x:2: "cpuX" is not cpuN`},
		{"cpu-1 1 2\n", `x:1: "cpu-1" is not cpuN`},
		{"cpu0 1 2\ncpu0 3 4\n", "x:2: cpu0 listed twice"},
		{"cpu0 1 2.5\n", `x:1: cpu0 column 2: "2.5" is not a number`},
		{"cpu0 1 -2\n", `x:1: cpu0 column 2: "-2" is not a number`},
	} {
		_, err := parseStatCPUs("x", []byte(bad.in))
		var pe *ParseError
		if !errors.As(err, &pe) || err.Error() != bad.want {
			t.Errorf("%q: %v, want %s", bad.in, err, bad.want)
		}
	}
}

// TestParseSoftnetFixtures checks the real files against prometheus/procfs.
func TestParseSoftnetFixtures(t *testing.T) {
	for _, fx := range statFixtures {
		t.Run(fx.tree, func(t *testing.T) {
			got, err := parseSoftnet("/proc/net/softnet_stat", readFixture(t, fx.tree+"/proc/net/softnet_stat"))
			if err != nil {
				t.Fatal(err)
			}
			pfs, err := procfs.NewFS(filepath.Join(fixtures, fx.tree, "proc"))
			if err != nil {
				t.Fatal(err)
			}
			ref, err := pfs.NetSoftnetStat()
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(fx.columns) || len(ref) != len(got) {
				t.Fatalf("%d rows (procfs %d), want %d", len(got), len(ref), len(fx.columns))
			}
			for i, g := range got {
				r := ref[i]
				wantCPU := -1
				if g.Columns >= 13 {
					wantCPU = int(r.Index)
				}
				if g.Columns != fx.columns[i] || g.Columns != r.Width || g.CPU != wantCPU ||
					g.Processed != r.Processed || g.Dropped != r.Dropped || g.TimeSqueeze != r.TimeSqueezed ||
					g.CPUCollision != r.CPUCollision || g.ReceivedRPS != r.ReceivedRps ||
					g.FlowLimit != r.FlowLimitCount || g.Backlog != r.SoftnetBacklogLen {
					t.Errorf("row %d: %+v, procfs %+v", i, g, r)
				}
			}
		})
	}
	// Values read by eye from procfs's fixture: row 1 is CPU 1 with a
	// backlog of 0xdc; row 2 has a time_squeeze above 2^31.
	got, _ := parseSoftnet("x", readFixture(t, "procfs/proc/net/softnet_stat"))
	if got[1].CPU != 1 || got[1].Backlog != 0xdc || got[1].Processed != 0x953d1a || got[2].TimeSqueeze != 0xf0000769 || got[2].CPU != -1 {
		t.Errorf("procfs fixture: %+v", got)
	}
}

func TestParseSoftnet(t *testing.T) {
	got, err := parseSoftnet("x", []byte("\n1 2 3 0 0 0 0 0 0 a b c 7 ff\n\n"))
	if err != nil || len(got) != 1 {
		t.Fatalf("%+v %v", got, err)
	}
	// A 14th column (a future kernel) is ignored, but counted.
	if r := got[0]; r.Processed != 1 || r.ReceivedRPS != 10 || r.FlowLimit != 11 || r.Backlog != 12 || r.CPU != 7 || r.Columns != 14 {
		t.Errorf("%+v", r)
	}
	if got, err := parseSoftnet("x", nil); err != nil || len(got) != 0 {
		t.Errorf("empty file: %+v %v", got, err)
	}
	for _, bad := range []struct{ in, want string }{
		{"1 2 3 4 5 6 7 8\n", "x:1: 8 columns, want at least 9"},
		{"0 0 0 0 0 0 0 0 0\n0 0 0 0 0 0 0 0 g\n", `x:2: column 9: "g" is not a 32-bit hex number`},
		{"100000000 0 0 0 0 0 0 0 0\n", `x:1: column 1: "100000000" is not a 32-bit hex number`},
	} {
		_, err := parseSoftnet("x", []byte(bad.in))
		var pe *ParseError
		if !errors.As(err, &pe) || err.Error() != bad.want {
			t.Errorf("%q: %v, want %s", bad.in, err, bad.want)
		}
	}
}

func FuzzParseStatCPUs(f *testing.F) {
	f.Add([]byte("cpu  1 2 3 4\ncpu0 1 2 3 4 5 6 7 8 9 10\n"))
	f.Add([]byte("cpu7 1\ncpu3 2 2\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		got, err := parseStatCPUs("f", b)
		if err != nil {
			return
		}
		for i, c := range got {
			if c.Columns < 1 || c.Columns > 10 || (i > 0 && got[i-1].CPU >= c.CPU) {
				t.Fatalf("%+v", got)
			}
		}
	})
}

func FuzzParseSoftnet(f *testing.F) {
	f.Add([]byte("0 0 0 0 0 0 0 0 0\n1 2 3 4 5 6 7 8 9 a b c d\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		got, err := parseSoftnet("f", b)
		if err != nil {
			return
		}
		for _, r := range got {
			if r.Columns < 9 || (r.Columns < 13) != (r.CPU < 0) {
				t.Fatalf("%+v", r)
			}
		}
	})
}
