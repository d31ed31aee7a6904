package kernel

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/procfs"
)

// TestSoftirqsFixtures reads the real /proc/softirqs files through FS and
// checks the CPU ids of the header (every possible CPU) and the NET_RX and TIMER rows against
// prometheus/procfs (which reads columns by position).
func TestSoftirqsFixtures(t *testing.T) {
	for _, fx := range statFixtures {
		t.Run(fx.tree, func(t *testing.T) {
			sq, err := New(filepath.Join(fixtures, fx.tree)).Softirqs()
			if err != nil {
				t.Fatal(err)
			}
			pfs, err := procfs.NewFS(filepath.Join(fixtures, fx.tree, "proc"))
			if err != nil {
				t.Fatal(err)
			}
			ref, err := pfs.Softirqs()
			if err != nil {
				t.Fatal(err)
			}
			// The header names every possible CPU, offline ones too.
			var ids []int
			for i := range ref.NetRx {
				ids = append(ids, i)
			}
			if d := cmp.Diff(ids, sq.CPUs); d != "" {
				t.Errorf("header CPUs (-want +got):\n%s", d)
			}
			row := func(name string) []uint64 {
				for i, ty := range sq.Types {
					if ty == name {
						return sq.Counts[i]
					}
				}
				t.Fatalf("no %s row in %v", name, sq.Types)
				return nil
			}
			if d := cmp.Diff(ref.NetRx, row("NET_RX")); d != "" {
				t.Errorf("NET_RX (-procfs +ours):\n%s", d)
			}
			if d := cmp.Diff(ref.Timer, row("TIMER")); d != "" {
				t.Errorf("TIMER (-procfs +ours):\n%s", d)
			}
		})
	}
}

func TestParseSoftirqs(t *testing.T) {
	// Sparse CPU ids are kept (procfs would lose them).
	sq, err := parseSoftirqs("x", []byte("    CPU0  CPU3\n HI: 1 2\n NET_RX: 30 40\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := &Softirqs{CPUs: []int{0, 3}, Types: []string{"HI", "NET_RX"}, Counts: [][]uint64{{1, 2}, {30, 40}}}
	if d := cmp.Diff(want, sq); d != "" {
		t.Errorf("sparse (-want +got):\n%s", d)
	}
	for _, bad := range []struct{ in, want string }{
		{"", "x:1: empty file"},
		{"CPU0 CPUx\n", "x:1: header field \"CPUx\""},
		{"CPU0 CPU1\nHI: 1\n", "x:2: HI: 1 counts for 2 CPUs"},
		{"CPU0\nHI: 1\nNET_RX: z\n", "x:3: NET_RX CPU0: count \"z\""},
		{"CPU0\nHI 1\n", "x:2: no label"},
	} {
		if _, err := parseSoftirqs("x", []byte(bad.in)); err == nil || !strings.HasPrefix(err.Error(), bad.want) {
			t.Errorf("%q: %v, want %q", bad.in, err, bad.want)
		}
	}
}

func FuzzParseSoftirqs(f *testing.F) {
	f.Add([]byte("    CPU0  CPU1\n HI: 1 2\n NET_RX: 30 40\n"))
	f.Add([]byte("CPU0\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		sq, err := parseSoftirqs("fuzz", b)
		if err != nil {
			return
		}
		for _, row := range sq.Counts {
			if len(row) != len(sq.CPUs) {
				t.Fatalf("row of %d for %d CPUs", len(row), len(sq.CPUs))
			}
		}
	})
}
