package policy

import (
	"strconv"
	"strings"
	"testing"

	"github.com/irqpilot/irqpilot/internal/cpuset"
	"github.com/irqpilot/irqpilot/internal/host"
	"github.com/irqpilot/irqpilot/internal/plan"
	"github.com/irqpilot/irqpilot/internal/setting"
)

// TestPerQueueSeed002Table reproduces AWS Graviton memcached tuning's table exactly (AWS A1
// instances: one NUMA node, no SMT).
func TestPerQueueSeed002Table(t *testing.T) {
	cases := []struct {
		cpus, queues int
		irq          []string // per queue
		rps          []string // per rx queue
		app          string
	}{
		{4, 1, []string{"0"}, []string{"0"}, "1-3"},
		{8, 2, []string{"0", "0"}, []string{"0-3", "4-7"}, "1-7"},
		{16, 2, []string{"0", "8"}, []string{"0-7", "8-15"}, "1-7,9-15"},
	}
	for _, c := range cases {
		h := synth{CPUs: c.cpus, NICs: []synthNIC{{Name: "eth0", Queues: c.queues}}, Balance: true}.Build()
		p, err := Make("per-queue", h, Options{App: "comm:memcached"})
		if err != nil {
			t.Fatalf("%d CPUs: %v", c.cpus, err)
		}
		var gotIRQ, gotRPS []string
		for _, e := range p.IRQs {
			gotIRQ = append(gotIRQ, e.CPUs.String())
		}
		for _, e := range p.RxQueues {
			gotRPS = append(gotRPS, e.RPSCPUs.String())
			if e.RPSFlowCnt != nil {
				t.Errorf("%d CPUs: AWS Graviton memcached tuning sets no rps_flow_cnt, plan has %d", c.cpus, *e.RPSFlowCnt)
			}
		}
		if strings.Join(gotIRQ, " ") != strings.Join(c.irq, " ") {
			t.Errorf("%d CPUs/%d queues: IRQ CPUs %v, AWS Graviton memcached tuning says %v", c.cpus, c.queues, gotIRQ, c.irq)
		}
		if strings.Join(gotRPS, " ") != strings.Join(c.rps, " ") {
			t.Errorf("%d CPUs/%d queues: RPS %v, AWS Graviton memcached tuning says %v", c.cpus, c.queues, gotRPS, c.rps)
		}
		if len(p.Apps) != 1 || p.Apps[0].CPUs.String() != c.app || p.Apps[0].Comm != "memcached" {
			t.Errorf("%d CPUs: apps %+v, AWS Graviton memcached tuning says %s", c.cpus, p.Apps, c.app)
		}
		if p.Irqbalance == nil || p.Irqbalance.Mode != plan.IrqbalanceStop {
			t.Errorf("%d CPUs: AWS Graviton memcached tuning stops a running irqbalance, plan: %+v", c.cpus, p.Irqbalance)
		}
		// The same table through the resolved kernel settings: the masks the
		// seed's script wrote (rx-0 "1"/"f"/"ff", rx-1 "f0"/"ff00").
		ss, err := plan.Resolve(p, h)
		if err != nil {
			t.Fatal(err)
		}
		var masks []string
		for _, s := range ss {
			if s.Kind == setting.KindRPSCPUs {
				m, _ := cpuset.ParseMask(s.Value)
				masks = append(masks, strings.TrimLeft(m.Mask(32), "0"))
			}
		}
		want := map[int]string{4: "1", 8: "f f0", 16: "ff ff00"}[c.cpus]
		if strings.Join(masks, " ") != want {
			t.Errorf("%d CPUs: rps masks %v, seed script wrote %s", c.cpus, masks, want)
		}
	}
}

