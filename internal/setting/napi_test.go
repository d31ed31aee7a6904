package setting

import (
	"errors"
	"strings"
	"testing"

	"github.com/irqpilot/irqpilot/internal/cpuset"
	"github.com/irqpilot/irqpilot/internal/host"
	"github.com/irqpilot/irqpilot/internal/kernel"
	"github.com/irqpilot/irqpilot/internal/kernel/netdev"
)

// fakeNAPI holds NAPI instances as napi-get reports them and applies
// napi-set the way the kernel does (only the attributes sent).
type fakeNAPI struct {
	napis map[uint32]*netdev.NAPI
	sets  []netdev.NAPISet
}

func (f *fakeNAPI) NAPI(id uint32) (netdev.NAPI, error) {
	n, ok := f.napis[id]
	if !ok {
		return netdev.NAPI{}, netdev.ErrNoNAPI
	}
	return *n, nil
}

func (f *fakeNAPI) SetNAPI(s netdev.NAPISet) error {
	f.sets = append(f.sets, s)
	n, ok := f.napis[s.ID]
	if !ok {
		return netdev.ErrNoNAPI
	}
	if s.Threaded != nil {
		v := *s.Threaded
		n.Threaded = &v
	}
	if s.DeferHardIRQs != nil {
		v := *s.DeferHardIRQs
		n.DeferHardIRQs = &v
	}
	if s.GROFlushTimeout != nil {
		v := *s.GROFlushTimeout
		n.GROFlushTimeout = &v
	}
	if s.IRQSuspendTimeout != nil {
		v := *s.IRQSuspendTimeout
		n.IRQSuspendTimeout = &v
	}
	return nil
}

func newFakeNAPI() *fakeNAPI {
	f, u := false, uint32(0)
	z := uint64(0)
	return &fakeNAPI{napis: map[uint32]*netdev.NAPI{
		277: {ID: 277, Ifindex: 3, Threaded: &f, DeferHardIRQs: &u, GROFlushTimeout: &z, IRQSuspendTimeout: &z},
		300: {ID: 300, Ifindex: 7}, // an older kernel: no per-NAPI values reported
	}}
}

func TestNAPICheck(t *testing.T) {
	id := uint32(277)
	zero := uint32(0)
	for _, h := range []Handler{napiThreadedKind, napiDeferKind, napiGROFlushKind, napiIRQSuspendKind} {
		runCheck(t, h, []checkCase{
			{"valid", Change{Device: "vA", NAPI: &id, Value: "1"}, ""},
			{"negative", Change{Device: "vA", NAPI: &id, Value: "-1"}, "negative"},
			{"word", Change{Device: "vA", NAPI: &id, Value: "yes"}, "not an unsigned integer"},
			{"no id", Change{Device: "vA", Value: "1"}, "no NAPI instance id"},
			{"id 0", Change{Device: "vA", NAPI: &zero, Value: "1"}, "no NAPI instance id"},
			{"no device", Change{NAPI: &id, Value: "1"}, "not a network device name"},
			{"bad device", Change{Device: "../x", NAPI: &id, Value: "1"}, "not a network device name"},
			{"a path", Change{Device: "vA", NAPI: &id, Value: "1", Path: "sys/class/net/vA/threaded"}, "has no file"},
		})
	}
	runCheck(t, napiThreadedKind, []checkCase{{"two", Change{Device: "vA", NAPI: &id, Value: "2"}, "out of range"}})
	runCheck(t, napiIRQSuspendKind, []checkCase{
		{"20 ms", Change{Device: "vA", NAPI: &id, Value: "20000000"}, ""},
		{"1 s", Change{Device: "vA", NAPI: &id, Value: "1000000000"}, "out of range"},
	})
	runCheck(t, napiDeferKind, []checkCase{{"2^31", Change{Device: "vA", NAPI: &id, Value: "2147483648"}, "out of range"}})
	// A journal may hold the kernel's values, not more.
	c := NAPISetting(KindNAPIGROFlushTimeout, "vA", 277, 0, "r")
	c.Old = "5000000000"
	if err := CheckRecorded(&c); err != nil {
		t.Errorf("recorded 5 s flush timeout: %v", err)
	}
	c = NAPISetting(KindNAPIDeferHardIRQs, "vA", 277, 0, "r")
	c.Old = "2147483648"
	if err := CheckRecorded(&c); err == nil {
		t.Error("recorded defer-hard-irqs past S32_MAX accepted")
	}
}

