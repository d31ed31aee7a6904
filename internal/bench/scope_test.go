package bench

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/irqpilot/irqpilot/internal/bench/testbed"
	"github.com/irqpilot/irqpilot/internal/bench/workload"
	"github.com/irqpilot/irqpilot/internal/host"
	"github.com/irqpilot/irqpilot/internal/livetest"
	"github.com/irqpilot/irqpilot/internal/policy"
	"github.com/irqpilot/irqpilot/internal/setting"
)

// A machine like this one: eth0 (IRQs 37-39), vda (35, 36 managed), a
// serial port (26) and an unnamed virtio device (41).
func scopeHost() *host.Host {
	h := twoCPUHost(2)
	irq := func(n int, dev string) host.IRQ { return host.IRQ{Number: n, Device: dev} }
	h.IRQs = []host.IRQ{irq(26, ""), irq(35, "vda"), irq(36, "vda"), irq(37, "eth0"), irq(38, "eth0"), irq(39, "eth0"), irq(41, "")}
	h.Block = []host.BlockDev{{Name: "vda", IRQs: []int{35, 36}}}
	h.NICs = []host.NIC{{Name: "eth0", IRQs: []int{37, 38, 39}}, {Name: "vs1", Virtual: true, Kind: "veth"}}
	return h
}

func TestScopeRestrictKnownAnswers(t *testing.T) {
	h := scopeHost()
	irqCh := func(n int) setting.Change {
		return setting.Change{Kind: setting.KindIRQAffinity, Target: "irq " + strconv.Itoa(n), Path: "proc/irq/" + strconv.Itoa(n) + "/smp_affinity_list", Value: "0"}
	}
	q := func(kind setting.Kind, path string) setting.Change {
		return setting.Change{Kind: kind, Target: path, Path: path, Value: "3"}
	}
	sock := setting.Change{Kind: setting.KindSysctl, Target: "net.core.rps_sock_flow_entries", Path: "proc/sys/net/core/rps_sock_flow_entries", Value: "32768"}
	all := []setting.Change{irqCh(26), irqCh(35), irqCh(36), irqCh(38), irqCh(41),
		q(setting.KindRPSCPUs, "sys/class/net/eth0/queues/rx-0/rps_cpus"),
		q(setting.KindRPSFlowCnt, "sys/class/net/eth0/queues/rx-0/rps_flow_cnt"),
		q(setting.KindXPSCPUs, "sys/class/net/eth0/queues/tx-0/xps_cpus"),
		q(setting.KindRPSCPUs, "sys/class/net/vs1/queues/rx-0/rps_cpus"),
		q(setting.KindRPSCPUs, "sys/class/net/vs1/../eth0/queues/rx-0/rps_cpus"),
		sock,
		{Kind: setting.KindCoalesce, Target: "eth0", Device: "eth0", Value: "rx_usecs=8"},
		{Kind: setting.KindIrqbalance, Target: "irqbalance", Value: "stopped"},
		{Kind: setting.KindThreadAffinity, Target: "init", TID: 1, Value: "0"},
		{Kind: setting.KindThreadAffinity, Target: "napi", TID: 4242, Value: "1"},
	}
	paths := func(cs []setting.Change) string {
		var out []string
		for _, c := range cs {
			out = append(out, c.Path+c.Device+strconv.Itoa(c.TID))
		}
		return strings.Join(out, " ")
	}

	// Network testbed: no IRQ at all (veth has none), only vs1's queues,
	// the RFS table because vs1 is steered, and its NAPI thread.
	net := NewScope(h, workload.AppInfo{Device: "vs1", NAPIThreads: []int{4242}})
	if len(net.IRQs) != 0 {
		t.Errorf("veth scope IRQs %v", net.IRQs)
	}
	kept, dropped := net.Restrict(all)
	if got, want := paths(kept), "sys/class/net/vs1/queues/rx-0/rps_cpusvs10 proc/sys/net/core/rps_sock_flow_entries0 4242"; got != want {
		t.Errorf("net kept %q, want %q", got, want)
	}
	if len(dropped) != len(all)-3 {
		t.Errorf("net dropped %d of %d: %v", len(dropped), len(all), dropped)
	}
	if !strings.Contains(strings.Join(dropped, "\n"), "IRQ 38 is not an IRQ of the devices under test") {
		t.Errorf("drop reasons %v", dropped)
	}

	// Storage on vda: only vda's IRQs; no network queue, no sysctl.
	st := NewScope(h, workload.AppInfo{Disk: "vda"})
	if fmt.Sprint(st.IRQs) != "[35 36]" {
		t.Errorf("storage scope IRQs %v", st.IRQs)
	}
	kept, _ = st.Restrict(all)
	if got, want := paths(kept), "proc/irq/35/smp_affinity_list0 proc/irq/36/smp_affinity_list0"; got != want {
		t.Errorf("storage kept %q, want %q", got, want)
	}
	if got := st.ForeignIRQs(h); len(got) != 5 || got[0] != 26 || got[4] != 41 {
		t.Errorf("storage foreign IRQs %v", got)
	}
	// Without a steered device the RFS table is not the bench's to change.
	if kept, _ := net.Restrict([]setting.Change{sock}); len(kept) != 0 {
		t.Errorf("lone sysctl kept: %v", kept)
	}
}

