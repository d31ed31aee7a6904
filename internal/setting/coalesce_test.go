package setting

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/irqpilot/irqpilot/internal/host"
	"github.com/irqpilot/irqpilot/internal/kernel"
)

func TestParseKV(t *testing.T) {
	m, keys, err := parseKV("  tx_frames=9 rx_usecs=8\tadaptive_rx=off ")
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"tx_frames", "rx_usecs", "adaptive_rx"}; !cmp.Equal(keys, want) {
		t.Errorf("keys = %v, want %v (the order of the value)", keys, want)
	}
	if want := map[string]string{"tx_frames": "9", "rx_usecs": "8", "adaptive_rx": "off"}; !cmp.Equal(m, want) {
		t.Errorf("fields = %v, want %v", m, want)
	}
	for _, bad := range []struct{ in, msg string }{
		{"rx_usecs", `"rx_usecs" is not key=value`},
		{"=8", `"=8" is not key=value`},
		{"rx_usecs=", `"rx_usecs=" is not key=value`},
		{"rx_usecs=1 rx_usecs=2", "field rx_usecs given twice"},
		{"  ", "no key=value field"},
	} {
		_, _, err := parseKV(bad.in)
		if err == nil || !strings.Contains(err.Error(), bad.msg) {
			t.Errorf("parseKV(%q) error = %v, want %q", bad.in, err, bad.msg)
		}
	}
}

// numbered returns a Coalesce whose every field holds a distinct value, so a
// test sees any field that changes when it should not.
func numbered() host.Coalesce {
	return host.Coalesce{RxUsecs: 1, RxFrames: 2, TxUsecs: 3, TxFrames: 4, AdaptiveRx: true, AdaptiveTx: false,
		RxUsecsIRQ: 5, RxFramesIRQ: 6, TxUsecsIRQ: 7, TxFramesIRQ: 8, RateSampleInt: 9}
}

// fakeEthtool holds the coalescing of a few devices.
type fakeEthtool struct {
	devs map[string]*host.Coalesce
	sets []string // "dev key=value" of every field set, in order of the keys
}

func (f *fakeEthtool) Coalesce(dev string) (*host.Coalesce, error) {
	k, ok := f.devs[dev]
	if !ok {
		return nil, fmt.Errorf("%s: %w", dev, kernel.ErrUnsupported)
	}
	cp := *k
	return &cp, nil
}

func (f *fakeEthtool) SetCoalesce(dev string, fields map[string]string) error {
	k, ok := f.devs[dev]
	if !ok {
		return fmt.Errorf("%s: %w", dev, kernel.ErrUnsupported)
	}
	next := *k
	for key, v := range fields {
		n, _ := strconv.ParseUint(v, 10, 32)
		switch key {
		case "rx_usecs":
			next.RxUsecs = uint32(n)
		case "rx_frames":
			next.RxFrames = uint32(n)
		case "tx_usecs":
			next.TxUsecs = uint32(n)
		case "tx_frames":
			next.TxFrames = uint32(n)
		case "adaptive_rx":
			next.AdaptiveRx = v == "on"
		case "adaptive_tx":
			next.AdaptiveTx = v == "on"
		default:
			return fmt.Errorf("field %q", key)
		}
		f.sets = append(f.sets, dev+" "+key+"="+v)
	}
	*k = next
	return nil
}

