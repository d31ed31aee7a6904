package setting

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/irqpilot/irqpilot/internal/cpuset"
	"github.com/irqpilot/irqpilot/internal/kernel"
	"github.com/irqpilot/irqpilot/internal/livetest"
)

// tree builds a fake machine below a temporary root: path (root-relative)
// → content.
func tree(t *testing.T, files map[string]string) *kernel.FS {
	t.Helper()
	return kernel.New(livetest.WriteTree(t, files))
}

// fileContent reads a root-relative file of fs's tree as it is on disk.
func fileContent(t *testing.T, fs *kernel.FS, rel string) string {
	t.Helper()
	b, err := os.ReadFile(fs.Path(rel))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func intp(n int) *int { return &n }

// checkCase is one row of a Check table: want "" accepts the change, else
// the error must contain want (and, for a refusal, the change's Target or
// Device, so the message names the thing).
type checkCase struct {
	name string
	c    Change
	want string
}

// readThenWrite reads c's value in force with h, which must be want,
// keeps it as c.Old and writes c.Value: the start of every
// write-and-restore test.
func readThenWrite(t *testing.T, h Handler, env *Env, c *Change, want string) {
	t.Helper()
	old, err := h.Read(env, c)
	if err != nil || old != want {
		t.Fatalf("%s Read = %q, %v; want %q", c.Kind, old, err, want)
	}
	c.Old = old
	if err := h.Write(env, c, c.Value); err != nil {
		t.Fatal(err)
	}
}

func runCheck(t *testing.T, h Handler, cases []checkCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := tc.c
			if c.Kind == "" {
				c.Kind = h.Kind()
			}
			if c.Target == "" {
				c.Target = "the-target"
			}
			err := h.Check(&c)
			// The package-level Check dispatches to the same handler.
			c2 := tc.c
			if c2.Kind == "" {
				c2.Kind = h.Kind()
			}
			if c2.Target == "" {
				c2.Target = "the-target"
			}
			err2 := Check(&c2)
			if (err == nil) != (err2 == nil) {
				t.Errorf("handler Check = %v but setting.Check = %v", err, err2)
			}
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("Check(%s) = %v, want accepted", show(tc.c), err)
			case tc.want != "" && err == nil:
				t.Errorf("Check(%s) accepted, want refused with %q", show(tc.c), tc.want)
			case tc.want != "" && !strings.Contains(err.Error(), tc.want):
				t.Errorf("Check error = %q, want it to contain %q", err, tc.want)
			case tc.want != "" && !strings.Contains(err.Error(), c.Target) &&
				(c.Device == "" || !strings.Contains(err.Error(), c.Device)):
				t.Errorf("Check error = %q names neither the target %q nor the device", err, c.Target)
			}
		})
	}
}

// sameCase is one row of a Same table; err true wants an error.
type sameCase struct {
	a, b string
	same bool
	err  bool
}

func runSame(t *testing.T, h Handler, cases []sameCase) {
	t.Helper()
	for _, tc := range cases {
		for _, ab := range [][2]string{{tc.a, tc.b}, {tc.b, tc.a}} {
			got, err := h.Same(ab[0], ab[1])
			if tc.err {
				if err == nil {
					t.Errorf("%s Same(%.40q, %.40q) = %v, want an error", h.Kind(), ab[0], ab[1], got)
				}
				continue
			}
			if err != nil || got != tc.same {
				t.Errorf("%s Same(%.40q, %.40q) = %v, %v; want %v", h.Kind(), ab[0], ab[1], got, err, tc.same)
			}
			pkg, err := Same(h.Kind(), ab[0], ab[1])
			if err != nil || pkg != got {
				t.Errorf("setting.Same(%s, %q, %q) = %v, %v; want %v as the handler", h.Kind(), ab[0], ab[1], pkg, err, got)
			}
		}
	}
}

