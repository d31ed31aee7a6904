package policy

import (
	"compress/bzip2"
	"io"
	"os"
	"testing"

	"github.com/irqpilot/irqpilot/internal/cpuset"
	"github.com/irqpilot/irqpilot/internal/host"
	"github.com/irqpilot/irqpilot/internal/hostgen"
	"github.com/irqpilot/irqpilot/internal/plan"
	"github.com/irqpilot/irqpilot/internal/plan/plantest"
)

// Planner at fleet scale: the largest hosts irqpilot has data for — the
// captured 112-CPU OpenShift master (1 875 IRQs), the 1 152-CPU machine
// whose /proc/interrupts PCP keeps (1 034 IRQs, 384 i40e queue vectors,
// 568 lpfc vectors), and a generated 1 024-CPU host — planned with every
// policy. TestPlansAtFleetScale checks the plans keep the same invariants
// as on small hosts; BenchmarkPlanFleetScale times Make + Resolve
// (docs/benchmarks.md, "Planner at fleet scale").

// scaleHost is one large host and, for auto, a measurement to judge.
type scaleHost struct {
	name string
	h    *host.Host
}

// pcp1152 is the 1 152-CPU machine: its real /proc/interrupts (PCP's QA
// data) on a generated topology of the same width — 8 packages = 8 nodes of
// 72 cores × 2 threads — since only /proc/interrupts and /proc/softirqs of
// that machine were published. Its NICs are known only from their IRQ names.
func pcp1152(t testing.TB) *host.Host {
	t.Helper()
	f, err := os.Open(plantest.Fixtures + "pcp/interrupts-1152cpu-x86_64.bz2")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b, err := io.ReadAll(bzip2.NewReader(f))
	if err != nil {
		t.Fatal(err)
	}
	return plantest.GenHost(t, hostgen.Spec{CPUs: 1152, Packages: 8, Nodes: 8, ThreadsPerCore: 2,
		Offline: hostgen.NoOffline, NICs: []hostgen.NICSpec{}, NVMeQueues: -1}, b)
}

// gen1024 is a generated 1 024-CPU host: 4 packages, 8 nodes, SMT, the
// last 6 CPUs offline, 4 isolated, two 128-queue NICs on nodes 0 and 7 and
// a 128-queue NVMe drive.
func gen1024(t testing.TB) *host.Host {
	t.Helper()
	return plantest.GenHost(t, hostgen.Spec{CPUs: 1024, Packages: 4, Nodes: 8, ThreadsPerCore: 2,
		Isolated: cpuset.MustParse("60-63"),
		NICs: []hostgen.NICSpec{
			{Name: "eth0", Driver: "ice", Slot: 3, Node: 0, Queues: 128},
			{Name: "eth1", Driver: "ice", Slot: 5, Node: 7, Queues: 128},
		}}, nil)
}

func scaleHosts(t testing.TB) []scaleHost {
	return []scaleHost{
		{"master-112cpu", plantest.ReadSnapshot(t, "cluster-node-tuning-operator/bare-metal-master.internal-sysinfo.tgz")},
		{"pcp-1152cpu", pcp1152(t)},
		{"gen-1024cpu", gen1024(t)},
	}
}

// autoLoad is a measurement for auto on h, as in TestAutoOnGeneratedHost:
// two movable queue IRQs of one network device fire 30 000/s each on CPU 3
// and keep it 94 % busy in interrupt context, every other CPU idle — a
// load that spreading the two IRQs relieves.
func autoLoad(t testing.TB, h *host.Host) Options {
	t.Helper()
	byDev := map[string][]int{}
	for _, q := range h.IRQs {
		if q.Class != host.ClassNetwork || q.Device == "" || q.Queue == nil || !q.Movable() {
			continue
		}
		if byDev[q.Device] = append(byDev[q.Device], q.Number); len(byDev[q.Device]) == 2 {
			rates := map[int]map[int]float64{}
			for _, n := range byDev[q.Device] {
				rates[n] = map[int]float64{3: 30000}
			}
			l := synthLoad(h, map[int]cpuProfile{3: {sys: 4, irq: 20, soft: 70}}, rates, nil)
			return Options{Load: Measured(l)}
		}
	}
	t.Fatalf("%s: no network device with two movable queue IRQs to load", h.Hostname)
	return Options{}
}

// TestPlansAtFleetScale: on each large host every policy makes a plan that
// resolves, keeps the placement invariants small hosts keep
// (checkProperties: only usable CPUs, every movable queue IRQ placed and
// NUMA-local, no managed IRQ touched), and survives a YAML round trip; auto
// with a hot CPU plans a change.
func TestPlansAtFleetScale(t *testing.T) {
	if testing.Short() {
		t.Skip("reads three large hosts (seconds)")
	}
	hosts := scaleHosts(t)
	for _, s := range hosts {
		queueIRQs := 0
		for _, q := range s.h.IRQs {
			if q.Queue != nil && q.Class == host.ClassNetwork {
				queueIRQs++
			}
		}
		// What makes these hosts large: the test would prove little if a
		// reader returned less.
		if len(s.h.CPUs) < 112 || len(s.h.IRQs) < 390 || queueIRQs < 256 {
			t.Fatalf("%s read as %d CPUs, %d IRQs, %d network queue IRQs", s.name, len(s.h.CPUs), len(s.h.IRQs), queueIRQs)
		}
		for _, pol := range PolicyNames() {
			o := Options{App: "comm:memcached"}
			if pol == "auto" {
				o = autoLoad(t, s.h)
			}
			p, err := Make(pol, s.h, o)
			if err != nil {
				t.Errorf("%s %s: %v", s.name, pol, err)
				continue
			}
			if pol == "auto" && planChanges(p) == 0 {
				t.Errorf("%s auto: CPU 3 saturated by a queue IRQ, yet no plan: %s", s.name, p.Why)
			}
			checkProperties(t, s.name+" "+pol, s.h, p)
			q := plantest.RoundTrip(t, s.name+" "+pol, p, plan.Parse)
			if _, err := plan.Resolve(q, s.h); err != nil {
				t.Errorf("%s %s: reloaded plan does not resolve: %v", s.name, pol, err)
			}
		}
	}
}

// BenchmarkPlanFleetScale times Make + Resolve of every policy on each
// large host (auto with the autoLoad measurement).
func BenchmarkPlanFleetScale(b *testing.B) {
	for _, s := range scaleHosts(b) {
		for _, pol := range PolicyNames() {
			o := Options{}
			if pol == "auto" {
				o = autoLoad(b, s.h)
			}
			b.Run(s.name+"/"+pol, func(b *testing.B) {
				for b.Loop() {
					p, err := Make(pol, s.h, o)
					if err != nil {
						b.Fatal(err)
					}
					if _, err := plan.Resolve(p, s.h); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
