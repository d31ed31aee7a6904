package kernel

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

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