// Without an application selector the plan only advises app CPUs.
func TestPerQueueAppAdvice(t *testing.T) {
	h := synth{CPUs: 16, NICs: []synthNIC{{Name: "eth0", Queues: 2}}}.Build()
	p := mustMake(t, "per-queue", h, Options{})
	if len(p.Apps) != 0 || p.AppCPUs == nil || p.AppCPUs.String() != "1-7,9-15" {
		t.Fatalf("apps %+v app_cpus %v", p.Apps, p.AppCPUs)
	}
	o := Options{AppCPUs: ptr(cpuset.MustParse("2-5")), App: "pid:42"}
	p = mustMake(t, "per-queue", h, o)
	if len(p.Apps) != 1 || p.Apps[0].PID != 42 || p.Apps[0].CPUs.String() != "2-5" {
		t.Fatalf("apps %+v", p.Apps)
	}
}

// SMT: with siblings (i, i+8), per-queue's second IRQ CPU is not CPU 8 (the
// sibling of CPU 0) but the next CPU of its block.
func TestPerQueueAvoidsSiblings(t *testing.T) {
	for _, tc := range []struct {
		why, policy, want string
		cpus, queues      int
	}{
		{"8 is CPU 0's sibling", "per-queue", "0 9", 16, 2},
		{"colocate: one queue per physical core first; 4-7 are siblings", "colocate", "0 1 2 3", 8, 4},
		{"6 queues on 4 cores: the extra two go to siblings", "colocate", "0 1 2 3 4 5", 8, 6},
	} {
		h := synth{CPUs: tc.cpus, SMT: true, NICs: []synthNIC{{Name: "eth0", Queues: tc.queues}}}.Build()
		if got := irqCPUs(mustMake(t, tc.policy, h, Options{})); got != tc.want {
			t.Errorf("%s, %d CPUs, %d queues: IRQ CPUs %q, want %s (%s)", tc.policy, tc.cpus, tc.queues, got, tc.want, tc.why)
		}
	}
}

func irqCPUs(p *plan.Plan) string {
	var s []string
	for _, e := range p.IRQs {
		s = append(s, e.CPUs.String())
	}
	return strings.Join(s, " ")
}

// NUMA: the NIC on node 1 gets its IRQs and RPS on node 1's CPUs.
func TestPoliciesNUMALocal(t *testing.T) {
	h := synth{CPUs: 32, Nodes: 2, NICs: []synthNIC{{Name: "eth0", Queues: 4, Node: 1}}}.Build()
	node1 := cpuset.Range(16, 31)
	for _, name := range []string{"per-queue", "colocate", "rps-spread"} {
		p := mustMake(t, name, h, Options{})
		for _, e := range p.IRQs {
			if !e.CPUs.IsSubsetOf(node1) {
				t.Errorf("%s: irq %d on %s, not node 1", name, *e.IRQ, e.CPUs)
			}
		}
		for _, e := range p.RxQueues {
			if !e.RPSCPUs.IsSubsetOf(node1) {
				t.Errorf("%s: rps %s not on node 1", name, e.RPSCPUs)
			}
		}
		if name == "rps-spread" && p.RxQueues[0].RPSCPUs.String() != "16-31" {
			t.Errorf("rps-spread over %s, want all of node 1", p.RxQueues[0].RPSCPUs)
		}
	}
	// per-queue on a two-node machine, 4 queues: node 1 serves them (half
	// of the CPUs stay free), each queue on its own CPU; each RPS group is
	// the queue's IRQ CPU and a contiguous quarter of the other 12; the
	// application gets every other CPU, node 0 included.
	p, _ := Make("per-queue", h, Options{})
	if got := irqCPUs(p); got != "16 17 18 19" {
		t.Errorf("per-queue IRQ CPUs %q", got)
	}
	if p.RxQueues[3].RPSCPUs.String() != "19,29-31" {
		t.Errorf("per-queue rx-3 RPS %s", p.RxQueues[3].RPSCPUs)
	}
	if p.AppCPUs == nil || p.AppCPUs.String() != "0-15,20-31" {
		t.Errorf("per-queue app_cpus %v, want every usable CPU without a queue IRQ", p.AppCPUs)
	}
	// IRQCores option: two IRQ CPUs, queues shared in order.
	p, _ = Make("per-queue", h, Options{IRQCores: 2})
	if got := irqCPUs(p); got != "16 16 17 17" {
		t.Errorf("per-queue --irq-cores 2: %q", got)
	}
}

