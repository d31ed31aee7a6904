package policy

import (
	"bytes"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/irqpilot/irqpilot/internal/cpuset"
	"github.com/irqpilot/irqpilot/internal/host"
	"github.com/irqpilot/irqpilot/internal/hostgen"
	"github.com/irqpilot/irqpilot/internal/kernel"
	"github.com/irqpilot/irqpilot/internal/plan"
	"github.com/irqpilot/irqpilot/internal/plan/plantest"
	"github.com/irqpilot/irqpilot/internal/setting"
)

// serverSpec is a 32-CPU guest: 2 packages × 8 cores × 2 threads, 4 NUMA
// nodes (node 2 = CPUs 8-11 and their siblings 24-27), an 8-queue NIC on
// node 2 and no NVMe drive.
func serverSpec() hostgen.Spec {
	return hostgen.Spec{CPUs: 32, Packages: 2, Nodes: 4, ThreadsPerCore: 2, Offline: hostgen.NoOffline,
		NICs: []hostgen.NICSpec{{Name: "eth1", Driver: "virtio_net", Slot: 3, Node: 2, Queues: 8}}, NVMeQueues: -1}
}

// queueCPUs lists, by queue, the CPUs a plan gives dev's queue IRQs.
func queueCPUs(h *host.Host, p *plan.Plan, dev string) string {
	byQueue := map[int]string{}
	n := 0
	for _, e := range p.IRQs {
		if q := h.IRQ(*e.IRQ); q != nil && q.Device == dev && q.Queue != nil {
			byQueue[*q.Queue] = e.CPUs.String()
			n = max(n, *q.Queue+1)
		}
	}
	var out []string
	for i := range n {
		out = append(out, byQueue[i])
	}
	return strings.Join(out, " ")
}

// Which CPUs each policy uses on the server-shaped guest. The application
// is not NIC-local work: per-queue gives it every CPU without a queue IRQ
// (24 of 32, on every node), not the NIC node's remainder.
func TestPoliciesOnServerShapedGuest(t *testing.T) {
	h := plantest.GenHost(t, serverSpec(), nil)
	node2 := cpuset.MustParse("8-11,24-27")
	if nic := h.NIC("eth1"); nic == nil || nic.Node != 2 {
		t.Fatalf("generated eth1: %+v", nic)
	}
	// used is where a plan puts eth1's queue IRQs, the application, and
	// queue 0's RPS and XPS.
	type used struct{ IRQs, App, RPSQueue0, XPSQueue0 string }
	for _, tc := range []struct {
		policy string
		want   used // IRQs: per queue 0..7
	}{
		// One queue per CPU of node 2, the four physical cores first,
		// then their SMT siblings; the RPS group of each queue is its IRQ
		// CPU (every CPU of the node takes a queue).
		{"per-queue", used{"8 9 10 11 24 25 26 27", "0-7,12-23,28-31", "8", ""}},
		// Full affinity: the queue's IRQ, stack, transmits and its worker
		// on one CPU; the workers run on the queues' CPUs.
		{"colocate", used{"8 9 10 11 24 25 26 27", "8-11,24-27", "8", "8"}},
		// Every queue IRQ on CPU 0, RPS everywhere else.
		{"dedicated-core", used{"0 0 0 0 0 0 0 0", "1-31", "1-31", ""}},
		// IRQs untouched, RPS over the NIC's node.
		{"rps-spread", used{"", "", "8-11,24-27", ""}},
	} {
		p, err := Make(tc.policy, h, Options{})
		if err != nil {
			t.Fatalf("%s: %v", tc.policy, err)
		}
		checkProperties(t, "server "+tc.policy, h, p)
		got := used{IRQs: queueCPUs(h, p, "eth1")}
		if p.AppCPUs != nil {
			got.App = p.AppCPUs.String()
		}
		for _, e := range p.RxQueues {
			if e.Device == "eth1" && *e.Queue == 0 {
				got.RPSQueue0 = e.RPSCPUs.String()
			}
		}
		for _, e := range p.TxQueues {
			if e.Device == "eth1" && *e.Queue == 0 {
				got.XPSQueue0 = e.XPSCPUs.String()
			}
		}
		if d := cmp.Diff(tc.want, got); d != "" {
			t.Errorf("%s: CPUs used (-want +got):\n%s", tc.policy, d)
		}
		if tc.policy != "dedicated-core" {
			for _, e := range p.IRQs {
				if !e.CPUs.IsSubsetOf(node2) {
					t.Errorf("%s: irq %d on %s, off the NIC's node", tc.policy, *e.IRQ, e.CPUs)
				}
			}
		}
	}
	// Four queues: one per physical core, no SMT sibling.
	spec := serverSpec()
	spec.NICs[0].Queues = 4
	h4 := plantest.GenHost(t, spec, nil)
	p := mustMake(t, "per-queue", h4, Options{})
	if got := queueCPUs(h4, p, "eth1"); got != "8 9 10 11" {
		t.Errorf("4 queues: IRQ CPUs %q, want one per core of node 2", got)
	}
	// Each group: the IRQ CPU and its SMT sibling.
	if g := p.RxQueues[0].RPSCPUs.String(); g != "8,24" {
		t.Errorf("4 queues: rx-0 RPS %s, want the IRQ CPU's core 8,24", g)
	}
	if p.AppCPUs == nil || p.AppCPUs.String() != "0-7,12-31" {
		t.Errorf("4 queues: app_cpus %v", p.AppCPUs)
	}
}

