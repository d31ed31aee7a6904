package policy

import (
	"fmt"
	"math/rand"
	"strings"
	"testing"
	"time"

	"github.com/irqpilot/irqpilot/internal/diagnose"
	"github.com/irqpilot/irqpilot/internal/host"
	"github.com/irqpilot/irqpilot/internal/hostgen"
	"github.com/irqpilot/irqpilot/internal/livetest"
	"github.com/irqpilot/irqpilot/internal/load"
	"github.com/irqpilot/irqpilot/internal/plan"
	"github.com/irqpilot/irqpilot/internal/plan/plantest"
)

// propertyHosts are the hosts auto's properties are checked on: every real
// captured host in the shared fixtures, the generated 256-CPU host and two
// small generated ones, and seed 004's two-CPU veth host.
func propertyHosts(t *testing.T) map[string]*host.Host {
	t.Helper()
	hosts := map[string]*host.Host{}
	for _, name := range []string{
		"cluster-node-tuning-operator/bare-metal-master.internal-sysinfo.tgz",
		"cluster-node-tuning-operator/bare-metal-worker1.internal-sysinfo.tgz",
		"cluster-node-tuning-operator/sno-sysinfo.tgz",
		"node_exporter", "procfs", "sysstat/root3", "sysstat/root4",
	} {
		hosts[name] = plantest.ReadSnapshot(t, name)
	}
	for name, spec := range map[string]hostgen.Spec{
		"hostgen default (256 CPUs)": hostgen.DefaultSpec(),
		"hostgen 4 CPUs, 1 NIC":      {CPUs: 4, Packages: 1, Nodes: 1, ThreadsPerCore: 1, Offline: hostgen.NoOffline, NICs: []hostgen.NICSpec{{Name: "eth0", Queues: 2}}, NVMeQueues: -1, Hostname: "four"},
		"hostgen 8 CPUs SMT, 2 NICs": {CPUs: 8, Packages: 1, Nodes: 1, ThreadsPerCore: 2, Offline: hostgen.NoOffline, NICs: []hostgen.NICSpec{{Name: "eth0", Queues: 4}, {Name: "eth1", Queues: 1}}, NVMeQueues: -1, Hostname: "eight"},
	} {
		_, hosts[name] = livetest.GenHost(t, spec)
	}
	seed := synth{CPUs: 2, NICs: []synthNIC{{Name: "vs1", Queues: 1, Kind: "veth", NoIRQs: true}}}.Build()
	for i := range seed.NICs {
		seed.NICs[i].Virtual = true
	}
	hosts["seed 004 (2 CPUs, veth)"] = seed
	return hosts
}

// randomLoad is a deterministic load for h from r: one CPU hot with
// interrupt work (a network queue IRQ's CPU when there is one), a few
// other CPUs busy anywhere from idle to saturated, and a busy thread.
func randomLoad(h *host.Host, r *rand.Rand) (*load.Load, int) {
	var online []int
	for _, c := range h.CPUs {
		if c.Online {
			online = append(online, c.ID)
		}
	}
	hot := online[r.Intn(min(len(online), 4))]
	rates := map[int]map[int]float64{}
	for _, q := range h.IRQs {
		if q.Class == host.ClassNetwork && q.Device != "" && q.Movable() {
			rates[q.Number] = map[int]float64{hot: 20000 + float64(r.Intn(40000))}
			if len(rates) == 1+r.Intn(3) {
				break
			}
		}
	}
	irq := 5 + float64(r.Intn(20))
	soft := 20 + float64(r.Intn(60))
	prof := map[int]cpuProfile{hot: {user: float64(r.Intn(10)), sys: max(0, min(100-irq-soft, float64(r.Intn(30)))), irq: irq, soft: soft}}
	for i := 0; i < 1+r.Intn(min(len(online), 6)); i++ {
		c := online[r.Intn(len(online))]
		if c == hot {
			continue
		}
		prof[c] = cpuProfile{user: float64(r.Intn(70)), sys: float64(r.Intn(30)), soft: float64(r.Intn(3))}
	}
	other := online[r.Intn(len(online))]
	busy := prof[other].user + prof[other].sys
	var tasks []load.TaskLoad
	if busy > 5 {
		tasks = []load.TaskLoad{{PID: 4242, TID: 4242, Comm: "app", CPU: other, Busy: busy * (0.4 + 0.6*r.Float64())}}
	}
	return synthLoad(h, prof, rates, tasks), 4242
}