func TestDedicatedCore(t *testing.T) {
	h := synth{CPUs: 8, Balance: true, NICs: []synthNIC{{Name: "eth0", Queues: 3}, {Name: "nvme-ish", Queues: 2, Managed: true}}}.Build()
	p := mustMake(t, "dedicated-core", h, Options{})
	// eth0's 3 queue IRQs; not the timer, not the managed ones, and by
	// default not IRQ 9 (acpi), which serves no device queue: the plan
	// says so, and --machine-wide puts it back.
	var nums []int
	for _, e := range p.IRQs {
		nums = append(nums, *e.IRQ)
		if e.CPUs.String() != "0" {
			t.Errorf("irq %d on %s, want 0", *e.IRQ, e.CPUs)
		}
	}
	if cpuset.Of(nums...).String() != "100-102" {
		t.Errorf("IRQs placed: %v", nums)
	}
	if !strings.Contains(strings.Join(p.Notes, "\n"), "left out irq 9 (acpi): it serves no network or storage queue; add --machine-wide") {
		t.Errorf("notes %q do not say irq 9 was left out", p.Notes)
	}
	if mw, err := Make("dedicated-core", h, Options{MachineWide: true}); err != nil || len(mw.IRQs) != 4 || *mw.IRQs[0].IRQ != 9 {
		t.Errorf("--machine-wide: %v %+v, want irq 9 and eth0's three", err, mw)
	}
	if !strings.Contains(strings.Join(p.Notes, "\n"), "IRQs 103-104 are kernel-managed") {
		t.Errorf("notes %q do not explain the managed IRQs", p.Notes)
	}
	if p.RPSSockFlowEntries.Value != 65536 {
		t.Errorf("rps_sock_flow_entries %d", p.RPSSockFlowEntries.Value)
	}
	for _, e := range p.RxQueues {
		if e.Device == "eth0" && (e.RPSCPUs.String() != "1-7" || *e.RPSFlowCnt != 16384) {
			t.Errorf("eth0 rx-%d: rps %s flow %d, want 1-7 and 65536/3→16384", *e.Queue, e.RPSCPUs, *e.RPSFlowCnt)
		}
	}
	if p.Irqbalance.Mode != plan.IrqbalanceStop {
		t.Errorf("irqbalance %v, want stop (ClustrixDB core-0 write-up)", p.Irqbalance.Mode)
	}
	// The ClustrixDB core-0 write-up: 8 queues → 8192 per queue.
	h8 := synth{CPUs: 32, NICs: []synthNIC{{Name: "eth0", Queues: 8}}}.Build()
	p, _ = Make("dedicated-core", h8, Options{Housekeeping: cpuset.MustParse("0-1")})
	if *p.RxQueues[0].RPSFlowCnt != 8192 || p.RxQueues[0].RPSCPUs.String() != "2-31" || p.IRQs[0].CPUs.String() != "0-1" {
		t.Errorf("ClustrixDB core-0 write-up shape: %+v %+v", p.RxQueues[0], p.IRQs[0])
	}
	// Bad housekeeping CPUs are clear errors.
	hb := synth{CPUs: 8, Offline: []int{3}, Isolated: []int{5}, NICs: []synthNIC{{Name: "eth0", Queues: 1}}}.Build()
	for hk, want := range map[string]string{"3": "CPU 3 is offline", "5": "CPU 5 is isolated", "64": "CPU 64 does not exist"} {
		_, err := Make("dedicated-core", hb, Options{Housekeeping: cpuset.MustParse(hk)})
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("housekeeping %s: %v, want %q", hk, err, want)
		}
	}
}

