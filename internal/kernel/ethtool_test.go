package kernel

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/safchain/ethtool"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

func TestEthtoolRefusals(t *testing.T) {
	et, err := OpenEthtool()
	if err != nil {
		t.Fatal(err)
	}
	defer et.Close()
	long := strings.Repeat("x", unix.IFNAMSIZ)
	if _, err := et.Coalesce(long); err == nil || !strings.Contains(err.Error(), "too long") {
		t.Errorf("long name: %v", err)
	}
	if err := et.PerQueue("lo", make([]byte, 4)); err == nil {
		t.Error("a per-queue request shorter than its header was issued")
	}
	// The driver's refusal comes back as the bare errno, which callers
	// print verbatim ("operation not supported") and match with errors.Is.
	if _, err := et.Coalesce("lo"); err != unix.EOPNOTSUPP {
		t.Errorf("lo coalesce: %#v, want EOPNOTSUPP", err)
	}
	if _, err := et.Channels("lo"); err != unix.EOPNOTSUPP {
		t.Errorf("lo channels: %#v, want EOPNOTSUPP", err)
	}
	if _, err := et.Coalesce("irqpilot-none0"); err != unix.ENODEV {
		t.Errorf("missing device: %#v, want ENODEV", err)
	}
}

// On a veth pair in a namespace of its own: the driver name and channel
// counts the kernel fills into heap buffers, and the driver's refusal of
// coalescing (veth has none) as a bare errno.
func TestEthtoolVeth(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("no ip")
	}
	ns := "irqp-kern-" + strconv.Itoa(os.Getpid()%100000)
	ip := func(args ...string) {
		t.Helper()
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %s: %v: %s", strings.Join(args, " "), err, out)
		}
	}
	ip("netns", "add", ns)
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", ns).Run() })
	ip("-n", ns, "link", "add", "ka", "numrxqueues", "3", "numtxqueues", "2", "type", "veth", "peer", "name", "kb")

	type result struct {
		driver        string
		ch            *ethtool.Channels
		getErr, setEr error
		err           error
	}
	done := make(chan result, 1)
	go func() {
		// The thread enters the namespace and is never handed back to the
		// scheduler: the goroutine exits locked, so the runtime drops it.
		runtime.LockOSThread()
		var r result
		defer func() { done <- r }()
		h, err := netns.GetFromName(ns)
		if err != nil {
			r.err = err
			return
		}
		defer h.Close()
		if r.err = netns.Set(h); r.err != nil {
			return
		}
		et, err := OpenEthtool()
		if err != nil {
			r.err = err
			return
		}
		defer et.Close()
		if r.driver, r.err = et.Driver("ka"); r.err != nil {
			return
		}
		if r.ch, r.err = et.Channels("ka"); r.err != nil {
			return
		}
		_, r.getErr = et.Coalesce("ka")
		r.setEr = et.SetCoalesce("ka", &ethtool.Coalesce{RxCoalesceUsecs: 8})
	}()
	r := <-done
	if r.err != nil {
		t.Fatal(r.err)
	}
	if r.driver != "veth" || r.ch.RxCount != 3 || r.ch.TxCount != 2 {
		t.Errorf("ka: driver %q channels %+v, want veth with 3 rx and 2 tx", r.driver, r.ch)
	}
	for what, err := range map[string]error{"get": r.getErr, "set": r.setEr} {
		if !errors.Is(err, unix.EOPNOTSUPP) {
			t.Errorf("veth coalesce %s: %v, want EOPNOTSUPP", what, err)
		}
	}
}

// eth0, read only: the driver name matches the driver sysfs links to.
func TestEthtoolDriverEth0(t *testing.T) {
	link, err := os.Readlink("/sys/class/net/eth0/device/driver")
	if err != nil {
		t.Skip("no eth0 with a device driver")
	}
	et, err := OpenEthtool()
	if err != nil {
		t.Fatal(err)
	}
	defer et.Close()
	d, err := et.Driver("eth0")
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Base(link); d != want {
		t.Errorf("eth0 driver %q, sysfs %q", d, want)
	}
}

func TestNVMeAdminRefusals(t *testing.T) {
	var cmd [NVMeAdminCmdSize]byte
	err := NVMeAdmin("/nonexistent/nvme9", &cmd)
	if !errors.Is(err, unix.ENOENT) || !strings.Contains(err.Error(), "/nonexistent/nvme9") {
		t.Errorf("missing device: %v", err)
	}
	// Not an NVMe device: the kernel's refusal comes back as the bare errno.
	if err := NVMeAdmin("/dev/null", &cmd); err != syscall.ENOTTY {
		t.Errorf("/dev/null: %#v, want ENOTTY", err)
	}
}
