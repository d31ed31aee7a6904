package policy

import (
	"strings"
	"testing"

	"github.com/irqpilot/irqpilot/internal/cpuset"
	"github.com/irqpilot/irqpilot/internal/host"
	"github.com/irqpilot/irqpilot/internal/hostgen"
	"github.com/irqpilot/irqpilot/internal/kernel"
	"github.com/irqpilot/irqpilot/internal/plan"
	"github.com/irqpilot/irqpilot/internal/plan/plantest"
	"github.com/irqpilot/irqpilot/internal/setting"
)

// Every policy on every real captured host: the plan is valid, resolves
// against its host, survives a YAML round trip, and keeps the placement
// invariants (checkProperties).
func TestPoliciesOnFixtures(t *testing.T) {
	for _, name := range []string{
		"cluster-node-tuning-operator/bare-metal-master.internal-sysinfo.tgz",
		"cluster-node-tuning-operator/bare-metal-worker1.internal-sysinfo.tgz",
		"cluster-node-tuning-operator/sno-sysinfo.tgz",
		"node_exporter", "procfs", "sysstat/root3", "sysstat/root4",
	} {
		h := plantest.ReadSnapshot(t, name)
		for _, pol := range PolicyNames() {
			p, err := Make(pol, h, Options{App: "comm:memcached"})
			if err != nil {
				t.Errorf("%s %s: %v", name, pol, err)
				continue
			}
			checkProperties(t, name+" "+pol, h, p)
			q := plantest.RoundTrip(t, name+" "+pol, p, plan.Parse)
			if _, err := plan.Resolve(q, h); err != nil {
				t.Errorf("%s %s: reloaded plan does not resolve: %v", name, pol, err)
			}
		}
	}
}

