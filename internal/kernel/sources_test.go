package kernel

import (
	"errors"
	"io/fs"
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/procfs/blockdevice"
)

func TestParseCmdline(t *testing.T) {
	got := parseCmdline("BOOT_IMAGE=/vmlinuz ro quiet isolcpus=managed_irq,2-3 a=b=c -- isolcpus=1 single\n")
	want := []CmdlineParam{
		{Name: "BOOT_IMAGE", Value: "/vmlinuz", HasValue: true},
		{Name: "ro"}, {Name: "quiet"},
		{Name: "isolcpus", Value: "managed_irq,2-3", HasValue: true},
		{Name: "a", Value: "b=c", HasValue: true},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
}

// TestCmdlineLive reads this machine's /proc/cmdline through FS: every
// parameter is a word of the file, in order.
func TestCmdlineLive(t *testing.T) {
	raw, err := os.ReadFile("/proc/cmdline")
	if err != nil {
		t.Skip(err)
	}
	got, err := New("/").Cmdline()
	if err != nil {
		t.Fatal(err)
	}
	words := strings.Fields(string(raw))
	if len(got) == 0 || len(got) > len(words) {
		t.Fatalf("%d parameters of %q", len(got), raw)
	}
	for i, p := range got {
		w := p.Name
		if p.HasValue {
			w += "=" + p.Value
		}
		if w != words[i] {
			t.Errorf("parameter %d = %q, want %q", i, w, words[i])
		}
	}
}

// TestBlockStatLive reads each block device's stat through FS and checks
// it against prometheus/procfs's reading taken right after (counters only
// grow).
func TestBlockStatLive(t *testing.T) {
	devs, err := os.ReadDir("/sys/block")
	if err != nil || len(devs) == 0 {
		t.Skip("no /sys/block devices")
	}
	ref, err := blockdevice.NewFS("/proc", "/sys")
	if err != nil {
		t.Fatal(err)
	}
	live := New("/")
	for _, d := range devs {
		ours, err := live.BlockStat(d.Name())
		if err != nil {
			t.Fatal(err)
		}
		theirs, _, err := ref.SysBlockDeviceStat(d.Name())
		if err != nil {
			t.Fatal(err)
		}
		if ours.ReadIOs > theirs.ReadIOs || ours.WriteIOs > theirs.WriteIOs {
			t.Errorf("%s: ours %+v, procfs later read %d writes %d", d.Name(), ours, theirs.ReadIOs, theirs.WriteIOs)
		}
		r, w, err := live.BlockInFlight(d.Name())
		if err != nil || r < 0 || w < 0 {
			t.Errorf("%s: in flight %d %d %v", d.Name(), r, w, err)
		}
	}
	if _, err := live.BlockStat("no-such-disk"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing device: %v, want not-exist", err)
	}
}

func TestParseBlockStatErrors(t *testing.T) {
	for _, bad := range []struct{ in, want string }{
		{"1 2 3 4", "/x: want ≥ 5 fields"},
		{"a 0 0 0 1", "/x field 1: \"a\" is not a number"},
		{"1 0 0 0 -1 0", "/x field 5: \"-1\" is not a number"},
	} {
		if _, err := parseBlockStat("/x", bad.in); err == nil || !strings.HasPrefix(err.Error(), bad.want) {
			t.Errorf("%q: %v, want %q", bad.in, err, bad.want)
		}
	}
	if _, _, err := parseBlockInFlight("/x", "1"); err == nil {
		t.Error("one number in inflight: no error")
	}
}

// TestProcStartSelf: ProcStart of this process is its start time, and a
// process that does not exist is not-exist.
func TestProcStartSelf(t *testing.T) {
	live := New("/")
	start, err := live.ProcStart(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	procs, err := live.Processes()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range procs {
		if p.PID == os.Getpid() && p.StartTime != start {
			t.Errorf("Processes says start %d, ProcStart %d", p.StartTime, start)
		}
	}
	if start == 0 {
		t.Error("start time 0")
	}
	if _, err := live.ProcStart(1 << 30); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("pid 2^30: %v, want not-exist", err)
	}
}

// TestUptime reads /proc/uptime of the live machine and of trees whose
// file is missing or not a number of seconds.
func TestUptime(t *testing.T) {
	if up, err := New("/").Uptime(); err != nil || up <= 0 {
		t.Errorf("live uptime %v, %v", up, err)
	}
	for content, want := range map[string]string{"": "/proc/uptime: empty", "x 1\n": `/proc/uptime: "x" is not a number of seconds`} {
		if _, err := New(tree(t, map[string]string{"proc/uptime": content})).Uptime(); err == nil || !strings.HasSuffix(err.Error(), want) {
			t.Errorf("%q: %v, want …%s", content, err, want)
		}
	}
	if _, err := New(t.TempDir()).Uptime(); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("no file: %v", err)
	}
}
