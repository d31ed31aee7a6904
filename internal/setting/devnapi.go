package setting

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"syscall"

	"github.com/irqpilot/irqpilot/internal/kernel"
)

// Shared by the device-wide NAPI kinds (devthreaded.go, devdefer.go,
// devgroflush.go): a decimal file directly below sys/class/net/DEV.

// Limits on NAPI values. New values are capped far below what the kernel
// takes; a journal's values are held to the kernel's own limits.
const (
	// MaxDeferHardIRQs bounds napi_defer_hard_irqs for a plan: a count of
	// empty polls before the IRQ is re-armed; real setups use 2 to a few
	// hundred. The kernel's limit is S32_MAX.
	MaxDeferHardIRQs = 1 << 20
	// MaxNAPITimeoutNs bounds gro_flush_timeout and irq_suspend_timeout
	// for a plan: 100 ms (real setups: 10-200 µs flush, ~20 ms suspend).
	// A longer deferral could leave a queue unserviced that long.
	MaxNAPITimeoutNs = 100_000_000
)

var devFileRE = regexp.MustCompile(`^sys/class/net/([^/]+)/([a-z_]+)$`)

// checkDevFile checks that c.Path is file of a network device, agrees with
// c.Device, and fills Device from it.
func checkDevFile(c *Change, file string) error {
	m := devFileRE.FindStringSubmatch(c.Path)
	if m == nil || m[2] != file || !DeviceNameOK(m[1]) {
		return fmt.Errorf("path %q is not the %s file of a network device (sys/class/net/DEV/%s)", c.Path, file, file)
	}
	if c.Device != "" && c.Device != m[1] {
		return fmt.Errorf("path %q is not a file of device %s", c.Path, c.Device)
	}
	c.Device = m[1]
	return nil
}

// DevPath is a device's sysfs file ("threaded", "napi_defer_hard_irqs",
// "gro_flush_timeout").
func DevPath(dev, file string) string { return "sys/class/net/" + dev + "/" + file }

// sameUint compares two unsigned decimal values (up to 2^64-1).
func sameUint(a, b string) (bool, error) {
	x, err := parseUint(a)
	if err != nil {
		return false, err
	}
	y, err := parseUint(b)
	if err != nil {
		return false, err
	}
	return x == y, nil
}

func parseUint(v string) (uint64, error) {
	n, err := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
	if err != nil {
		if strings.HasPrefix(strings.TrimSpace(v), "-") {
			return 0, fmt.Errorf("%q is negative", v)
		}
		return 0, fmt.Errorf("%q is not an unsigned integer", v)
	}
	return n, nil
}

// checkUintRange checks an unsigned value against [0, max].
func checkUintRange(v string, max uint64, what string) error {
	n, err := parseUint(v)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if n > max {
		return fmt.Errorf("%s %d is out of range (0 to %d)", what, n, max)
	}
	return nil
}

// devFile is a decimal file directly below sys/class/net/DEV.
type devFile struct{ fileKind }

// Read: an empty file (a capture that archived it unread) holds no value.
func (k devFile) Read(env *Env, c *Change) (string, error) {
	v, err := k.fileKind.Read(env, c)
	if err == nil && strings.TrimSpace(v) == "" {
		return "", fmt.Errorf("%s: no value recorded: %w", c.Path, kernel.ErrUnsupported)
	}
	return v, err
}

// Write: the kernel refuses these files on a device without NAPI instances
// (EIO or EOPNOTSUPP from threaded): unsupported there, not a failure.
func (k devFile) Write(env *Env, c *Change, value string) error {
	err := k.fileKind.Write(env, c, value)
	var we *kernel.WriteError
	if errors.As(err, &we) && (errors.Is(err, kernel.ErrUnsupported) || we.Errno == syscall.EIO) && we.Errno != 0 {
		return fmt.Errorf("%s: %w: %s has no NAPI instance (a veth gets them with GRO on) (%v)", c.Path, kernel.ErrUnsupported, c.Device, err)
	}
	return err
}

func (k devFile) Restore(env *Env, c *Change) error { return k.Write(env, c, c.Old) }

// with names the feature the file is.
func (k devFile) with(f *feature) devFile { k.feat = f; return k }

// devFeature is a file every network device has on a kernel that knows it.
func devFeature(name, file string) feature {
	return feature{name: name, probe: DevPath("DEV", file), glob: "sys/class/net/*/" + file, evidence: "sys/class/net/*/ifindex"}
}

// devFileKind is a decimal file directly below sys/class/net/DEV.
func devFileKind(kind Kind, file string, newMax, kernelMax uint64, what string) devFile {
	return devFile{fileKind{
		kind:  kind,
		same:  sameUint,
		check: func(c *Change) error { return checkDevFile(c, file) },
		limit: func(v string, recorded bool) error {
			if recorded {
				return checkUintRange(v, kernelMax, what)
			}
			return checkUintRange(v, newMax, what)
		},
		scope: netScope,
		globs: []string{"sys/class/net/*/" + file},
	}}
}