func TestNAPIReadWriteRestore(t *testing.T) {
	fake := newFakeNAPI()
	env := &Env{FS: tree(t, map[string]string{"sys/class/net/vA/ifindex": "3\n", "sys/class/net/vB/ifindex": "4\n"}), NAPI: fake}
	changes := []Change{
		NAPISetting(KindNAPIThreaded, "vA", 277, 1, "r"),
		NAPISetting(KindNAPIDeferHardIRQs, "vA", 277, 2, "r"),
		NAPISetting(KindNAPIGROFlushTimeout, "vA", 277, 20000, "r"),
		NAPISetting(KindNAPIIRQSuspendTimeout, "vA", 277, 20000000, "r"),
	}
	keys := map[string]bool{}
	for i := range changes {
		c := &changes[i]
		if err := Check(c); err != nil {
			t.Fatal(err)
		}
		keys[Key(c)] = true
		if sc := ScopeOf(c); sc.NetDevice != "vA" || sc.MachineWide || sc.TID != 0 {
			t.Errorf("%s scope %+v", c.Target, sc)
		}
		h := mustLookup(t, c.Kind)
		old, err := h.Read(env, c)
		if err != nil || old != "0" {
			t.Fatalf("%s read %q %v", c.Target, old, err)
		}
		c.Old = old
		if err := h.Write(env, c, c.Value); err != nil {
			t.Fatal(err)
		}
		if got, _ := h.Read(env, c); got != c.Value {
			t.Errorf("%s read back %q want %q", c.Target, got, c.Value)
		}
	}
	if len(keys) != 4 {
		t.Errorf("keys collide: %v", keys)
	}
	// Each napi-set carries exactly one attribute: the others stay as is.
	for _, s := range fake.sets {
		n := 0
		for _, set := range []bool{s.Threaded != nil, s.DeferHardIRQs != nil, s.GROFlushTimeout != nil, s.IRQSuspendTimeout != nil} {
			if set {
				n++
			}
		}
		if n != 1 || s.ID != 277 {
			t.Errorf("napi-set %+v", s)
		}
	}
	for i := range changes {
		c := &changes[i]
		if err := mustLookup(t, c.Kind).Restore(env, c); err != nil {
			t.Fatal(err)
		}
	}
	n := fake.napis[277]
	if *n.Threaded || *n.DeferHardIRQs != 0 || *n.GROFlushTimeout != 0 || *n.IRQSuspendTimeout != 0 {
		t.Errorf("not restored: %+v", n)
	}

	// The id now belongs to another device: left alone, as unsupported.
	c := NAPISetting(KindNAPIDeferHardIRQs, "vB", 277, 2, "r")
	if err := napiDeferKind.Write(env, &c, "2"); !errors.Is(err, kernel.ErrUnsupported) || !strings.Contains(err.Error(), "belongs to ifindex 3") {
		t.Errorf("foreign id: %v", err)
	}
	// The instance is gone.
	c = NAPISetting(KindNAPIDeferHardIRQs, "vA", 999, 2, "r")
	if _, err := napiDeferKind.Read(env, &c); !errors.Is(err, kernel.ErrUnsupported) {
		t.Errorf("gone: %v", err)
	}
	// A kernel that reports no per-NAPI values (6.9-6.12).
	env.FS = tree(t, map[string]string{"sys/class/net/vC/ifindex": "7"})
	c = NAPISetting(KindNAPIIRQSuspendTimeout, "vC", 300, 2, "r")
	if _, err := napiIRQSuspendKind.Read(env, &c); !errors.Is(err, kernel.ErrUnsupported) || !strings.Contains(err.Error(), "6.13") {
		t.Errorf("older kernel: %v", err)
	}
	// A snapshot without a fake: unsupported.
	env.NAPI = nil
	if _, err := napiIRQSuspendKind.Read(env, &c); !errors.Is(err, kernel.ErrUnsupported) {
		t.Errorf("snapshot: %v", err)
	}
	if len(fake.sets) != 8 {
		t.Errorf("%d napi-set calls, want 8 (none for refused changes)", len(fake.sets))
	}
}

func TestNAPIThread(t *testing.T) {
	pid := 7218
	c, err := NAPIThread(host.NAPI{ID: 277, Device: "vA", PID: &pid, PIDStart: 12345}, cpuset.Of(1), "beside the consumer")
	if err != nil {
		t.Fatal(err)
	}
	if c.Kind != KindThreadAffinity || c.TID != 7218 || c.TIDStart != 12345 || c.Value != "1" || !strings.Contains(c.Target, "napi/vA-277") {
		t.Errorf("%+v", c)
	}
	if err := Check(&c); err != nil {
		t.Error(err)
	}
	if sc := ScopeOf(&c); sc.TID != 7218 {
		t.Errorf("scope %+v", sc)
	}
	if _, err := NAPIThread(host.NAPI{ID: 277, Device: "vA"}, cpuset.Of(1), ""); err == nil || !strings.Contains(err.Error(), "not threaded") {
		t.Errorf("unthreaded: %v", err)
	}
}