// bare-metal master: 112 CPUs, node 0 = even CPUs, SMT siblings n and n+56;
// 8 NICs (i40e eno12399…, ice ens3f0…) all on node 0.
func TestPerQueueBareMetalMaster(t *testing.T) {
	h := plantest.ReadSnapshot(t, "cluster-node-tuning-operator/bare-metal-master.internal-sysinfo.tgz")
	p := mustMake(t, "per-queue", h, Options{App: "comm:memcached"})
	irqCPUs := cpuset.Set{}
	n := 0
	for _, e := range p.IRQs {
		irqCPUs = irqCPUs.Union(e.CPUs)
		q := h.IRQ(*e.IRQ)
		if q.Class != host.ClassNetwork || q.Queue == nil {
			t.Errorf("per-queue placed non-queue irq %d %v", q.Number, q.Actions)
		}
		n++
	}
	// Two nodes of 56 CPUs (node 0 even, node 1 odd; siblings n, n+56).
	// Node 0 serves the queues of the NICs on it: all 56 CPUs take queue
	// IRQs, half the machine stays free. NICs whose IRQs report node 1
	// would leave less than half free, so node 1 keeps the ratio: 7 IRQ
	// CPUs, the first of each block of 8 of its CPUs.
	even := cpuset.Set{}
	for c := 0; c < 112; c += 2 {
		even = even.Add(c)
	}
	if want := even.Union(cpuset.Of(1, 17, 33, 49, 65, 81, 97)); !irqCPUs.Equal(want) {
		t.Errorf("IRQ CPUs %s, want %s", irqCPUs, want)
	}
	for _, e := range p.IRQs {
		q := h.IRQ(*e.IRQ)
		if q.Node != nil && *q.Node >= 0 && e.CPUs.Min()%2 != *q.Node {
			t.Errorf("irq %d (node %d) on CPU %s of the other node", q.Number, *q.Node, e.CPUs)
		}
	}
	queueIRQs := 0
	for _, q := range h.IRQs {
		if q.Class == host.ClassNetwork && q.Queue != nil {
			queueIRQs++
		}
	}
	if n != queueIRQs || n < 800 {
		t.Errorf("placed %d of %d queue IRQs", n, queueIRQs)
	}
	if len(p.Apps) != 1 || !p.Apps[0].CPUs.Equal(cpuset.Range(0, 111).Difference(irqCPUs)) {
		t.Errorf("app CPUs %v, want every CPU but the IRQ CPUs", p.Apps)
	}
	// The topology rule: the ice ports have 112 queues for 28 node-0
	// cores → colocate. auto itself changes nothing without a measurement.
	a, err := topologyChoice(h, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if a.Policy != "colocate" || !strings.Contains(a.Why, "112 queue(s)") {
		t.Errorf("topology rule on master: %s — %s", a.Policy, a.Why)
	}
	if a, err := Make("auto", h, Options{}); err != nil || len(a.IRQs)+len(a.RxQueues)+len(a.Apps) != 0 || !strings.Contains(a.Why, "no load to judge") {
		t.Errorf("auto on master without a measurement: %v %+v", err, a)
	}
}

// worker1 runs an RT kernel with nohz_full=0-4,11-79 and
// isolcpus=managed_irq,0-4,11-79: only CPUs 5-10 may take IRQs.
func TestAutoIsolatedWorker(t *testing.T) {
	h := plantest.ReadSnapshot(t, "cluster-node-tuning-operator/bare-metal-worker1.internal-sysinfo.tgz")
	p := mustMake(t, "auto", h, Options{})
	if p.Policy != "dedicated-core" || !strings.Contains(p.Why, "housekeeping CPUs 5-10") {
		t.Fatalf("auto on worker1: %s — %s", p.Policy, p.Why)
	}
	if len(p.IRQs) < 400 {
		t.Errorf("only %d IRQs placed", len(p.IRQs))
	}
	for _, e := range p.IRQs {
		if e.CPUs.String() != "5-10" {
			t.Fatalf("irq %d on %s", *e.IRQ, e.CPUs)
		}
	}
	ss, err := plan.Resolve(p, h)
	if err != nil {
		t.Fatal(err)
	}
	// The capture's own affinities: many IRQs already sit on 5-10? Count what changes.
	changes := 0
	for _, s := range ss {
		if setting.StatusFor(&s) == setting.StatusPending {
			changes++
		}
	}
	if changes == 0 {
		t.Error("no IRQ would move, yet the capture has IRQs on isolated CPUs")
	}
}

// sno: a KVM guest with virtio-net known only from its IRQs (the capture has
// no /sys/class/net): one queue with separate input and output IRQs.
func TestSNOVirtio(t *testing.T) {
	h := plantest.ReadSnapshot(t, "cluster-node-tuning-operator/sno-sysinfo.tgz")
	p, err := topologyChoice(h, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if p.Policy != "per-queue" {
		t.Fatalf("topology rule on sno: %s — %s", p.Policy, p.Why)
	}
	// 12 CPUs: one IRQ CPU; virtio1-input.0 (69) and -output.0 (70) on CPU 0.
	got := map[int]string{}
	for _, e := range p.IRQs {
		got[*e.IRQ] = e.CPUs.String()
	}
	if len(got) != 2 || got[69] != "0" || got[70] != "0" {
		t.Errorf("IRQs %v", got)
	}
}

// The generated 256-CPU host (hostgen): 2 packages, 4 nodes, SMT, CPUs
// 250-255 offline, eth0 on node 0 and eth1 on node 3 with 64 queues each.
func TestPoliciesOnGeneratedHost(t *testing.T) {
	dir, cleanup, err := hostgen.ScratchDir()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cleanup)
	spec := hostgen.DefaultSpec()
	spec.Isolated = cpuset.MustParse("60-63")
	L, err := hostgen.Build(spec)
	if err != nil {
		t.Fatal(err)
	}
	if err := L.Write(dir); err != nil {
		t.Fatal(err)
	}
	h, err := host.Read(kernel.New(dir), host.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(h.CPUs) < 250 || h.NIC("eth0") == nil || h.NIC("eth1") == nil {
		t.Fatalf("generated host read as %d CPUs, NICs %d", len(h.CPUs), len(h.NICs))
	}
	node := map[string]cpuset.Set{}
	for _, nic := range []string{"eth0", "eth1"} {
		n := h.NIC(nic).Node
		for _, nd := range h.Topology.Nodes {
			if nd.ID == n {
				node[nic] = nd.CPUs.Intersect(h.Topology.Online)
			}
		}
	}
	for _, pol := range PolicyNames() {
		p := mustMake(t, pol, h, Options{})
		checkProperties(t, "hostgen "+pol, h, p)
		for _, e := range p.RxQueues {
			if e.RPSCPUs != nil && (e.RPSCPUs.Intersect(cpuset.Range(250, 255)).Len() > 0 || e.RPSCPUs.Intersect(spec.Isolated).Len() > 0) {
				t.Errorf("%s: %s rx-%d RPS on offline/isolated CPUs %s", pol, e.Device, *e.Queue, e.RPSCPUs)
			}
			if p.Policy != "dedicated-core" && !e.RPSCPUs.IsSubsetOf(node[e.Device]) {
				t.Errorf("%s: %s rx-%d RPS %s outside its node %s", pol, e.Device, *e.Queue, e.RPSCPUs, node[e.Device])
			}
		}
	}
	// colocate: 64 queues on node 0 → 64 distinct CPUs, first one per core.
	p, _ := Make("colocate", h, Options{Devices: []string{"eth0"}})
	cpus := cpuset.Set{}
	for _, e := range p.IRQs {
		cpus = cpus.Union(e.CPUs)
	}
	if cpus.Len() != 64 || !cpus.IsSubsetOf(node["eth0"]) || cpus.Intersect(spec.Isolated).Len() > 0 {
		t.Errorf("colocate eth0 CPUs %s (node %s)", cpus, node["eth0"])
	}
}

// BenchmarkPolicyMaster runs each policy plus Resolve on the 112-CPU,
// 1862-IRQ bare-metal master.
func BenchmarkPolicyMaster(b *testing.B) {
	h := plantest.ReadSnapshot(b, "cluster-node-tuning-operator/bare-metal-master.internal-sysinfo.tgz")
	for _, pol := range PolicyNames() {
		b.Run(pol, func(b *testing.B) {
			for b.Loop() {
				p, err := Make(pol, h, Options{})
				if err != nil {
					b.Fatal(err)
				}
				if _, err := plan.Resolve(p, h); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// Policy output survives a YAML and a JSON round trip unchanged.
func TestRoundTrip(t *testing.T) {
	h := synth{CPUs: 16, SMT: true, Balance: true, NICs: []synthNIC{{Name: "eth0", Queues: 4}, {Name: "eth0.7", Queues: 1, Kind: "vlan", Lower: "eth0"}}}.Build()
	for _, name := range PolicyNames() {
		for _, o := range []Options{{}, {App: "unit:memcached.service", Irqbalance: plan.IrqbalanceBan}} {
			p, err := Make(name, h, o)
			if name == "rps-spread" && o.Irqbalance == plan.IrqbalanceBan {
				// Nothing is isolated and no IRQ is placed: nothing to ban.
				if err == nil || !strings.Contains(err.Error(), "no CPU to ban") {
					t.Errorf("rps-spread ban: %v", err)
				}
				continue
			}
			if err != nil {
				t.Fatal(name, err)
			}
			plantest.RoundTrip(t, name, p, plan.Parse)
		}
	}
}