// Single-node hosts keep AWS Graviton memcached tuning's ratio, with at most two queues per
// IRQ CPU: 8 CPUs and 8 queues is 4 IRQ CPUs, never all on CPU 0.
func TestPerQueueSingleNodeManyQueues(t *testing.T) {
	h := synth{CPUs: 8, NICs: []synthNIC{{Name: "eth0", Queues: 8}}}.Build()
	p := mustMake(t, "per-queue", h, Options{})
	if got := irqCPUs(p); got != "0 0 2 2 4 4 6 6" {
		t.Errorf("IRQ CPUs %q", got)
	}
	if p.AppCPUs.String() != "1,3,5,7" {
		t.Errorf("app_cpus %s", p.AppCPUs)
	}
}

// Properties on generated hosts of every size: the same input gives the
// same plan; no IRQ, RPS, XPS or application CPU outside the usable set
// (checkProperties); when a NIC has no more queues than its node has
// physical cores, per-queue and colocate put its queues on distinct cores.
func TestPolicyPropertiesOnGeneratedHosts(t *testing.T) {
	specs := map[string]hostgen.Spec{
		"32 CPUs 4 nodes":   serverSpec(),
		"112 CPUs 2 nodes":  {CPUs: 112, Packages: 2, Nodes: 2, NICs: []hostgen.NICSpec{{Name: "eth0", Driver: "ice", Slot: 3, Node: 1, Queues: 16}, {Name: "eth1", Driver: "ice", Slot: 5, Node: 1, Queues: 8}}, NVMeQueues: 16},
		"256 CPUs default":  hostgen.DefaultSpec(),
		"1152 CPUs 8 nodes": {CPUs: 1152, Packages: 8, Nodes: 8, NICs: []hostgen.NICSpec{{Name: "eth0", Driver: "mlx5_core", Slot: 3, Node: 5, Queues: 63}}, NVMeQueues: -1},
		"isolated 64":       {CPUs: 64, Packages: 2, Nodes: 2, Isolated: cpuset.MustParse("2-5,34-37"), NICs: []hostgen.NICSpec{{Name: "eth0", Driver: "ice", Slot: 3, Node: 0, Queues: 12}}, NVMeQueues: -1},
	}
	if testing.Short() {
		delete(specs, "1152 CPUs 8 nodes")
	}
	for name, spec := range specs {
		h := plantest.GenHost(t, spec, nil)
		b, err := newBuilder(h, Options{}, "check")
		if err != nil {
			t.Fatal(err)
		}
		for _, pol := range []string{"per-queue", "colocate", "dedicated-core", "rps-spread", "efficiency", "latency"} {
			p1, err := Make(pol, h, Options{})
			if err != nil {
				t.Fatalf("%s %s: %v", name, pol, err)
			}
			p2, _ := Make(pol, h, Options{})
			y1, _ := p1.MarshalFile()
			y2, _ := p2.MarshalFile()
			if !bytes.Equal(y1, y2) {
				t.Errorf("%s %s: two runs on the same host differ", name, pol)
			}
			checkProperties(t, name+" "+pol, h, p1)
			if pol != "per-queue" && pol != "colocate" {
				continue
			}
			ts, _ := b.targets()
			for _, tg := range ts {
				P, _ := b.nodeCPUs(tg.nic)
				if len(tg.queues) == 0 || len(tg.queues) > b.cores(P) {
					continue
				}
				cores := map[string]int{}
				for _, e := range p1.IRQs {
					if q := h.IRQ(*e.IRQ); q != nil && q.Device == tg.nic.Name {
						cores[b.siblings(e.CPUs.Min()).String()]++
					}
				}
				if len(cores) != len(tg.queues) {
					t.Errorf("%s %s: %s's %d queues on %d cores (%v)", name, pol, tg.nic.Name, len(tg.queues), len(cores), cores)
				}
			}
		}
	}
}