// TestBenchChangesStayOnDevicesUnderTest makes every configuration bench
// knows for a real testbed and for the storage workload on this machine,
// and checks that no change it would apply names eth0 (or any device but
// the one under test) or an IRQ that is not the tested device's. Nothing
// is applied.
func TestBenchChangesStayOnDevicesUnderTest(t *testing.T) {
	livetest.NeedRoot(t, "memcached", "fio", "ip")
	configs := append([]string{"default", "irqbalance", "spec:app=1,rps=0+1,flows=1024,irq=36:0;38:0;39:1"}, policy.PolicyNames()...)
	irqRe := regexp.MustCompile(`^proc/irq/(\d+)/`)
	check := func(name string, r *Runner) {
		t.Helper()
		h := r.Host()
		sc := r.Scope()
		other := map[string]bool{}
		for _, n := range h.NICs {
			if n.Name != sc.NetDevice {
				other[n.Name] = true
			}
		}
		total := 0
		for _, c := range configs {
			s, err := r.Setup(c, r.App())
			if err != nil {
				t.Errorf("%s %s: %v", name, c, err)
				continue
			}
			for _, ch := range s.Changes {
				total++
				if m := irqRe.FindStringSubmatch(ch.Path); m != nil {
					n, _ := strconv.Atoi(m[1])
					if q := h.IRQ(n); q == nil || (q.Device != sc.NetDevice && q.Device != sc.Disk) || q.Device == "" {
						t.Errorf("%s %s: changes IRQ %d (%+v), not the device under test's", name, c, n, q)
					}
				}
				for dev := range other {
					if strings.Contains(ch.Path, "/net/"+dev+"/") || ch.Device == dev || strings.Contains(ch.Target, dev) {
						t.Errorf("%s %s: change names %s: %+v", name, c, dev, ch)
					}
				}
				if strings.Contains(ch.Path, "eth0") || strings.Contains(ch.Target, "eth0") {
					t.Errorf("%s %s: change names eth0: %+v", name, c, ch)
				}
			}
		}
		// dedicated-core wants every movable IRQ on the housekeeping CPU.
		// With a network testbed the plan itself is bounded to the device
		// (plan.ScopeToDevices); a storage run has no device, and the
		// default scope leaves out the NIC that carries the default route
		// (eth0 here) and IRQs that serve no queue, or Restrict drops what
		// is left. Either way none of eth0's IRQs may be among the kept
		// changes, by name (checked above) or by number.
		if eth := h.NIC("eth0"); eth != nil {
			for _, c := range configs {
				s, _ := r.Setup(c, r.App())
				for _, ch := range s.Changes {
					for _, n := range eth.IRQs {
						if ch.Path == "proc/irq/"+strconv.Itoa(n)+"/smp_affinity_list" {
							t.Errorf("%s %s: keeps a change of eth0's IRQ %d: %+v", name, c, n, ch)
						}
					}
				}
			}
		}
		t.Logf("%s: %d changes kept over %d configurations; dropped per config: %d (dedicated-core)", name, total, len(configs), len(r.Dropped["dedicated-core"]))
	}
	before, err := ReadMachineState(liveFS)
	if err != nil {
		t.Fatal(err)
	}

	tbDir := t.TempDir()
	w, err := workload.NewNet("memcached", workload.NetOptions{Testbed: testbed.Options{FS: liveFS, Queues: 2, StateDir: tbDir}})
	if err != nil {
		t.Fatal(err)
	}
	r := &Runner{FS: liveFS, Workload: w, Rounds: 1, StateDir: t.TempDir()}
	if err := r.Start(); err != nil {
		t.Fatal(err)
	}
	check("memcached testbed", r)
	if err := r.Close(); err != nil {
		t.Error(err)
	}

	sw := &workload.StorageWorkload{Dir: "/var/tmp", SizeMB: 4, FS: liveFS}
	rs := &Runner{FS: liveFS, Workload: sw, Rounds: 1, StateDir: t.TempDir()}
	if err := rs.Start(); err != nil {
		t.Fatal(err)
	}
	if rs.App().Disk == "" {
		t.Error("storage workload found no disk")
	}
	check("storage", rs)
	for _, c := range []string{"rps-spread", "auto"} {
		s, _ := rs.Setup(c, rs.App())
		for _, ch := range s.Changes {
			if strings.HasPrefix(ch.Path, "sys/class/net/") || ch.Kind == setting.KindSysctl {
				t.Errorf("storage %s steers a network device: %+v", c, ch)
			}
		}
	}
	if err := rs.Close(); err != nil {
		t.Error(err)
	}
	after, _ := ReadMachineState(liveFS)
	if d := before.Diff(after); len(d) > 0 {
		t.Errorf("state differs: %v", d)
	}
}
