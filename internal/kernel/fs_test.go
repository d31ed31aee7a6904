package kernel

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// tree writes files (path → content; content "->target" makes a symlink,
// a path ending in "/" a directory) below a new temporary root.
func tree(t *testing.T, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for p, c := range files {
		dst := filepath.Join(root, p)
		if strings.HasSuffix(p, "/") {
			if err := os.MkdirAll(dst, 0o755); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			t.Fatal(err)
		}
		if strings.HasPrefix(c, "->") {
			if err := os.Symlink(strings.TrimPrefix(c, "->"), dst); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.WriteFile(dst, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

func TestRecording(t *testing.T) {
	root := tree(t, map[string]string{
		"sys/devices/pci0000:00/0000:00:03.0/virtio2/net/eth0/address":              "52:54:00:12:34:56\n",
		"sys/devices/pci0000:00/0000:00:03.0/virtio2/net/eth0/queues/rx-0/rps_cpus": "0\n",
		"sys/class/net/eth0":            "->../../devices/pci0000:00/0000:00:03.0/virtio2/net/eth0",
		"proc/irq/38/smp_affinity_list": "0-1\n",
		"proc/irq/38/node":              "0\n",
	})
	f := New(root)
	if _, err := f.readString("proc/irq/38/node"); err != nil {
		t.Fatal(err)
	}
	if len(f.Recorded()) != 0 {
		t.Fatalf("recorded before StartRecording: %v", f.Recorded())
	}
	f.StartRecording()
	if s, err := f.readString("/sys/class/net/eth0/address"); err != nil || s != "52:54:00:12:34:56" {
		t.Fatalf("address = %q, %v", s, err)
	}
	if _, err := f.readDir("sys/class/net/eth0/queues"); err != nil {
		t.Fatal(err)
	}
	if !f.Exists("proc/irq/38") {
		t.Fatal("proc/irq/38 missing")
	}
	if _, err := f.ReadFile("proc/irq/38/missing"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("missing file: %v", err)
	}
	// Reading a directory fails with EISDIR: recorded as a read error.
	if _, err := f.ReadFile("proc/irq/38"); !errors.Is(err, syscall.EISDIR) {
		t.Fatalf("read of a directory: %v", err)
	}
	f.SaveSynthetic("managed.json", []byte(`{"36":true}`))
	f.StopRecording()
	if _, err := f.readString("proc/irq/38/smp_affinity_list"); err != nil {
		t.Fatal(err)
	}

	rec := f.Recorded()
	want := map[string]Access{
		"/sys/class/net/eth0/address": AccessFile,
		"/sys/class/net/eth0/queues":  AccessDir,
		"/proc/irq/38":                AccessStat | AccessFile,
		"/proc/irq/38/missing":        AccessFile,
	}
	if len(rec) != len(want) {
		t.Errorf("recorded %v, want %v", rec, want)
	}
	for p, a := range want {
		if rec[p] != a {
			t.Errorf("recorded[%s] = %v, want %v", p, rec[p], a)
		}
	}
	if b, ok := f.RecordedContent("/sys/class/net/eth0/address"); !ok || string(b) != "52:54:00:12:34:56\n" {
		t.Errorf("content = %q, %v", b, ok)
	}
	if _, ok := f.RecordedContent("/proc/irq/38/smp_affinity_list"); ok {
		t.Error("content recorded after StopRecording")
	}
	errs := f.RecordedErrors()
	if len(errs) != 1 || errs["/proc/irq/38"] != (ReadError{Op: "read", Errno: "EISDIR"}) {
		t.Errorf("errors = %v, want only /proc/irq/38 read EISDIR (ENOENT is not recorded)", errs)
	}
	if s := f.Synthetics(); string(s["managed.json"]) != `{"36":true}` {
		t.Errorf("synthetics = %v", s)
	}
}

func TestErrorsNameKernelPaths(t *testing.T) {
	root := tree(t, map[string]string{"proc/interrupts": "x"})
	f := New(root)
	_, err := f.ReadFile("sys/class/net/eth0/speed")
	if err == nil || err.Error() != "open /sys/class/net/eth0/speed: no such file or directory" {
		t.Fatalf("error = %v, want it to name the kernel path", err)
	}
	if strings.Contains(err.Error(), root) {
		t.Errorf("error %q names the disk path", err)
	}
	if !errors.Is(err, fs.ErrNotExist) || !errors.Is(err, syscall.ENOENT) {
		t.Errorf("error %v lost its errno", err)
	}
	if _, err := f.readDir("proc/irq"); err == nil || err.Error() != "open /proc/irq: no such file or directory" {
		t.Errorf("ReadDir error = %v", err)
	}
	if _, err := f.resolve("sys/class/net/eth0"); err == nil || strings.Contains(err.Error(), root) {
		t.Errorf("Resolve error = %v", err)
	}
}

func TestReplayReadErrors(t *testing.T) {
	root := tree(t, map[string]string{
		"sys/class/net/eth0/speed":     "",
		"irqpilot/" + ReadErrorsFile:   `{"/sys/class/net/eth0/speed": {"op": "read", "errno": "EINVAL"}}`,
		"sys/class/net/eth0/operstate": "up\n",
	})
	f := New(root)
	_, err := f.ReadFile("/sys/class/net/eth0/speed")
	if !errors.Is(err, syscall.EINVAL) || err.Error() != "read /sys/class/net/eth0/speed: invalid argument" {
		t.Fatalf("replayed error = %v, want EINVAL naming the kernel path", err)
	}
	if s, err := f.readString("sys/class/net/eth0/operstate"); err != nil || s != "up" {
		t.Fatalf("operstate = %q, %v", s, err)
	}
	// A replayed error is recorded again, so a capture of a snapshot keeps it.
	f.StartRecording()
	f.ReadFile("sys/class/net/eth0/speed")
	if e := f.RecordedErrors()["/sys/class/net/eth0/speed"]; e.Errno != "EINVAL" {
		t.Errorf("re-recorded error = %v", e)
	}
	// The live root never replays.
	if New("/").replay != nil {
		t.Error("live FS loaded a replay table")
	}
}

func TestReadSyntheticRecorded(t *testing.T) {
	root := tree(t, map[string]string{"irqpilot/ethtool/eth0.json": `{"combined":1}`})
	f := New(root)
	f.StartRecording()
	b, err := f.ReadSynthetic("ethtool/eth0.json")
	if err != nil || string(b) != `{"combined":1}` {
		t.Fatalf("ReadSynthetic = %q, %v", b, err)
	}
	if _, err := f.ReadSynthetic("../../etc/passwd"); err == nil {
		t.Error("ReadSynthetic left the synthetic directory")
	}
	if s := f.Synthetics(); string(s["ethtool/eth0.json"]) != `{"combined":1}` || len(s) != 1 {
		t.Errorf("synthetics = %v", s)
	}
}

func TestResolveLinks(t *testing.T) {
	root := tree(t, map[string]string{
		"sys/devices/pci0000:00/0000:00:03.0/virtio2/net/eth0/address": "x",
		"sys/devices/pci0000:00/0000:00:03.0/virtio2/driver":           "->../../../../bus/virtio/drivers/virtio_net",
		"sys/bus/virtio/drivers/virtio_net/":                           "",
		"sys/devices/pci0000:00/0000:00:03.0/virtio2/net/eth0/device":  "->../../../virtio2",
		"sys/class/net/eth0": "->/sys/devices/pci0000:00/0000:00:03.0/virtio2/net/eth0",
	})
	f := New(root)
	real, links, err := f.ResolveLinks("sys/class/net/eth0/device/driver")
	if err != nil {
		t.Fatal(err)
	}
	if real != "/sys/bus/virtio/drivers/virtio_net" {
		t.Errorf("real = %s", real)
	}
	want := []string{
		"/sys/class/net/eth0",
		"/sys/devices/pci0000:00/0000:00:03.0/virtio2/net/eth0/device",
		"/sys/devices/pci0000:00/0000:00:03.0/virtio2/driver",
	}
	if strings.Join(links, " ") != strings.Join(want, " ") {
		t.Errorf("links = %v, want %v", links, want)
	}
	// Failing part way still reports the links followed so far.
	_, links, err = f.ResolveLinks("sys/class/net/eth0/device/missing/x")
	if !errors.Is(err, fs.ErrNotExist) || len(links) != 2 {
		t.Errorf("partial: links %v, err %v", links, err)
	}
	// A loop is an error, not a hang.
	loop := tree(t, map[string]string{"a": "->b", "b": "->a"})
	if _, _, err := New(loop).ResolveLinks("a/x"); err == nil || !strings.Contains(err.Error(), "too many levels") {
		t.Errorf("loop: %v", err)
	}
}