func TestCoalesceCheck(t *testing.T) {
	runCheck(t, coalesce{}, []checkCase{
		{"valid", Change{Device: "eth0", Value: "rx_usecs=8 adaptive_rx=off"}, ""},
		{"every field", Change{Device: "enp1s0f0np0", Value: "rx_usecs=0 rx_frames=1 tx_usecs=2 tx_frames=3 adaptive_rx=on adaptive_tx=off"}, ""},
		{"max", Change{Device: "eth0", Value: "rx_usecs=4294967295"}, ""},
		{"no device", Change{Value: "rx_usecs=8"}, "is not a network device name"},
		{"dotdot device", Change{Device: "..", Value: "rx_usecs=8"}, "is not a network device name"},
		{"slash device", Change{Device: "eth0/../x", Value: "rx_usecs=8"}, "is not a network device name"},
		{"alias device", Change{Device: "eth0:1", Value: "rx_usecs=8"}, "is not a network device name"},
		{"space device", Change{Device: "eth 0", Value: "rx_usecs=8"}, "is not a network device name"},
		{"long device", Change{Device: "abcdefghijklmnop", Value: "rx_usecs=8"}, "is not a network device name"},
		{"a path", Change{Device: "eth0", Path: "etc/shadow", Value: "rx_usecs=8"}, "has no file"},
		{"empty", Change{Device: "eth0", Value: ""}, "no key=value field"},
		{"unknown field", Change{Device: "eth0", Value: "rx_usecs_irq=8"}, "is not known"},
		{"negative", Change{Device: "eth0", Value: "rx_usecs=-1"}, "want a decimal number"},
		{"leading zero", Change{Device: "eth0", Value: "rx_usecs=08"}, "want a decimal number"},
		{"past 32 bits", Change{Device: "eth0", Value: "rx_usecs=4294967296"}, "want a decimal number"},
		{"bad onoff", Change{Device: "eth0", Value: "adaptive_rx=yes"}, "want on or off"},
		{"twice", Change{Device: "eth0", Value: "rx_usecs=1 rx_usecs=2"}, "given twice"},
	})
	runSame(t, coalesce{}, []sameCase{
		{a: "rx_usecs=8 adaptive_rx=off", b: " rx_usecs=8\tadaptive_rx=off\n", same: true},
		{a: "rx_usecs=8", b: "rx_usecs=9", same: false},
	})
}

func TestCoalesceFields(t *testing.T) {
	k := numbered()
	got, err := CoalesceFields(&k, []string{"tx_frames", "adaptive_rx", "rx_usecs", "adaptive_tx", "rx_frames", "tx_usecs"})
	if want := "tx_frames=4 adaptive_rx=on rx_usecs=1 adaptive_tx=off rx_frames=2 tx_usecs=3"; err != nil || got != want {
		t.Errorf("CoalesceFields = %q, %v; want %q", got, err, want)
	}
	if _, err := CoalesceFields(&k, []string{"rate_sample_interval"}); err == nil {
		t.Error("CoalesceFields of an unknown field succeeded")
	}
}

func TestCoalesceReadWriteRestore(t *testing.T) {
	fake := &fakeEthtool{devs: map[string]*host.Coalesce{"eth0": ptr(numbered()), "eth1": ptr(numbered())}}
	env := &Env{FS: tree(t, nil), Ethtool: fake}
	h := coalesce{}
	c := Change{Kind: KindCoalesce, Target: "eth0 coalescing", Device: "eth0", Value: "tx_usecs=30 adaptive_rx=off"}

	readThenWrite(t, h, env, &c, "tx_usecs=3 adaptive_rx=on")
	if got, err := h.Read(env, &c); err != nil || got != h.Expected(&c) {
		t.Errorf("Read after Write = %q, %v; want %q", got, err, h.Expected(&c))
	}
	changed := numbered()
	changed.TxUsecs, changed.AdaptiveRx = 30, false
	if *fake.devs["eth0"] != changed {
		t.Errorf("after Write eth0 = %+v, want only tx_usecs and adaptive_rx changed", *fake.devs["eth0"])
	}
	if err := h.Restore(env, &c); err != nil {
		t.Fatal(err)
	}
	if *fake.devs["eth0"] != numbered() {
		t.Errorf("after Restore eth0 = %+v, want every field as before", *fake.devs["eth0"])
	}
	if *fake.devs["eth1"] != numbered() {
		t.Errorf("eth1 changed: %+v", *fake.devs["eth1"])
	}

	gone := c
	gone.Device = "eth9"
	_, err := h.Read(env, &gone)
	errIs(t, "Read of a device without coalescing", err, kernel.ErrUnsupported)

	// On a snapshot without ethtool data there is no device to ask.
	snap := &Env{FS: tree(t, nil)}
	_, err = h.Read(snap, &c)
	errIs(t, "Read on a snapshot", err, kernel.ErrUnsupported)
	errIs(t, "Write on a snapshot", h.Write(snap, &c, c.Value), kernel.ErrUnsupported)
	errIs(t, "Restore on a snapshot", h.Restore(snap, &c), kernel.ErrUnsupported)

	// A journal whose old value is garbled writes nothing.
	bad := c
	bad.Old = "tx_usecs"
	before := len(fake.sets)
	if err := h.Restore(env, &bad); err == nil {
		t.Error("Restore of a garbled old value succeeded")
	}
	if len(fake.sets) != before {
		t.Errorf("a garbled Restore set %v", fake.sets[before:])
	}
}

func ptr[T any](v T) *T { return &v }