// The default scope: the interface that carries the default route is left
// out (and said so) unless named or --include-default-route; IRQs that
// serve no device queue only with --machine-wide.
func TestDefaultScopeLeavesOutDefaultRoute(t *testing.T) {
	spec := hostgen.DefaultSpec()
	h := plantest.GenHost(t, spec, nil)
	h.NIC("eth0").DefaultRoute = true
	for _, pol := range []string{"per-queue", "colocate", "dedicated-core", "rps-spread", "efficiency", "latency"} {
		p := mustMake(t, pol, h, Options{})
		for _, d := range planDevices(h, p) {
			if d == "eth0" {
				t.Errorf("%s: the plan touches eth0, which carries the default route", pol)
			}
		}
		if !strings.Contains(strings.Join(p.Notes, "\n"), "left out eth0: it carries the default route") {
			t.Errorf("%s: notes %q do not say eth0 was left out", pol, p.Notes)
		}
		for _, o := range []Options{{Devices: []string{"eth0"}}, {IncludeDefaultRoute: true}} {
			q := mustMake(t, pol, h, o)
			if !slices.Contains(planDevices(h, q), "eth0") {
				t.Errorf("%s %+v: eth0 not planned", pol, o)
			}
		}
	}
	// dedicated-core: only queue IRQs (NIC and NVMe) by default; rtc0,
	// acpi, the NICs' misc vectors and eth0's IRQs stay.
	p, _ := Make("dedicated-core", h, Options{})
	for _, e := range p.IRQs {
		q := h.IRQ(*e.IRQ)
		if q.Queue == nil || q.Device == "eth0" {
			t.Errorf("default scope moved irq %d %v", q.Number, q.Actions)
		}
	}
	all, _ := Make("dedicated-core", h, Options{MachineWide: true, IncludeDefaultRoute: true})
	if len(all.IRQs) <= len(p.IRQs) {
		t.Errorf("--machine-wide --include-default-route: %d IRQs, default %d", len(all.IRQs), len(p.IRQs))
	}
	// A VLAN over the default-route NIC is left out with it.
	sh := synth{CPUs: 4, NICs: []synthNIC{{Name: "eth0", Queues: 1}, {Name: "eth0.7", Kind: "vlan", Lower: "eth0", Queues: 1}, {Name: "eth1", Queues: 2}}}.Build()
	sh.NIC("eth0").DefaultRoute = true
	p, _ = Make("rps-spread", sh, Options{})
	if got := fmt.Sprint(planDevices(sh, p)); got != "[eth1]" {
		t.Errorf("VLAN over the management NIC: planned %s, want [eth1]", got)
	}
}

// planDevices lists the devices a plan has entries for (IRQs by their
// device), sorted.
func planDevices(h *host.Host, p *plan.Plan) []string {
	seen := map[string]bool{}
	for _, e := range p.IRQs {
		if e.IRQ != nil {
			if q := h.IRQ(*e.IRQ); q != nil && q.Device != "" {
				seen[q.Device] = true
			}
			for i := range h.NICs {
				for _, n := range h.NICs[i].IRQs {
					if n == *e.IRQ {
						seen[h.NICs[i].Name] = true
					}
				}
			}
		}
		if e.Device != "" {
			seen[e.Device] = true
		}
	}
	for _, e := range p.RxQueues {
		seen[e.Device] = true
	}
	for _, e := range p.TxQueues {
		seen[e.Device] = true
	}
	for _, e := range p.NAPI {
		seen[e.Device] = true
	}
	return slices.Sorted(maps.Keys(seen))
}

