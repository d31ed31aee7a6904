package setting

import (
	"errors"
	"fmt"
	"math"
	"strconv"

	"github.com/irqpilot/irqpilot/internal/kernel"
	"github.com/irqpilot/irqpilot/internal/kernel/netdev"
)

// napi-threaded, napi-defer-hard-irqs, napi-gro-flush-timeout,
// napi-irq-suspend-timeout: one value of one NAPI instance, read with
// napi-get and written with napi-set of the netdev generic-netlink family
// (per-NAPI values since 6.13, threaded since 6.17). A change names the
// instance by Device and NAPI id; ids are not stable across device
// reconfiguration, so every read checks the id still belongs to Device (by
// ifindex) and a change whose instance is gone is skipped, never applied to
// another.

// NAPIConn reads and sets NAPI instances (kernel/netdev's Client; tests
// use a fake).
type NAPIConn interface {
	NAPI(id uint32) (netdev.NAPI, error)
	SetNAPI(s netdev.NAPISet) error
}

// liveNAPI opens a netlink socket per call, in the calling thread's
// network namespace.
type liveNAPI struct{}

func (liveNAPI) NAPI(id uint32) (netdev.NAPI, error) {
	c, err := netdev.Open()
	if err != nil {
		return netdev.NAPI{}, err
	}
	defer c.Close()
	return c.NAPI(id)
}

func (liveNAPI) SetNAPI(s netdev.NAPISet) error {
	c, err := netdev.Open()
	if err != nil {
		return err
	}
	defer c.Close()
	return c.SetNAPI(s)
}

func (e *Env) napi() (NAPIConn, error) {
	if e.NAPI != nil {
		return e.NAPI, nil
	}
	if !e.FS.IsLive() {
		return nil, fmt.Errorf("NAPI instances: %w on a snapshot", kernel.ErrUnsupported)
	}
	return liveNAPI{}, nil
}

// napiKind is one attribute of a NAPI instance.
type napiKind struct {
	kind      Kind
	attr      string // the spec's name, for people and keys
	newMax    uint64 // irqpilot's cap on a value to write
	kernelMax uint64 // the kernel's limit (a journal's values)
	get       func(n netdev.NAPI) (uint64, bool)
	set       func(s *netdev.NAPISet, v uint64)
}

var (
	napiThreadedKind = napiKind{KindNAPIThreaded, "threaded", 1, 1,
		func(n netdev.NAPI) (uint64, bool) {
			if n.Threaded == nil {
				return 0, false
			}
			if *n.Threaded {
				return 1, true
			}
			return 0, true
		},
		func(s *netdev.NAPISet, v uint64) { on := v != 0; s.Threaded = &on }}
	napiDeferKind = napiKind{KindNAPIDeferHardIRQs, "defer-hard-irqs", MaxDeferHardIRQs, netdev.MaxDeferHardIRQs,
		func(n netdev.NAPI) (uint64, bool) {
			if n.DeferHardIRQs == nil {
				return 0, false
			}
			return uint64(*n.DeferHardIRQs), true
		},
		func(s *netdev.NAPISet, v uint64) { d := uint32(v); s.DeferHardIRQs = &d }}
	napiGROFlushKind = napiKind{KindNAPIGROFlushTimeout, "gro-flush-timeout", MaxNAPITimeoutNs, math.MaxUint64,
		func(n netdev.NAPI) (uint64, bool) {
			if n.GROFlushTimeout == nil {
				return 0, false
			}
			return *n.GROFlushTimeout, true
		},
		func(s *netdev.NAPISet, v uint64) { s.GROFlushTimeout = &v }}
	napiIRQSuspendKind = napiKind{KindNAPIIRQSuspendTimeout, "irq-suspend-timeout", MaxNAPITimeoutNs, math.MaxUint64,
		func(n netdev.NAPI) (uint64, bool) {
			if n.IRQSuspendTimeout == nil {
				return 0, false
			}
			return *n.IRQSuspendTimeout, true
		},
		func(s *netdev.NAPISet, v uint64) { s.IRQSuspendTimeout = &v }}
)

// featNAPISet: per-instance values are set with the netdev family's
// napi-set, found among the operations the generic-netlink controller
// lists for the family.
var featNAPISet = feature{name: "per-NAPI settings", probe: "napi-set in the netdev netlink family", napiSet: true}

func (napiKind) features() []*feature   { return []*feature{&featNAPISet} }
func (napiKind) needs(*Change) *feature { return &featNAPISet }

func (k napiKind) Kind() Kind                     { return k.kind }
func (k napiKind) Same(a, b string) (bool, error) { return sameUint(a, b) }
func (k napiKind) Expected(c *Change) string      { return c.Value }
func (k napiKind) Scope(c *Change) Scope          { return Scope{IRQ: -1, NetDevice: c.Device} }