func mustLookup(t *testing.T, k Kind) Handler {
	t.Helper()
	h, err := Lookup(k)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func TestRegistryKinds(t *testing.T) {
	want := []Kind{KindApp, KindCoalesce, KindDevDeferHardIRQs, KindDevGROFlushTimeout, KindDevThreaded,
		KindIRQAffinity, KindIrqbalance, KindIrqbalanceBan,
		KindNAPIDeferHardIRQs, KindNAPIGROFlushTimeout, KindNAPIIRQSuspendTimeout, KindNAPIThreaded,
		KindRPSCPUs, KindRPSFlowCnt, KindSysctl, KindThreadAffinity, KindXPSCPUs}
	if d := cmp.Diff(want, Kinds()); d != "" {
		t.Errorf("Kinds() (-want, sorted +got):\n%s", d)
	}
	for k, h := range registry {
		if h.Kind() != k {
			t.Errorf("registry[%q].Kind() = %q", k, h.Kind())
		}
		if got := mustLookup(t, k); got.Kind() != k {
			t.Errorf("Lookup(%q).Kind() = %q", k, got.Kind())
		}
	}
}

func TestLookupUnknown(t *testing.T) {
	_, err := Lookup("smp-affinity")
	if err == nil {
		t.Fatal("Lookup of an unknown kind succeeded")
	}
	for _, s := range []string{`"smp-affinity"`, "not known", string(KindIRQAffinity), string(KindIrqbalanceBan)} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("Lookup error %q does not contain %q", err, s)
		}
	}
	for _, k := range []Kind{"", "irq-affinity ", "IRQ-AFFINITY", "../irq-affinity"} {
		c := Change{Kind: k, Target: "t", Path: "proc/irq/1/smp_affinity_list", Value: "0"}
		if err := Check(&c); err == nil {
			t.Errorf("Check accepted a change of unknown kind %q", k)
		}
		if _, err := Same(k, "0", "0"); err == nil {
			t.Errorf("Same accepted unknown kind %q", k)
		}
		if got := Key(&c); got != "path:proc/irq/1/smp_affinity_list" {
			t.Errorf("Key of unknown kind %q = %q, want the path key", k, got)
		}
		if got := ScopeOf(&c); got != (Scope{IRQ: -1}) {
			t.Errorf("ScopeOf unknown kind %q = %+v, want nothing", k, got)
		}
	}
}

func TestStateGlobs(t *testing.T) {
	want := []string{
		"sys/class/net/*/napi_defer_hard_irqs",
		"sys/class/net/*/gro_flush_timeout",
		"sys/class/net/*/threaded",
		"proc/irq/*/smp_affinity_list",
		"sys/class/net/*/queues/rx-*/rps_cpus",
		"sys/class/net/*/queues/rx-*/rps_flow_cnt",
		SockFlowPath, BusyReadPath, BusyPollPath,
		"sys/class/net/*/queues/tx-*/xps_cpus",
	}
	if d := cmp.Diff(want, StateGlobs()); d != "" {
		t.Errorf("StateGlobs() (-want +got):\n%s", d)
	}
	// Every file a pattern matches is one its kind accepts.
	for _, k := range Kinds() {
		g, ok := registry[k].(Globber)
		if !ok {
			continue
		}
		for _, p := range g.Globs() {
			path := strings.NewReplacer("net/*/", "net/eth0/", "irq/*/", "irq/38/", "-*/", "-2/").Replace(p)
			c := Change{Kind: k, Target: "glob " + p, Path: path, Value: "1"}
			if err := Check(&c); err != nil {
				t.Errorf("%s: a file %q of its pattern %q is refused: %v", k, path, p, err)
			}
		}
	}
}

func TestScopeOf(t *testing.T) {
	for _, tc := range []struct {
		c    Change
		want Scope
	}{
		{Change{Kind: KindIRQAffinity, Path: "proc/irq/38/smp_affinity_list", Value: "0"}, Scope{IRQ: 38}},
		{Change{Kind: KindIRQAffinity, Path: "proc/irq/0/smp_affinity_list", IRQ: intp(0), Value: "0"}, Scope{IRQ: 0}},
		{Change{Kind: KindRPSCPUs, Path: RxQueuePath("eth1", 0, "rps_cpus"), Value: "f"}, Scope{IRQ: -1, NetDevice: "eth1"}},
		{Change{Kind: KindRPSFlowCnt, Path: RxQueuePath("eth1", 3, "rps_flow_cnt"), Value: "4"}, Scope{IRQ: -1, NetDevice: "eth1"}},
		{Change{Kind: KindXPSCPUs, Path: TxQueuePath("enp1s0", 2, "xps_cpus"), Value: "f"}, Scope{IRQ: -1, NetDevice: "enp1s0"}},
		{Change{Kind: KindCoalesce, Device: "eth2", Value: "rx_usecs=8"}, Scope{IRQ: -1, NetDevice: "eth2"}},
		{Change{Kind: KindThreadAffinity, TID: 4321, Value: "0"}, Scope{IRQ: -1, TID: 4321}},
		{Change{Kind: KindSysctl, Path: SockFlowPath, Value: "32768"}, Scope{IRQ: -1, MachineWide: true}},
		{Change{Kind: KindIrqbalance, Value: "stopped"}, Scope{IRQ: -1, MachineWide: true}},
		{Change{Kind: KindIrqbalanceBan, Path: "etc/default/irqbalance", Value: "1-3"}, Scope{IRQ: -1, MachineWide: true}},
		{Change{Kind: KindApp, App: &AppSelector{Comm: "x"}, Value: "0"}, Scope{IRQ: -1}},
	} {
		c := tc.c
		if got := ScopeOf(&c); got != tc.want {
			t.Errorf("ScopeOf(%s %s) = %+v, want %+v", tc.c.Kind, tc.c.Path, got, tc.want)
		}
	}
}