func TestRPSSpreadSeed004(t *testing.T) {
	// RPS/RFS on a single-queue NIC: 2 cores/4 threads, single-queue 82574L, VLAN eth1.xx.
	h := synth{CPUs: 4, NICs: []synthNIC{{Name: "eth1", Queues: 1}, {Name: "eth1.10", Queues: 1, Kind: "vlan", Lower: "eth1"}}}.Build()
	p := mustMake(t, "rps-spread", h, Options{})
	if len(p.IRQs) != 0 {
		t.Errorf("rps-spread touched IRQs: %+v", p.IRQs)
	}
	got := map[string]string{}
	for _, e := range p.RxQueues {
		got[e.Device] = e.RPSCPUs.Mask(4) + "/" + strconv.Itoa(*e.RPSFlowCnt)
	}
	// rps_cpus=f on the VLAN device (RPS/RFS on a single-queue NIC), flow cnt = 32768 / 1 queue.
	if got["eth1.10"] != "0000000f/32768" || got["eth1"] != "0000000f/32768" {
		t.Errorf("rps %v", got)
	}
	if p.RPSSockFlowEntries.Value != 32768 || p.Irqbalance.Mode != plan.IrqbalanceLeave {
		t.Errorf("sock flow %d, irqbalance %s", p.RPSSockFlowEntries.Value, p.Irqbalance.Mode)
	}
	// A VLAN on a multi-queue NIC is not steered itself.
	h = synth{CPUs: 4, NICs: []synthNIC{{Name: "eth1", Queues: 4}, {Name: "eth1.10", Queues: 1, Kind: "vlan", Lower: "eth1"}}}.Build()
	p, _ = Make("rps-spread", h, Options{})
	for _, e := range p.RxQueues {
		if e.Device == "eth1.10" {
			t.Errorf("VLAN over multi-queue eth1 steered: %+v", e)
		}
	}
	// per-queue steers the VLAN like its single-queue lower.
	h = synth{CPUs: 16, NICs: []synthNIC{{Name: "eth1", Queues: 1}, {Name: "eth1.10", Queues: 1, Kind: "vlan", Lower: "eth1"}}}.Build()
	p, _ = Make("per-queue", h, Options{})
	got = map[string]string{}
	for _, e := range p.RxQueues {
		got[e.Device] = e.RPSCPUs.String()
	}
	if got["eth1"] != "0-15" || got["eth1.10"] != "0-15" {
		t.Errorf("per-queue VLAN rps %v", got)
	}
}

func TestColocateVeth(t *testing.T) {
	// A veth pair (no IRQs) selected by name: steering only, one core per queue.
	h := synth{CPUs: 4, NICs: []synthNIC{{Name: "eth0", Queues: 1}, {Name: "veth0", Queues: 4, Kind: "veth"}}}.Build()
	p := mustMake(t, "colocate", h, Options{Devices: []string{"veth0"}})
	if len(p.IRQs) != 0 || len(p.RxQueues) != 4 || len(p.TxQueues) != 4 {
		t.Fatalf("irqs %d rx %d tx %d", len(p.IRQs), len(p.RxQueues), len(p.TxQueues))
	}
	for i := range 4 {
		if p.RxQueues[i].RPSCPUs.String() != strconv.Itoa(i) || p.TxQueues[i].XPSCPUs.String() != strconv.Itoa(i) {
			t.Errorf("queue %d: rps %s xps %s", i, p.RxQueues[i].RPSCPUs, p.TxQueues[i].XPSCPUs)
		}
	}
	if _, err := Make("colocate", h, Options{Devices: []string{"nope0"}}); err == nil || !strings.Contains(err.Error(), "nope0 not found") {
		t.Errorf("missing device: %v", err)
	}
}

