package setting

import (
	"errors"
	"fmt"
	"math/bits"
	"os"
	"regexp"
	"strconv"
	"strings"

	"github.com/irqpilot/irqpilot/internal/cpuset"
	"github.com/irqpilot/irqpilot/internal/kernel"
)

// Limits on values, far above what any real host uses and far below what
// would hurt it. A plan or journal value past one is refused with the limit.
const (
	// MaxCPUListLen bounds a cpulist or mask value: the longest real one,
	// every other CPU of an 8192-CPU kernel ("0,2,4,…"), is about 40 KB.
	MaxCPUListLen = 64 << 10
	// MaxFlowCnt bounds rps_flow_cnt per rx queue: 2^20 flows cost 8 MiB of
	// kernel memory per queue (8-byte rps_dev_flow entries); the kernel's
	// scaling.rst suggests 32768 per server. 2^29 would cost ~4-6 GB.
	MaxFlowCnt = 1 << 20
	// MaxSockFlowEntries bounds net.core.rps_sock_flow_entries: 2^24
	// entries cost 64 MiB; scaling.rst suggests 32768 for a moderately
	// loaded server.
	MaxSockFlowEntries = 1 << 24
)

// fileKind is a setting held in one kernel file below the FS root.
type fileKind struct {
	kind  Kind
	same  func(a, b string) (bool, error)
	check func(c *Change) error // path checks (fills Device, Queue, IRQ)
	// limit checks a value's range: irqpilot's sanity caps for a value to
	// write (recorded false), the kernel's own limits for a value a journal
	// recorded (recorded true: it was in force, or written by an older
	// irqpilot whose caps were wider). nil: no range.
	limit func(v string, recorded bool) error
	scope func(c *Change) Scope
	globs []string // every file of this kind on a machine (FS.GlobSettingFiles patterns)
	feat  *feature // the kernel feature it needs (nil: none probed)
}

func (k fileKind) Kind() Kind                     { return k.kind }
func (k fileKind) Key(c *Change) string           { return "path:" + c.Path }
func (k fileKind) Same(a, b string) (bool, error) { return k.same(a, b) }
func (k fileKind) Expected(c *Change) string      { return c.Value }
func (k fileKind) Scope(c *Change) Scope          { return k.scope(c) }
func (k fileKind) Globs() []string                { return k.globs }

func (k fileKind) Check(c *Change) error {
	if c.Path == "" {
		return fmt.Errorf("%s (%s): no kernel file", c.Target, k.kind)
	}
	if err := k.check(c); err != nil {
		return fmt.Errorf("%s (%s): %w", c.Target, k.kind, err)
	}
	if _, err := k.same(c.Value, c.Value); err != nil {
		return fmt.Errorf("%s (%s): value %q: %w", c.Target, k.kind, short(c.Value), err)
	}
	if k.limit != nil {
		if err := k.limit(c.Value, false); err != nil {
			return fmt.Errorf("%s (%s): %w", c.Target, k.kind, err)
		}
	}
	return nil
}

// CheckRecorded checks a journal entry: the same object and path rules as
// Check, and both values within the kernel's limits (not irqpilot's caps,
// so that a journal of an older irqpilot still reverts).
func (k fileKind) CheckRecorded(c *Change) error {
	if c.Path == "" {
		return fmt.Errorf("%s (%s): no kernel file", c.Target, k.kind)
	}
	if err := k.check(c); err != nil {
		return fmt.Errorf("%s (%s): %w", c.Target, k.kind, err)
	}
	return recordedValues(c, func(name, v string) error {
		if _, err := k.same(v, v); err != nil {
			return fmt.Errorf("%s (%s): %s %q: %w", c.Target, k.kind, name, short(v), err)
		}
		if k.limit != nil {
			if err := k.limit(v, true); err != nil {
				return fmt.Errorf("%s (%s): %s: %w", c.Target, k.kind, name, err)
			}
		}
		return nil
	})
}

// recordedValues runs check on a journal entry's value and, when one was
// recorded, its old value, with "value" or "old value" as the name for the
// error; it returns the first error.
func recordedValues(c *Change, check func(name, v string) error) error {
	err := check("value", c.Value)
	if err == nil && c.Old != "" {
		err = check("old value", c.Old)
	}
	return err
}

// short cuts a value for an error message.
func short(v string) string {
	if len(v) > 80 {
		return v[:77] + "..."
	}
	return v
}

