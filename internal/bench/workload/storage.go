package workload

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// StorageWorkload is fio random reads on a file on the real disk. Its IRQ is
// kernel-managed; what a configuration places is fio relative to it.
type StorageWorkload struct {
	// Dir holds the test file (default /var/tmp: the root disk).
	Dir    string
	SizeMB int
	// Engine is fio's ioengine: "libaio" (default) or "psync" (one
	// synchronous read at a time: latency-bound, the IRQ-to-thread
	// distance matters most).
	Engine string
	// IODepth of libaio (default 16; psync is always 1).
	IODepth int
	file    string
}

// Name implements Workload.
func (w *StorageWorkload) Name() string { return "storage" }

// Prepare lays out the test file.
func (w *StorageWorkload) Prepare() (AppInfo, error) {
	if w.Dir == "" {
		w.Dir = "/var/tmp"
	}
	if w.SizeMB <= 0 {
		w.SizeMB = 256
	}
	switch w.Engine {
	case "":
		w.Engine = "libaio"
	case "libaio", "psync":
	default:
		return AppInfo{}, fmt.Errorf("storage workload: ioengine %q: want libaio or psync", w.Engine)
	}
	if w.Engine == "psync" {
		w.IODepth = 1
	}
	if w.IODepth <= 0 {
		w.IODepth = 16
	}
	f, err := os.CreateTemp(w.Dir, "irqpilot-fio-*.dat")
	if err != nil {
		return AppInfo{}, err
	}
	w.file = f.Name()
	f.Close()
	out, err := exec.Command("fio", "--name=layout", "--filename="+w.file, "--size="+strconv.Itoa(w.SizeMB)+"M",
		"--rw=write", "--bs=1M", "--create_only=0", "--end_fsync=1", "--output-format=terse").CombinedOutput()
	if err != nil {
		os.Remove(w.file)
		return AppInfo{}, fmt.Errorf("fio layout of %s: %v: %s", w.file, err, Tail(out, 300))
	}
	disk, err := DiskOf(w.file)
	if err != nil {
		os.Remove(w.file)
		return AppInfo{}, fmt.Errorf("storage workload: %w", err)
	}
	return AppInfo{Disk: disk}, nil
}

// Run implements Workload.
func (w *StorageWorkload) Run(ctx context.Context, d time.Duration, s Placement) (Result, error) {
	secs := strconv.Itoa(max(1, int(d.Round(time.Second)/time.Second)))
	out, err := runPinned(ctx, d, s.AppCPUs, []string{"fio", "--name=randread", "--filename=" + w.file,
		"--size=" + strconv.Itoa(w.SizeMB) + "M", "--rw=randread", "--bs=4k", "--direct=1", "--ioengine=" + w.Engine,
		"--iodepth=" + strconv.Itoa(w.IODepth), "--runtime=" + secs, "--time_based", "--output-format=json"})
	if err != nil {
		return Result{}, err
	}
	return ParseFio(out)
}

// Close removes the test file.
func (w *StorageWorkload) Close() error {
	if w.file == "" {
		return nil
	}
	err := os.Remove(w.file)
	w.file = ""
	return err
}

// CommandWorkload runs any command; Pattern's first group is the figure of
// merit. The command runs under the setup's application CPUs.
type CommandWorkload struct {
	Argv    []string
	Pattern string
	Unit    string
}

// Name implements Workload.
func (w *CommandWorkload) Name() string { return "command" }

// Prepare checks the command exists.
func (w *CommandWorkload) Prepare() (AppInfo, error) {
	if len(w.Argv) == 0 {
		return AppInfo{}, fmt.Errorf("command workload: no command given")
	}
	if _, err := exec.LookPath(w.Argv[0]); err != nil {
		return AppInfo{}, fmt.Errorf("command workload: %w", err)
	}
	if _, err := ParsePattern(nil, w.Pattern, w.Unit); err != nil && strings.Contains(err.Error(), "capture group") {
		return AppInfo{}, err
	}
	return AppInfo{}, nil
}

// Run implements Workload. The command should run about d by itself; it is
// stopped after d plus 30 s.
func (w *CommandWorkload) Run(ctx context.Context, d time.Duration, s Placement) (Result, error) {
	out, err := runPinned(ctx, d, s.AppCPUs, w.Argv)
	if err != nil {
		return Result{}, err
	}
	return ParsePattern(out, w.Pattern, w.Unit)
}

// Close implements Workload.
func (w *CommandWorkload) Close() error { return nil }

// DiskOf names the whole-disk block device holding path (vda for a file on
// /dev/vda or /dev/vda1), from the file's device number and
// /sys/dev/block/MAJ:MIN.
func DiskOf(path string) (string, error) {
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return "", fmt.Errorf("%s: %w", path, err)
	}
	major, minor := unix.Major(uint64(st.Dev)), unix.Minor(uint64(st.Dev))
	link := fmt.Sprintf("/sys/dev/block/%d:%d", major, minor)
	dev, err := filepath.EvalSymlinks(link)
	if err != nil {
		return "", fmt.Errorf("%s is on device %d:%d, not a block device (%w)", path, major, minor, err)
	}
	if _, err := os.Stat(filepath.Join(dev, "partition")); err == nil {
		dev = filepath.Dir(dev)
	}
	return filepath.Base(dev), nil
}
