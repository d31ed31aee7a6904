package setting_test

import (
	"bytes"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/irqpilot/irqpilot/internal/apply"
	"github.com/irqpilot/irqpilot/internal/cpuset"
	"github.com/irqpilot/irqpilot/internal/host"
	"github.com/irqpilot/irqpilot/internal/kernel"
	"github.com/irqpilot/irqpilot/internal/kernel/netdev"
	"github.com/irqpilot/irqpilot/internal/livetest"
	"github.com/irqpilot/irqpilot/internal/setting"
)

const napiLiveChild = "IRQPILOT_TEST_NAPI_SETTING_CHILD"

func liveRun(t *testing.T, args ...string) string {
	t.Helper()
	out, err := exec.Command(args[0], args[1:]...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// TestLiveNAPISettings creates a namespace with a veth pair (4 queues, GRO
// on) and runs TestNAPISettingsChild inside it, where both sysfs and
// netlink show that namespace.
func TestLiveNAPISettings(t *testing.T) {
	livetest.NeedRoot(t, "ip", "ethtool")
	ns := livetest.Netns(t, livetest.Name("irqp-napiset-"))
	livetest.Veth(t, ns, "vA", "vB", 4)
	for _, l := range []string{"vA", "vB"} {
		liveRun(t, "ip", "netns", "exec", ns, "ethtool", "-K", l, "gro", "on")
	}
	// A veth pair without GRO: no NAPI instance.
	liveRun(t, "ip", "-n", ns, "link", "add", "vC", "type", "veth", "peer", "name", "vD")
	liveRun(t, "ip", "-n", ns, "link", "set", "vC", "up")
	cmd := exec.Command("ip", "netns", "exec", ns, os.Args[0], "-test.run=^TestNAPISettingsChild$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), napiLiveChild+"=1")
	out, err := cmd.CombinedOutput()
	if err != nil || !bytes.Contains(out, []byte("--- PASS: TestNAPISettingsChild")) {
		t.Fatalf("child: %v\n%s", err, out)
	}
	t.Logf("%s", out)
}

// devState is what the settings touch: vA's three sysfs files, byte for
// byte, and the netlink answers for its NAPI instances.
type devState struct {
	Files map[string]string
	NAPI  []netdev.NAPI
}

func readState(t *testing.T, ifindex int) devState {
	t.Helper()
	s := devState{Files: map[string]string{}}
	for _, f := range []string{"threaded", "napi_defer_hard_irqs", "gro_flush_timeout"} {
		b, err := os.ReadFile("/sys/class/net/vA/" + f)
		if err != nil {
			t.Fatal(err)
		}
		s.Files[f] = string(b)
	}
	c, err := netdev.Open()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if s.NAPI, err = c.NAPIs(ifindex); err != nil {
		t.Fatal(err)
	}
	return s
}

func TestNAPISettingsChild(t *testing.T) {
	if os.Getenv(napiLiveChild) == "" {
		t.Skip("run by TestLiveNAPISettings")
	}
	fs := kernel.New("/")
	h, err := host.Read(fs, host.Options{})
	if err != nil {
		t.Fatal(err)
	}
	napis := h.NAPIsOf("vA")
	if len(napis) != 4 {
		t.Fatalf("vA: %d NAPI instances in the inventory, want 4: %+v", len(napis), h.Unavailable)
	}
	ix, _ := fs.IfIndex("vA")
	id := napis[0].ID
	a := apply.New(fs, t.TempDir())

	cycle := func(name string, changes []setting.Change, extra func() string) {
		t.Helper()
		before := readState(t, ix)
		var extraBefore string
		if extra != nil {
			extraBefore = extra()
		}
		res, err := a.Apply(changes, apply.Meta{})
		if err != nil {
			t.Fatalf("%s: apply: %v", name, err)
		}
		for _, e := range res.Entries {
			if e.Status != setting.StatusDone {
				t.Errorf("%s: %s %s: %s", name, e.Target, e.Status, e.Note)
			}
		}
		again, err := a.Apply(changes, apply.Meta{})
		if err != nil || again.Changed != 0 || again.Journal != nil || again.Unchanged != len(changes) {
			t.Errorf("%s: re-apply changed %d, unchanged %d, journal %v (%v)", name, again.Changed, again.Unchanged, again.Journal != nil, err)
		}
		if _, err := a.Revert("", false); err != nil {
			t.Fatalf("%s: revert: %v", name, err)
		}
		after := readState(t, ix)
		if d := cmp.Diff(before, after); d != "" {
			t.Errorf("%s: not restored exactly (-before +after):\n%s", name, d)
		}
		if extra != nil {
			if got := extra(); got != extraBefore {
				t.Errorf("%s: %q before, %q after revert", name, extraBefore, got)
			}
		}
	}

	cycle("device threaded", []setting.Change{setting.DevThreaded("vA", true, "test")}, nil)
	cycle("device defer", []setting.Change{setting.DevDeferHardIRQs("vA", 2, "test")}, nil)
	cycle("device gro flush", []setting.Change{setting.DevGROFlushTimeout("vA", 20000, "test")}, nil)
	cycle("per-NAPI", []setting.Change{
		setting.NAPISetting(setting.KindNAPIThreaded, "vA", id, 1, "test"),
		setting.NAPISetting(setting.KindNAPIDeferHardIRQs, "vA", id, 2, "test"),
		setting.NAPISetting(setting.KindNAPIGROFlushTimeout, "vA", id, 20000, "test"),
		setting.NAPISetting(setting.KindNAPIIRQSuspendTimeout, "vA", id, 20000000, "test"),
	}, nil)

	// Thread placement needs the thread: make the device threaded for the
	// test, place one NAPI kthread, revert, compare its affinity.
	if err := os.WriteFile("/sys/class/net/vA/threaded", []byte("1"), 0); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = os.WriteFile("/sys/class/net/vA/threaded", []byte("0"), 0) }()
	h, err = host.Read(fs, host.Options{})
	if err != nil {
		t.Fatal(err)
	}
	n := h.NAPIsOf("vA")[0]
	if n.PID == nil || n.CPUs == nil || n.PIDStart == 0 {
		t.Fatalf("threaded napi %+v", n)
	}
	c, err := setting.NAPIThread(n, cpuset.Of(0), "test")
	if err != nil {
		t.Fatal(err)
	}
	affinity := func() string {
		s, err := fs.ThreadAffinity(*n.PID)
		if err != nil {
			t.Fatal(err)
		}
		return s.String()
	}
	cycle("napi thread placement", []setting.Change{c}, affinity)

	// A device without NAPI instances: skipped as unsupported, not a failure.
	res, err := a.Apply([]setting.Change{setting.DevThreaded("vC", true, "test")}, apply.Meta{})
	if err != nil || len(res.Entries) != 1 || res.Entries[0].Status != setting.StatusSkipped || !strings.Contains(res.Entries[0].Note, "no NAPI instance") {
		t.Errorf("vC without NAPI: %v %s %q", err, res.Entries[0].Status, res.Entries[0].Note)
	}

	// An invalid value: a clear error, nothing written.
	before := readState(t, ix)
	bad := setting.NAPISetting(setting.KindNAPIIRQSuspendTimeout, "vA", id, 5_000_000_000, "test")
	if _, err := a.Apply([]setting.Change{bad, setting.DevDeferHardIRQs("vA", 2, "test")}, apply.Meta{}); err == nil || !strings.Contains(err.Error(), "out of range") {
		t.Errorf("5 s irq-suspend-timeout: %v", err)
	}
	if d := cmp.Diff(before, readState(t, ix)); d != "" {
		t.Errorf("a refused plan wrote something (-before +after):\n%s", d)
	}
}