func TestPoliciesAvoidOfflineAndIsolated(t *testing.T) {
	h := synth{CPUs: 16, Offline: []int{0, 8}, Isolated: []int{1, 9, 10}, NICs: []synthNIC{{Name: "eth0", Queues: 4}}}.Build()
	for _, name := range PolicyNames() {
		p := mustMake(t, name, h, Options{})
		checkProperties(t, name, h, p)
		if name == "dedicated-core" && p.IRQs[0].CPUs.String() != "2" {
			t.Errorf("default housekeeping %s, want the lowest usable CPU 2", p.IRQs[0].CPUs)
		}
	}
	// Every CPU isolated: a clear error.
	h = synth{CPUs: 2, Isolated: []int{0, 1}, NICs: []synthNIC{{Name: "eth0", Queues: 1}}}.Build()
	if _, err := Make("per-queue", h, Options{}); err == nil || !strings.Contains(err.Error(), "no usable CPU") {
		t.Errorf("all isolated: %v", err)
	}
}

// TestTopologyChoices: the topology rule auto used before it decided from
// evidence; it survives as one candidate among others.
func TestTopologyChoices(t *testing.T) {
	cases := []struct {
		name string
		s    synth
		load *MeasuredLoad
		want string
	}{
		{"single queue spreads", synth{CPUs: 4, NICs: []synthNIC{{Name: "eth0", Queues: 1}}}, nil, "rps-spread"},
		{"single queue, idle IRQ CPU", synth{CPUs: 4, NICs: []synthNIC{{Name: "eth0", Queues: 1}}},
			&MeasuredLoad{IRQShare: map[int]float64{0: 0.05, 1: 0.01, 2: 0, 3: 0}}, "per-queue"},
		{"single queue, hot IRQ CPU", synth{CPUs: 4, NICs: []synthNIC{{Name: "eth0", Queues: 1}}},
			&MeasuredLoad{IRQShare: map[int]float64{0: 0.53, 1: 0.1}}, "rps-spread"},
		{"few queues", synth{CPUs: 16, NICs: []synthNIC{{Name: "eth0", Queues: 2}}}, nil, "per-queue"},
		{"queues per core", synth{CPUs: 16, SMT: true, NICs: []synthNIC{{Name: "eth0", Queues: 8}}}, nil, "colocate"},
		{"managed queues", synth{CPUs: 16, NICs: []synthNIC{{Name: "eth0", Queues: 4, Managed: true}}}, nil, "rps-spread"},
		{"isolated CPUs", synth{CPUs: 8, Isolated: []int{2, 3, 4, 5, 6, 7}, NICs: []synthNIC{{Name: "eth0", Queues: 4}}}, nil, "dedicated-core"},
		{"one CPU", synth{CPUs: 1, NICs: []synthNIC{{Name: "eth0", Queues: 1}}}, nil, "dedicated-core"},
		{"no NIC", synth{CPUs: 4}, nil, "auto"},
	}
	for _, c := range cases {
		h := c.s.Build()
		p, err := topologyChoice(h, Options{Load: c.load})
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if p.Policy != c.want {
			t.Errorf("%s: auto chose %s, want %s (why: %s)", c.name, p.Policy, c.want, p.Why)
		}
		if !strings.HasPrefix(p.Why, "auto") {
			t.Errorf("%s: why %q does not explain the choice", c.name, p.Why)
		}
		checkProperties(t, "auto/"+c.name, h, p)
	}
	// isolated: housekeeping = the usable CPUs.
	h := cases[6].s.Build()
	p, _ := topologyChoice(h, Options{})
	if p.IRQs[0].CPUs.String() != "0-1" || p.RxQueues[0].RPSCPUs.String() != "0-1" {
		t.Errorf("auto with isolated CPUs: irq %s rps %s", p.IRQs[0].CPUs, p.RxQueues[0].RPSCPUs)
	}
}