func (k napiKind) Key(c *Change) string {
	return fmt.Sprintf("napi:%s:%d:%s", c.Device, derefNAPI(c.NAPI), k.attr)
}

func derefNAPI(p *uint32) uint32 {
	if p == nil {
		return 0
	}
	return *p
}

// checkObject: a device name, a NAPI id, no file.
func (k napiKind) checkObject(c *Change) error {
	if !DeviceNameOK(c.Device) {
		return fmt.Errorf("%s (%s): %q is not a network device name", c.Target, k.kind, c.Device)
	}
	if c.NAPI == nil || *c.NAPI == 0 {
		return fmt.Errorf("%s (%s): no NAPI instance id", c.Target, k.kind)
	}
	if c.Path != "" {
		return fmt.Errorf("%s (%s): a NAPI setting has no file (path %q)", c.Target, k.kind, c.Path)
	}
	return nil
}

func (k napiKind) Check(c *Change) error {
	if err := k.checkObject(c); err != nil {
		return err
	}
	if err := checkUintRange(c.Value, k.newMax, k.attr); err != nil {
		return fmt.Errorf("%s (%s): %w", c.Target, k.kind, err)
	}
	return nil
}

// CheckRecorded holds a journal's values to the kernel's limits.
func (k napiKind) CheckRecorded(c *Change) error {
	if err := k.checkObject(c); err != nil {
		return err
	}
	return recordedValues(c, func(name, v string) error {
		if err := checkUintRange(v, k.kernelMax, k.attr); err != nil {
			return fmt.Errorf("%s (%s): %s: %w", c.Target, k.kind, name, err)
		}
		return nil
	})
}

// instance reads c's NAPI instance and checks it still belongs to c.Device.
func (k napiKind) instance(env *Env, c *Change) (NAPIConn, netdev.NAPI, error) {
	conn, err := env.napi()
	if err != nil {
		return nil, netdev.NAPI{}, err
	}
	id := derefNAPI(c.NAPI)
	n, err := conn.NAPI(id)
	if errors.Is(err, netdev.ErrNoNAPI) {
		return nil, n, fmt.Errorf("%s napi %d: %w (%v: the device was removed or reconfigured; left alone)", c.Device, id, kernel.ErrUnsupported, err)
	}
	if err != nil {
		return nil, n, fmt.Errorf("%s napi %d: %w", c.Device, id, err)
	}
	ix, err := env.FS.IfIndex(c.Device)
	if err != nil {
		return nil, n, fmt.Errorf("%s napi %d: device ifindex: %w", c.Device, id, err)
	}
	if n.Ifindex != ix {
		return nil, n, fmt.Errorf("%s napi %d: %w (the id now belongs to ifindex %d, not %s's %d; left alone)", c.Device, id, kernel.ErrUnsupported, n.Ifindex, c.Device, ix)
	}
	return conn, n, nil
}

func (k napiKind) Read(env *Env, c *Change) (string, error) {
	_, n, err := k.instance(env, c)
	if err != nil {
		return "", err
	}
	v, ok := k.get(n)
	if !ok {
		return "", fmt.Errorf("%s napi %d %s: %w by this kernel (napi-set needs 6.13, threaded 6.17)", c.Device, n.ID, k.attr, kernel.ErrUnsupported)
	}
	return strconv.FormatUint(v, 10), nil
}

func (k napiKind) Write(env *Env, c *Change, value string) error {
	v, err := parseUint(value)
	if err != nil {
		return err
	}
	if v > k.kernelMax {
		return fmt.Errorf("%s napi %d %s %d is above the kernel's limit %d", c.Device, derefNAPI(c.NAPI), k.attr, v, k.kernelMax)
	}
	conn, n, err := k.instance(env, c)
	if err != nil {
		return err
	}
	s := netdev.NAPISet{ID: n.ID}
	k.set(&s, v)
	if err := conn.SetNAPI(s); err != nil {
		return fmt.Errorf("%s napi %d %s=%d: %w", c.Device, n.ID, k.attr, v, err)
	}
	return nil
}

func (k napiKind) Restore(env *Env, c *Change) error { return k.Write(env, c, c.Old) }

// NAPISetting is the change that sets one value of NAPI instance id of dev:
// kind is one of KindNAPIThreaded, KindNAPIDeferHardIRQs,
// KindNAPIGROFlushTimeout, KindNAPIIRQSuspendTimeout.
func NAPISetting(kind Kind, dev string, id uint32, value uint64, reason string) Change {
	attr := string(kind)
	if h, ok := registry[kind].(napiKind); ok {
		attr = h.attr
	}
	return Change{Kind: kind, Target: fmt.Sprintf("%s napi %d %s", dev, id, attr), Device: dev, NAPI: &id,
		Value: strconv.FormatUint(value, 10), Reason: reason}
}
