package kernel

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/irqpilot/irqpilot/internal/livetest/liveroot"
)

// A held FS reads what a plain FS reads, sees a file rewritten in place
// (as the kernel and `echo > file` do), names the kernel path in errors,
// keeps at most its bound of files open and closes them on Release.
func TestHeldReadsFresh(t *testing.T) {
	big := strings.Repeat("0123456789abcde\n", 700) // 11200 bytes: more than one buffer
	root := tree(t, map[string]string{
		"proc/irq/36/smp_affinity_list":           "0-1\n",
		"sys/class/net/eth0/queues/rx-0/rps_cpus": "00000000,00000003\n",
		"sys/devices/system/cpu/online":           "0-255\n",
		"proc/interrupts":                         big,
		"sys/big":                                 big,
	})
	plain, held := New(root), New(root).Held(2)
	defer held.Release()
	for _, p := range []string{"proc/irq/36/smp_affinity_list", "/sys/class/net/eth0/queues/rx-0/rps_cpus", "proc/interrupts", "sys/big", "sys/devices/system/cpu/online"} {
		for i := 0; i < 2; i++ { // opened, then re-read
			want, _ := plain.readString(p)
			got, err := held.readString(p)
			if err != nil || got != want {
				t.Fatalf("held ReadString(%s) #%d = %d bytes, %v; plain read %d bytes", p, i, len(got), err, len(want))
			}
			wantB, _ := plain.ReadFile(p)
			gotB, err := held.ReadFile(p)
			if err != nil || string(gotB) != string(wantB) {
				t.Fatalf("held ReadFile(%s) #%d = %d bytes, %v; plain read %d bytes", p, i, len(gotB), err, len(wantB))
			}
		}
	}
	if n := held.HeldFiles(); n != 2 {
		t.Errorf("held %d files, want the bound 2", n)
	}
	// Rewritten in place (O_TRUNC, same inode), shorter and longer.
	aff := filepath.Join(root, "proc/irq/36/smp_affinity_list")
	for _, v := range []string{"1\n", "0,2-5,7\n"} {
		if err := os.WriteFile(aff, []byte(v), 0o644); err != nil {
			t.Fatal(err)
		}
		if got, err := held.readString("proc/irq/36/smp_affinity_list"); err != nil || got != strings.TrimSpace(v) {
			t.Errorf("after rewriting to %q: read %q, %v", v, got, err)
		}
	}
	if err := held.WriteFile("proc/irq/36/smp_affinity_list", "3"); err != nil {
		t.Fatal(err)
	}
	if got, _ := held.readString("proc/irq/36/smp_affinity_list"); got != "3" {
		t.Errorf("after FS.WriteFile 3: read %q", got)
	}
	// A missing file: ErrNotExist, naming the kernel path, nothing held.
	_, err := held.readString("proc/irq/99/smp_affinity_list")
	var pe *fs.PathError
	if !errors.Is(err, fs.ErrNotExist) || !errors.As(err, &pe) || pe.Path != "/proc/irq/99/smp_affinity_list" {
		t.Errorf("missing file: %v (want not-exist naming /proc/irq/99/smp_affinity_list)", err)
	}
	held.Release()
	if n := held.HeldFiles(); n != 0 {
		t.Errorf("%d files held after Release", n)
	}
	if got, _ := held.readString("proc/irq/36/smp_affinity_list"); got != "3" {
		t.Errorf("after Release: read %q", got)
	}
	if New(root).HeldFiles() != 0 {
		t.Error("a plain FS holds files")
	}
	New(root).Release() // a no-op
}

// A held FS opened on a snapshot replays the capture's recorded read
// errors, as the plain FS does.
func TestHeldReplaysRecordedErrors(t *testing.T) {
	root := tree(t, map[string]string{
		"sys/class/net/eth0/queues/tx-0/xps_cpus": "",
		"irqpilot/read-errors.json":               `{"/sys/class/net/eth0/queues/tx-0/xps_cpus":{"op":"read","errno":"ENOENT"}}`,
	})
	held := New(root).Held(0)
	defer held.Release()
	if _, err := held.readString("sys/class/net/eth0/queues/tx-0/xps_cpus"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("replayed error: %v", err)
	}
}

// On the live kernel, in a network namespace this test creates: a held
// rps_cpus reads what was written through another file descriptor, and
// after the device is deleted and re-created under the same name the held
// FS reads the new device's file (the old descriptor fails with ENODEV and
// is opened again). A held /proc/irq file reads as a fresh open does.
func TestHeldLive(t *testing.T) {
	if os.Getenv("IRQPILOT_HELD_CHILD") != "" {
		heldLiveChild(t)
		return
	}
	liveroot.Need(t)
	var rb [3]byte
	rand.Read(rb[:])
	ns := "irqp-held-" + hex.EncodeToString(rb[:])
	t.Cleanup(func() { _ = DelNetns(ns) })
	if err := AddNetns(ns); err != nil {
		t.Fatal(err)
	}
	// `ip netns exec` mounts the namespace's own /sys for the child.
	cmd := exec.Command("ip", "netns", "exec", ns, os.Args[0], "-test.run", "^TestHeldLive$", "-test.v", "-test.count", "1")
	cmd.Env = append(os.Environ(), "IRQPILOT_HELD_CHILD=1")
	out, err := cmd.CombinedOutput()
	t.Logf("child:\n%s", out)
	if err != nil || !strings.Contains(string(out), "--- PASS: TestHeldLive") {
		t.Fatalf("child in namespace %s: %v", ns, err)
	}
}

func heldLiveChild(t *testing.T) {
	ip := func(args ...string) {
		t.Helper()
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %s: %v %s", strings.Join(args, " "), err, out)
		}
	}
	add := func() {
		ip("link", "add", "hv0", "numrxqueues", "2", "type", "veth", "peer", "name", "hv1")
	}
	add()
	rps := "sys/class/net/hv0/queues/rx-1/rps_cpus"
	plain, held := New("/"), New("/").Held(0)
	defer held.Release()
	first, err := held.readString(rps)
	if err != nil {
		t.Fatal(err)
	}
	if err := plain.WriteFile(rps, "1"); err != nil {
		t.Fatal(err)
	}
	got, err := held.readString(rps)
	want, _ := plain.readString(rps)
	if err != nil || got != want || got == first {
		t.Fatalf("after writing 1: held read %q (%v), fresh open %q, before %q", got, err, want, first)
	}
	t.Logf("rps_cpus %q → %q", first, got)
	ip("link", "del", "hv0")
	if _, err := held.readString(rps); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("device gone: %v, want not-exist", err)
	}
	add()
	got, err = held.readString(rps)
	if err != nil || got != first {
		t.Errorf("re-created device: held read %q (%v), want its default %q", got, err, first)
	}
	// /proc/irq: read only, never written here.
	irqs, _ := plain.readDir("proc/irq")
	for _, n := range irqs {
		p := "proc/irq/" + n + "/smp_affinity_list"
		want, err := plain.readString(p)
		if err != nil {
			continue
		}
		for i := 0; i < 2; i++ {
			if got, err := held.readString(p); err != nil || got != want {
				t.Errorf("%s: held read #%d %q (%v), fresh open %q", p, i, got, err, want)
			}
		}
		break
	}
}