func TestKeys(t *testing.T) {
	irq := IRQAffinity(38, "irq 38", mustSet(t, "0"), "")
	irq2 := IRQAffinity(38, "irq 38 again", mustSet(t, "1"), "")
	th := ThreadAffinity(7, 1, "t", mustSet(t, "0"), "")
	th2 := ThreadAffinity(7, 2, "t2", mustSet(t, "1"), "")
	co := Change{Kind: KindCoalesce, Device: "eth0", Value: "rx_usecs=1"}
	co2 := Change{Kind: KindCoalesce, Device: "eth0", Value: "tx_usecs=1"}
	for _, pair := range [][2]Change{{irq, irq2}, {th, th2}, {co, co2},
		{{Kind: KindIrqbalance, Value: "stopped"}, {Kind: KindIrqbalance, Value: "running"}}} {
		if Key(&pair[0]) != Key(&pair[1]) {
			t.Errorf("%v and %v write one thing but have keys %q and %q", pair[0], pair[1], Key(&pair[0]), Key(&pair[1]))
		}
	}
	distinct := []Change{irq, IRQAffinity(39, "irq 39", mustSet(t, "0"), ""), th,
		ThreadAffinity(8, 1, "t", mustSet(t, "0"), ""), co, {Kind: KindCoalesce, Device: "eth1"},
		RPSCPUs("eth0", 0, mustSet(t, "0"), 4, ""), RPSFlowCnt("eth0", 0, 4, ""), XPSCPUs("eth0", 0, mustSet(t, "0"), 4, ""),
		SockFlowEntries(4, ""), {Kind: KindIrqbalance}, {Kind: KindIrqbalanceBan, Path: "etc/default/irqbalance"}}
	seen := map[string]int{}
	for i := range distinct {
		k := Key(&distinct[i])
		if j, dup := seen[k]; dup {
			t.Errorf("changes %v and %v collide on key %q", distinct[j], distinct[i], k)
		}
		seen[k] = i
	}
}

func TestStatusFor(t *testing.T) {
	for _, tc := range []struct {
		c    Change
		want Status
	}{
		{Change{Kind: KindIRQAffinity, Value: "0-3", Old: "0,1,2,3"}, StatusUnchanged},
		{Change{Kind: KindIRQAffinity, Value: "0-3", Old: "0-2"}, StatusPending},
		{Change{Kind: KindIRQAffinity, Value: "0-3", Old: ""}, StatusUnknown},
		{Change{Kind: KindIRQAffinity, Value: "0-3", Old: "0-3", Status: StatusSkipped}, StatusSkipped},
		{Change{Kind: KindRPSCPUs, Value: "f", Old: "00000000,0000000f"}, StatusUnchanged},
		{Change{Kind: KindIRQAffinity, Value: "0-3", Old: "garbage"}, StatusPending},
		{Change{Kind: "nonsense", Value: "1", Old: "1"}, StatusPending},
	} {
		c := tc.c
		if got := StatusFor(&c); got != tc.want {
			t.Errorf("StatusFor(%s %q old %q status %q) = %q, want %q", c.Kind, c.Value, c.Old, c.Status, got, tc.want)
		}
	}
}

// TestChangeNames covers the forms people read.
func TestChangeNames(t *testing.T) {
	c := IRQAffinity(38, "irq 38 (eth0 rx 0)", mustSet(t, "0-3"), "")
	if got, want := c.String(), "irq 38 (eth0 rx 0): smp_affinity_list → 0-3"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
	th := ThreadAffinity(77, 5, "nginx pid 70 thread 77", mustSet(t, "2"), "")
	if got, want := th.String(), "nginx pid 70 thread 77: thread 77 → 2"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
	if got := (Change{Kind: KindCoalesce}).Name(); got != "coalesce" {
		t.Errorf("Name() without a path = %q, want the kind", got)
	}
	if got := (Change{Path: "noslash"}).Name(); got != "noslash" {
		t.Errorf("Name() of a bare path = %q", got)
	}
}

// errIs fails unless err wraps target.
func errIs(t *testing.T, what string, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Errorf("%s: error = %v, want one wrapping %q", what, err, target)
	}
}

// statLine is a /proc/PID/stat line whose field 22 (starttime) is start.
func statLine(pid int, comm string, start uint64) string {
	// Fields 3..21, then 22 = start, then a few more.
	return fmt.Sprintf("%d (%s) S 1 %d %d 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 %d 1000 100 18446744073709551615\n",
		pid, comm, pid, pid, start)
}

func mustSet(t *testing.T, list string) cpuset.Set {
	t.Helper()
	s, err := cpuset.Parse(list)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// show prints the fields of a change Check looks at.
func show(c Change) string {
	s := fmt.Sprintf("kind %q path %q value %.40q", c.Kind, c.Path, c.Value)
	if c.IRQ != nil {
		s += fmt.Sprintf(" irq %d", *c.IRQ)
	}
	if c.Queue != nil {
		s += fmt.Sprintf(" queue %d", *c.Queue)
	}
	if c.Device != "" {
		s += fmt.Sprintf(" device %q", c.Device)
	}
	if c.TID != 0 {
		s += fmt.Sprintf(" tid %d", c.TID)
	}
	return s
}