// A device without IRQs (veth) gets no IRQ wording in any policy's reasons:
// nothing is "on its IRQ CPU", no IRQ is deferred or suspended.
func TestReasonsFitDevicesWithoutIRQs(t *testing.T) {
	h := synth{CPUs: 4, NICs: []synthNIC{{Name: "vth0", Kind: "veth", Queues: 2, NoIRQs: true}}}.Build()
	irqWord := func(s string) bool {
		s = strings.ReplaceAll(s, "Intel IRQ+process affinity study", "") // a source's name
		return strings.Contains(strings.ReplaceAll(s, "has no IRQ", ""), "IRQ")
	}
	for _, pol := range []string{"per-queue", "colocate", "rps-spread", "efficiency", "latency"} {
		p := mustMake(t, pol, h, Options{Devices: []string{"vth0"}})
		var reasons []string
		for _, e := range p.RxQueues {
			reasons = append(reasons, e.Reason)
		}
		for _, e := range p.TxQueues {
			reasons = append(reasons, e.Reason)
		}
		for _, e := range p.NAPI {
			reasons = append(reasons, e.Reason)
		}
		if len(p.IRQs) > 0 {
			t.Errorf("%s: IRQ entries for a device without IRQs: %+v", pol, p.IRQs)
		}
		for _, r := range reasons {
			if irqWord(r) {
				t.Errorf("%s: reason speaks of an IRQ vth0 does not have: %q", pol, r)
			}
		}
		if pol == "per-queue" && !strings.Contains(p.Why, "vth0: 2 queue(s), no IRQ") {
			t.Errorf("per-queue why %q", p.Why)
		}
	}
}

// efficiency's current values are read the way apply reads them: an
// existing napi_defer_hard_irqs / gro_flush_timeout gives its value, not
// "unknown".
func TestEfficiencyReadsCurrentValues(t *testing.T) {
	dir, cleanup, err := hostgen.ScratchDir()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cleanup)
	if err := hostgen.Generate(dir, serverSpec()); err != nil {
		t.Fatal(err)
	}
	for f, v := range map[string]string{"napi_defer_hard_irqs": "0\n", "gro_flush_timeout": "20000\n"} {
		if err := os.WriteFile(filepath.Join(dir, "sys/class/net/eth1", f), []byte(v), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	fs := kernel.New(dir)
	h, err := host.Read(fs, host.Options{})
	if err != nil {
		t.Fatal(err)
	}
	p := mustMake(t, "efficiency", h, Options{})
	got, err := plan.Resolve(p, h)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 {
		t.Fatalf("resolved %+v", got)
	}
	for _, c := range got {
		hd, err := setting.Lookup(c.Kind)
		if err != nil {
			t.Fatal(err)
		}
		applied, err := hd.Read(&setting.Env{FS: fs}, &c)
		if err != nil {
			t.Fatal(err)
		}
		if c.Old == "" || strings.TrimSpace(applied) != c.Old {
			t.Errorf("%s: plan's current value %q, apply reads %q", c.Target, c.Old, applied)
		}
	}
	if s := setting.StatusFor(&got[0]); s != setting.StatusPending {
		t.Errorf("defer 0 → 2: status %s", s)
	}
	if s := setting.StatusFor(&got[1]); s != setting.StatusUnchanged {
		t.Errorf("gro_flush_timeout 20000 → 20000: status %s", s)
	}
}

// latency's notes state what the host's probe found, not a kernel version.
func TestLatencyNotesFromProbe(t *testing.T) {
	h := plantest.WithNAPI(t)
	no := false
	h.NAPISet = &no
	p := mustMake(t, "latency", h, Options{})
	notes := strings.Join(p.Notes, "\n")
	if !strings.Contains(notes, "no IRQ suspension for ens10f0: this kernel's netdev netlink family has no napi-set operation") {
		t.Errorf("notes %q", notes)
	}
	yes := true
	h.NAPISet = &yes
	p, _ = Make("latency", h, Options{})
	for _, s := range append(p.Notes, p.Why) {
		if strings.Contains(s, "6.13") || strings.Contains(s, "needs kernel") {
			t.Errorf("version claim with napi-set present: %q", s)
		}
	}
	if len(p.NAPI) != 3 {
		t.Errorf("napi-set present: %d entries, want the safety net and two suspensions", len(p.NAPI))
	}
}