// Auto's properties on every property host under many loads:
//   - the predicted busiest CPU never rises against doing nothing;
//   - no plan moves work onto a CPU without the measured headroom for it
//     (diagnose.Headroom), and none predicts a CPU saturated (above Overload)
//     without saying why it is still the better choice;
//   - equal inputs give equal plans (determinism).
func TestAutoProperties(t *testing.T) {
	hosts := propertyHosts(t)
	planned, marginal := 0, 0
	for name, h := range hosts {
		start := time.Now()
		const seeds = 16
		for seed := int64(1); seed <= seeds; seed++ {
			r := rand.New(rand.NewSource(seed))
			l, pid := randomLoad(h, r)
			o := Options{Load: Measured(l)}
			if seed%2 == 0 {
				o.App = fmt.Sprintf("pid:%d", pid)
			}
			p, err := Make("auto", h, o)
			if err != nil {
				t.Fatalf("%s seed %d: %v", name, seed, err)
			}
			what := fmt.Sprintf("%s seed %d", name, seed)
			checkProperties(t, "auto/"+what, h, p)
			q, _ := Make("auto", h, Options{Load: Measured(l), App: o.App})
			a, _ := p.MarshalJSONFile()
			b, _ := q.MarshalJSONFile()
			if string(a) != string(b) {
				t.Errorf("%s: equal inputs, different plans:\n%s\n%s", what, a, b)
			}
			if IsMarginal(p) {
				marginal++
			}
			if planChanges(p) == 0 && p.NAPI == nil {
				continue
			}
			planned++
			bld, err := newBuilder(h, o, "auto")
			if err != nil {
				t.Fatal(err)
			}
			ts, _ := bld.targets()
			var steered []string
			for _, tg := range ts {
				steered = append(steered, tg.nic.Name)
			}
			m := newModel(h, l, steered)
			m.selected = selectedPIDs(o)
			base, pred := m.Predict(&plan.Plan{}), m.Predict(p)
			if _, b0 := base.Max(); maxBusy(pred) > b0+moveEpsilon {
				t.Errorf("%s: predicted busiest CPU rises %.1f%% → %.1f%%\n%s", what, b0, maxBusy(pred), p.Why)
			}
			for c, v := range pred.Busy {
				if gain := v - base.Busy[c]; gain > moveEpsilon {
					if _, ok := diagnose.HeadroomOf(l, c).Fits(gain); !ok {
						t.Errorf("%s: moves %.1f%% onto CPU %d (%s)\n%s", what, gain, c, diagnose.HeadroomOf(l, c), p.Why)
					}
				}
			}
			if _, mx := pred.Max(); mx > Overload && !containsAll(p.Why, "Warning", "doing nothing is predicted worse") {
				t.Errorf("%s: predicted %.0f%% busy without the warning\n%s", what, mx, p.Why)
			}
		}
		t.Logf("%s: %d loads in %v", name, seeds, time.Since(start).Round(time.Millisecond))
	}
	t.Logf("%d hosts: %d plans, %d marginal decisions", len(hosts), planned, marginal)
	if planned == 0 {
		t.Errorf("no load led to a plan: the properties were checked on empty plans only")
	}
}

func containsAll(s string, subs ...string) bool {
	for _, x := range subs {
		if !strings.Contains(s, x) {
			return false
		}
	}
	return true
}