// checkProperties asserts the policy invariants on a plan for h: it
// resolves against h; no offline, absent or isolated CPU is targeted; every
// movable queue IRQ of a steered physical NIC is placed (policies that place
// IRQs); queue IRQs are NUMA-local when the NIC's node has usable CPUs; no
// two distinct queue-IRQ CPUs are SMT siblings when there are cores enough.
func checkProperties(t *testing.T, name string, h *host.Host, p *plan.Plan) {
	t.Helper()
	if _, err := plan.Resolve(p, h); err != nil {
		t.Errorf("%s: plan does not resolve on its own host: %v", name, err)
		return
	}
	b, err := newBuilder(h, Options{}, "check")
	if err != nil {
		t.Fatal(err)
	}
	bad := func(what string, s cpuset.Set) {
		if !s.IsSubsetOf(b.usable) {
			t.Errorf("%s: %s uses CPUs %s outside the usable (online, not isolated) set %s", name, what, s.Difference(b.usable), b.usable)
		}
	}
	placed := map[int]cpuset.Set{}
	for _, e := range p.IRQs {
		bad("irq "+strconv.Itoa(*e.IRQ), e.CPUs)
		placed[*e.IRQ] = e.CPUs
	}
	for _, e := range p.RxQueues {
		if e.RPSCPUs != nil {
			bad(e.Device+" rps", *e.RPSCPUs)
		}
	}
	for _, e := range p.TxQueues {
		bad(e.Device+" xps", e.XPSCPUs)
	}
	for _, e := range p.Apps {
		bad("app", e.CPUs)
	}
	if p.Policy == "latency" || p.Policy == "efficiency" {
		checkMitigation(t, name, p, bad)
		return
	}
	if p.Policy == "rps-spread" || p.Policy == "auto" {
		if p.Policy == "rps-spread" && len(p.IRQs) > 0 {
			t.Errorf("%s: rps-spread placed IRQs", name)
		}
		return
	}
	ts, _ := b.targets()
	distinct := cpuset.Set{}
	pool := cpuset.Set{}
	for _, tg := range ts {
		local, isLocal := b.nodeCPUs(tg.nic)
		pool = pool.Union(local)
		for _, qi := range tg.queues {
			for _, irq := range tg.irqs[qi] {
				cpus, ok := placed[irq.Number]
				if !irq.Movable() {
					if ok {
						t.Errorf("%s: managed irq %d placed", name, irq.Number)
					}
					continue
				}
				if !ok {
					t.Errorf("%s: movable %s queue %d irq %d not placed", name, tg.nic.Name, qi, irq.Number)
					continue
				}
				if isLocal && p.Policy != "dedicated-core" && !cpus.IsSubsetOf(local) {
					t.Errorf("%s: %s irq %d on %s, not NUMA-local (%s)", name, tg.nic.Name, irq.Number, cpus, local)
				}
				if cpus.Len() == 1 {
					distinct = distinct.Union(cpus)
				}
			}
		}
	}
	if p.Policy == "dedicated-core" {
		return
	}
	if distinct.Len() <= b.cores(pool) {
		for _, c := range distinct.CPUs() {
			if s := b.siblings(c).Intersect(distinct); s.Len() > 1 {
				t.Errorf("%s: queue IRQ CPUs %s are SMT siblings although %d cores suffice for %d IRQ CPUs", name, s, b.cores(pool), distinct.Len())
			}
		}
	}
}

func TestAppCPUsChecked(t *testing.T) {
	h := synth{CPUs: 8, Offline: []int{6}, NICs: []synthNIC{{Name: "eth0", Queues: 2}}}.Build()
	for list, want := range map[string]string{"5-6": "application CPU 6 is offline", "7-9": "application CPUs 8-9 do not exist"} {
		s := cpuset.MustParse(list)
		_, err := Make("per-queue", h, Options{AppCPUs: &s})
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("--app-cpus %s: %v, want %q", list, err, want)
		}
	}
}
