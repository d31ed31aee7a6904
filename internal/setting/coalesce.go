package setting

import (
	"errors"
	"fmt"
	"strings"

	"github.com/safchain/ethtool"
	"golang.org/x/sys/unix"

	"github.com/irqpilot/irqpilot/internal/host"
	"github.com/irqpilot/irqpilot/internal/kernel"
)

// coalesce: a NIC's interrupt coalescing (ethtool -C). The value is
// "key=value …" for the fields the plan names; the old value journaled has
// the same keys, so revert restores exactly those fields and nothing else.
type coalesce struct{}

// Ethtool reads and sets NIC coalescing.
type Ethtool interface {
	Coalesce(dev string) (*host.Coalesce, error)
	SetCoalesce(dev string, fields map[string]string) error
}

// liveEthtool talks to the live device.
type liveEthtool struct{}

func (liveEthtool) Coalesce(dev string) (*host.Coalesce, error) {
	facts, err := host.QueryEthtool([]string{dev})
	if err != nil {
		return nil, err
	}
	f := facts[dev]
	if f.Coalesce == nil {
		return nil, fmt.Errorf("%s coalescing (%s): %w", dev, f.CoalesceError, kernel.ErrUnsupported)
	}
	return f.Coalesce, nil
}

func (liveEthtool) SetCoalesce(dev string, fields map[string]string) error {
	err := host.SetCoalesce(dev, fields)
	if errors.Is(err, unix.EOPNOTSUPP) {
		return fmt.Errorf("%w: %v", kernel.ErrUnsupported, err)
	}
	return err
}

func (e *Env) ethtool() Ethtool {
	if e.Ethtool != nil {
		return e.Ethtool
	}
	return liveEthtool{}
}

func (e *Env) services() kernel.ServiceManager {
	if e.Services != nil {
		return e.Services
	}
	return e.FS.Services()
}

func (coalesce) Kind() Kind                { return KindCoalesce }
func (coalesce) Key(c *Change) string      { return "coalesce:" + c.Device }
func (coalesce) Expected(c *Change) string { return c.Value }
func (coalesce) Scope(c *Change) Scope     { return Scope{IRQ: -1, NetDevice: c.Device} }

func (coalesce) Same(a, b string) (bool, error) {
	return strings.Join(strings.Fields(a), " ") == strings.Join(strings.Fields(b), " "), nil
}

func (coalesce) Check(c *Change) error {
	if !DeviceNameOK(c.Device) {
		return fmt.Errorf("%s: %q is not a network device name", c.Target, c.Device)
	}
	if c.Path != "" {
		return fmt.Errorf("%s: coalescing has no file (path %q)", c.Target, c.Path)
	}
	m, _, err := parseKV(c.Value)
	if err != nil {
		return fmt.Errorf("%s coalescing: %w", c.Device, err)
	}
	// Check the wanted values before asking the device, so a bad value
	// stops the apply before anything is written.
	if err := host.SetCoalesceFields(&ethtool.Coalesce{}, m); err != nil {
		return fmt.Errorf("%s: %w", c.Device, err)
	}
	return nil
}

func parseKV(v string) (map[string]string, []string, error) {
	m := map[string]string{}
	var keys []string
	for _, f := range strings.Fields(v) {
		k, val, ok := strings.Cut(f, "=")
		if !ok || k == "" || val == "" {
			return nil, nil, fmt.Errorf("%q is not key=value", f)
		}
		if _, dup := m[k]; dup {
			return nil, nil, fmt.Errorf("%q: field %s given twice", v, k)
		}
		m[k] = val
		keys = append(keys, k)
	}
	if len(keys) == 0 {
		return nil, nil, fmt.Errorf("%q: no key=value field", v)
	}
	return m, keys, nil
}

func (coalesce) Read(env *Env, c *Change) (string, error) {
	if !env.FS.IsLive() && env.Ethtool == nil {
		return "", fmt.Errorf("%s coalescing: %w on a snapshot", c.Device, kernel.ErrUnsupported)
	}
	_, keys, err := parseKV(c.Value)
	if err != nil {
		return "", fmt.Errorf("%s coalescing: %w", c.Device, err)
	}
	k, err := env.ethtool().Coalesce(c.Device)
	if err != nil {
		return "", err
	}
	return CoalesceFields(k, keys)
}

// CoalesceFields formats the named fields of k as "key=value …".
func CoalesceFields(k *host.Coalesce, keys []string) (string, error) {
	onoff := map[bool]string{true: "on", false: "off"}
	cur := map[string]string{
		"rx_usecs": fmt.Sprint(k.RxUsecs), "rx_frames": fmt.Sprint(k.RxFrames),
		"tx_usecs": fmt.Sprint(k.TxUsecs), "tx_frames": fmt.Sprint(k.TxFrames),
		"adaptive_rx": onoff[k.AdaptiveRx], "adaptive_tx": onoff[k.AdaptiveTx],
	}
	parts := make([]string, 0, len(keys))
	for _, key := range keys {
		v, ok := cur[key]
		if !ok {
			return "", fmt.Errorf("coalescing field %q is not known", key)
		}
		parts = append(parts, key+"="+v)
	}
	return strings.Join(parts, " "), nil
}

func (coalesce) Write(env *Env, c *Change, value string) error {
	if !env.FS.IsLive() && env.Ethtool == nil {
		return fmt.Errorf("%s coalescing: %w on a snapshot", c.Device, kernel.ErrUnsupported)
	}
	m, _, err := parseKV(value)
	if err != nil {
		return err
	}
	return env.ethtool().SetCoalesce(c.Device, m)
}

func (k coalesce) Restore(env *Env, c *Change) error { return k.Write(env, c, c.Old) }

// CheckRecorded: the old value names exactly the fields the change set, so
// revert restores those and nothing else.
func (k coalesce) CheckRecorded(c *Change) error {
	if err := k.Check(c); err != nil {
		return err
	}
	if c.Old == "" {
		return nil
	}
	old, oldKeys, err := parseKV(c.Old)
	if err != nil {
		return fmt.Errorf("%s: old value: %w", c.Target, err)
	}
	_, keys, _ := parseKV(c.Value)
	if strings.Join(oldKeys, " ") != strings.Join(keys, " ") {
		return fmt.Errorf("%s: old value sets fields %v, the change %v", c.Target, oldKeys, keys)
	}
	if err := host.SetCoalesceFields(&ethtool.Coalesce{}, old); err != nil {
		return fmt.Errorf("%s: old value: %w", c.Target, err)
	}
	return nil
}