func (k fileKind) Read(env *Env, c *Change) (string, error) {
	v, err := env.FS.ReadSettingFile(c.Path)
	if errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("%s: %w", c.Path, kernel.ErrUnsupported)
	}
	return v, err
}

func (k fileKind) Write(env *Env, c *Change, value string) error {
	return env.FS.WriteFile(c.Path, value)
}

func (k fileKind) Restore(env *Env, c *Change) error { return k.Write(env, c, c.Old) }

// Value comparisons.

func sameCPUList(a, b string) (bool, error) { return sameSets(cpuset.Parse, a, b) }
func sameMask(a, b string) (bool, error)    { return sameSets(cpuset.ParseMask, a, b) }

func sameSets(parse func(string) (cpuset.Set, error), a, b string) (bool, error) {
	if len(a) > MaxCPUListLen || len(b) > MaxCPUListLen {
		return false, fmt.Errorf("CPU list longer than %d bytes", MaxCPUListLen)
	}
	x, err := parse(strings.TrimSpace(a))
	if err != nil {
		return false, err
	}
	y, err := parse(strings.TrimSpace(b))
	if err != nil {
		return false, err
	}
	return x.Equal(y), nil
}

func sameInt(a, b string) (bool, error) {
	x, err := strconv.ParseInt(strings.TrimSpace(a), 10, 64)
	if err != nil {
		return false, fmt.Errorf("%q is not an integer", a)
	}
	y, err := strconv.ParseInt(strings.TrimSpace(b), 10, 64)
	if err != nil {
		return false, fmt.Errorf("%q is not an integer", b)
	}
	return x == y, nil
}

// roundPow2 is what the kernel shows after writing n to a flow-table size.
func roundPow2(v string) string {
	if n, err := strconv.ParseUint(strings.TrimSpace(v), 10, 64); err == nil && n > 1 && n <= 1<<62 {
		return strconv.FormatUint(1<<bits.Len64(n-1), 10)
	}
	return v
}

// checkIntRange checks an integer value against [0, max].
func checkIntRange(v string, max int64, what string) error {
	n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
	if err != nil {
		return fmt.Errorf("value %q is not an integer", v)
	}
	if n < 0 || n > max {
		return fmt.Errorf("%s %d is out of range (0 to %d)", what, n, max)
	}
	return nil
}

// DeviceNameOK reports whether name can be a network interface name: 1 to
// 15 bytes (IFNAMSIZ-1), no '/', no white space, not "." or "..".
func DeviceNameOK(name string) bool {
	if name == "" || len(name) > 15 || name == "." || name == ".." {
		return false
	}
	for _, r := range name {
		if r == '/' || r == ':' || r <= ' ' || r == 0x7f {
			return false
		}
	}
	return true
}

// queuePathRE matches the queue files steering kinds may write.
var queuePathRE = regexp.MustCompile(`^sys/class/net/([^/]+)/queues/(rx|tx)-([0-9]+)/([a-z_]+)$`)

// checkQueuePath checks that c.Path is file of queue dir (rx or tx) of a
// device and agrees with the change's Device and Queue, and fills them from
// it when a journal lacks them.
func checkQueuePath(c *Change, dir, file string) error {
	m := queuePathRE.FindStringSubmatch(c.Path)
	if m == nil || m[2] != dir || m[4] != file || !DeviceNameOK(m[1]) {
		return fmt.Errorf("path %q is not a %s-N/%s file of a network device", c.Path, dir, file)
	}
	q, err := strconv.Atoi(m[3])
	if err != nil || q > 1<<16 {
		return fmt.Errorf("path %q: queue %q is not valid", c.Path, m[3])
	}
	if c.Device != "" && c.Device != m[1] {
		return fmt.Errorf("path %q is not a queue of device %s", c.Path, c.Device)
	}
	if c.Queue != nil && *c.Queue != q {
		return fmt.Errorf("path %q is not queue %d of device %s", c.Path, *c.Queue, m[1])
	}
	c.Device = m[1]
	c.Queue = &q
	return nil
}

// RxQueuePath is an rx queue's steering file ("rps_cpus", "rps_flow_cnt").
func RxQueuePath(dev string, q int, file string) string {
	return fmt.Sprintf("sys/class/net/%s/queues/rx-%d/%s", dev, q, file)
}

// TxQueuePath is a tx queue's steering file ("xps_cpus").
func TxQueuePath(dev string, q int, file string) string {
	return fmt.Sprintf("sys/class/net/%s/queues/tx-%d/%s", dev, q, file)
}

func netScope(c *Change) Scope { return Scope{IRQ: -1, NetDevice: c.Device} }
