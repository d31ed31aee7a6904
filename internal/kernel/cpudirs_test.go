package kernel

import (
	"errors"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// openSnapshotFixture opens a capture archive for the test's duration.
func openSnapshotFixture(t *testing.T, p string) *FS {
	t.Helper()
	f, cleanup, err := OpenSnapshot(p)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cleanup)
	return f
}

// labSmall61 is irqpilot's capture of the lab's small shape on 6.1: an
// 8-CPU guest with 2 nodes, a virtio NIC behind a PCIe port (eth0), an
// e1000e (eth1), a virtio disk and an NVMe disk.
const labSmall61 = "../../testdata/snapshots/lab-small-6.1.tar.gz"

// ghw's capture of a 4-CPU machine whose CPUs 2 and 3 were taken offline.
const ghwOffline = "ghw/linux-amd64-offlineCPUs.tar.gz"

func TestCPUListFixtures(t *testing.T) {
	for _, c := range []struct {
		snap string
		want map[CPUListFile]string
	}{
		{filepath.Join(fixtures, ghwOffline), map[CPUListFile]string{
			CPUsOnline: "0-1", CPUsOffline: "2-3", CPUsPossible: "0-3", CPUsPresent: "0-3",
			CPUsIsolated: "", CPUsNohzFull: "",
		}},
		// nohz_full reads "  (null)" there.
		{labSmall61, map[CPUListFile]string{
			CPUsOnline: "0-7", CPUsOffline: "", CPUsPossible: "0-7", CPUsPresent: "0-7",
			CPUsIsolated: "", CPUsNohzFull: "",
		}},
	} {
		f := openSnapshotFixture(t, c.snap)
		for file, want := range c.want {
			got, err := f.CPUList(file)
			if err != nil || got.String() != want {
				t.Errorf("%s: CPUList(%s) = %q, %v; want %q", filepath.Base(c.snap), file, got, err, want)
			}
		}
	}
	// The directory tree of node_exporter's fixture: no possible file.
	f := New(filepath.Join(fixtures, "node_exporter"))
	if s, err := f.CPUList(CPUsOnline); err != nil || s.String() != "0-3" {
		t.Errorf("node_exporter online = %q, %v", s, err)
	}
	if _, err := f.CPUList(CPUsPossible); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("node_exporter possible: %v, want not-exist", err)
	}
}

// What captures and kernels put around a list: NUL padding, "(null)" for
// an unset mask; and a list that does not parse names its file.
func TestCPUListValues(t *testing.T) {
	f := New(tree(t, map[string]string{
		"sys/devices/system/cpu/online":    "0-3\n\x00",
		"sys/devices/system/cpu/nohz_full": "  (null)\n",
		"sys/devices/system/cpu/offline":   "\n",
		"sys/devices/system/cpu/present":   "0-x\n",
	}))
	for file, want := range map[CPUListFile]string{CPUsOnline: "0-3", CPUsNohzFull: "", CPUsOffline: ""} {
		if s, err := f.CPUList(file); err != nil || s.String() != want {
			t.Errorf("CPUList(%s) = %q, %v; want %q", file, s, err, want)
		}
	}
	if _, err := f.CPUList(CPUsPresent); err == nil || !strings.HasPrefix(err.Error(), "/sys/devices/system/cpu/present: ") {
		t.Errorf("CPUList(present) of 0-x: %v", err)
	}
	if p := CPUsPossible.Path(); p != "sys/devices/system/cpu/possible" {
		t.Errorf("CPUsPossible.Path() = %q", p)
	}
}

func TestCPUDirsAndCPUOnline(t *testing.T) {
	f := openSnapshotFixture(t, filepath.Join(fixtures, ghwOffline))
	ids, err := f.CPUDirs() // beside cpufreq, cpuidle, …
	if err != nil || !slices.Equal(ids, []int{0, 1, 2, 3}) {
		t.Errorf("CPUDirs = %v, %v", ids, err)
	}
	for cpu, want := range []bool{true, true, false, false} {
		if on, err := f.CPUOnline(cpu); err != nil || on != want {
			t.Errorf("CPUOnline(%d) = %v, %v; want %v", cpu, on, err, want)
		}
	}
	if _, err := f.CPUOnline(4); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("CPUOnline(4): %v, want not-exist", err)
	}
	if _, err := New(t.TempDir()).CPUDirs(); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("CPUDirs of an empty tree: %v, want not-exist", err)
	}

	tr := New(tree(t, map[string]string{
		"sys/devices/system/cpu/cpu0/":        "",
		"sys/devices/system/cpu/cpu12/":       "",
		"sys/devices/system/cpu/cpu2/":        "",
		"sys/devices/system/cpu/cpu01/":       "",
		"sys/devices/system/cpu/cpu-1/":       "",
		"sys/devices/system/cpu/cpu65537/":    "",
		"sys/devices/system/cpu/cpu/":         "",
		"sys/devices/system/cpu/cpufreq/":     "",
		"sys/devices/system/cpu/cpu2/online":  "0\n\x00",
		"sys/devices/system/cpu/cpu12/online": "2\n",
	}))
	if ids, err := tr.CPUDirs(); err != nil || !slices.Equal(ids, []int{0, 2, 12}) {
		t.Errorf("CPUDirs = %v, %v; want [0 2 12]", ids, err)
	}
	if on, err := tr.CPUOnline(2); err != nil || on {
		t.Errorf("CPUOnline(2) of %q = %v, %v", "0\\n\\x00", on, err)
	}
	if _, err := tr.CPUOnline(12); err == nil || !strings.Contains(err.Error(), "/sys/devices/system/cpu/cpu12/online") {
		t.Errorf("CPUOnline(12) of 2: %v", err)
	}
}
