package plan

import (
	"errors"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/irqpilot/irqpilot/internal/cpuset"
	"github.com/irqpilot/irqpilot/internal/plan/plantest"
	"github.com/irqpilot/irqpilot/internal/setting"
)

func fullHost() plantest.Synth {
	return plantest.Synth{CPUs: 8, NICs: []plantest.NIC{{Name: "eth0", Queues: 2}, {Name: "eth1", Queues: 2}}}
}

func TestLoadFullYAMLAndJSON(t *testing.T) {
	h := fullHost().Build()
	var resolved [][]setting.Change
	for _, file := range []string{"testdata/full.yaml", "testdata/full.json"} {
		p, err := LoadFile(file)
		if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		if p.File != file || p.Version != 1 || p.Policy != "hand" || len(p.IRQs) != 3 || len(p.RxQueues) != 3 ||
			len(p.TxQueues) != 1 || len(p.Apps) != 2 || len(p.Coalesce) != 1 {
			t.Fatalf("%s: loaded %+v", file, p)
		}
		if p.IRQs[1].CPUs.String() != "2-3" || p.Irqbalance.BannedCPUs.String() != "1-7" || *p.Coalesce[0].RxUsecs != 50 || *p.Coalesce[0].AdaptiveRx {
			t.Errorf("%s: values %+v %+v %+v", file, p.IRQs[1], p.Irqbalance, p.Coalesce[0])
		}
		ss, err := Resolve(p, h)
		if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		got := map[string]string{}
		for _, s := range ss {
			got[string(s.Kind)+" "+s.Target] = s.Path + "=" + s.Value
		}
		want := map[string]string{
			"irq-affinity irq 9 (acpi)":                "proc/irq/9/smp_affinity_list=0",
			"irq-affinity irq 101 (eth0 rxtx queue 1)": "proc/irq/101/smp_affinity_list=2-3",
			"irq-affinity irq 102 (eth1 rxtx queue 0)": "proc/irq/102/smp_affinity_list=4-5",
			"irq-affinity irq 103 (eth1 rxtx queue 1)": "proc/irq/103/smp_affinity_list=4-5",
			"rps-flow-cnt eth0 rx-0":                   "sys/class/net/eth0/queues/rx-0/rps_flow_cnt=4096",
			"rps-flow-cnt eth0 rx-1":                   "sys/class/net/eth0/queues/rx-1/rps_flow_cnt=4096",
			"rps-cpus eth0 rx-0":                       "sys/class/net/eth0/queues/rx-0/rps_cpus=0000000f",
			"rps-cpus eth1 rx-0":                       "sys/class/net/eth1/queues/rx-0/rps_cpus=00000000",
			"xps-cpus eth0 tx-0":                       "sys/class/net/eth0/queues/tx-0/xps_cpus=00000001",
			"sysctl net.core.rps_sock_flow_entries":    "proc/sys/net/core/rps_sock_flow_entries=32768",
			"app-affinity comm memcached":              "=1-7",
			"app-affinity unit nginx.service":          "=6-7",
			"irqbalance irqbalance":                    "=banned_cpus=1-7",
			"coalesce eth0 coalescing":                 "=rx_usecs=50 adaptive_rx=off",
		}
		if d := cmp.Diff(want, got); d != "" {
			t.Errorf("%s: resolved (-want +got):\n%s", file, d)
		}
		resolved = append(resolved, ss)
	}
	// YAML and JSON give the same settings (lines differ).
	for i := range resolved[0] {
		a, b := resolved[0][i], resolved[1][i]
		a.Line, b.Line = 0, 0
		a.App, b.App = nil, nil
		if d := cmp.Diff(a, b); d != "" {
			t.Errorf("setting %d differs (-yaml +json):\n%s", i, d)
		}
	}
	// Lines point at the entry.
	if resolved[0][0].Line != 7 {
		t.Errorf("irqs[0] line %d, want 7", resolved[0][0].Line)
	}
}

func TestLoadErrors(t *testing.T) {
	cases := []struct {
		name, text, want string
	}{
		{"bad.yaml", "version: 1\nirqs: [\n", "bad.yaml:2: malformed YAML/JSON: did not find expected node content"},
		{"bad.json", "{\"version\": 1, \"irqs\": [}\n", "bad.json:1: malformed YAML/JSON"},
		{"bad.yaml", "", "bad.yaml: empty plan"},
		{"bad.yaml", "version: 1\n---\nversion: 1\n", "bad.yaml:2: more than one YAML document"},
		{"bad.yaml", "- 1\n", "bad.yaml:1: expected a mapping, found a list"},
		{"bad.yaml", "irqs: []\n", "bad.yaml:1: version: missing"},
		{"bad.yaml", "version: 2\n", "bad.yaml:1: version: unsupported plan version 2"},
		{"bad.yaml", "version: one\n", `bad.yaml:1: version: "one" is not an integer`},
		{"bad.yaml", "version: 1\nfoo: bar\n", `bad.yaml:2: foo: unknown field "foo"`},
		{"bad.yaml", "version: 1\nversion: 1\n", "bad.yaml:2: version: given twice (first at line 1)"},
		{"bad.yaml", "version: 1\nirqs:\n  - irq: 3\n    cpu: 0\n    reason: x\n", `bad.yaml:4: irqs[0].cpu: unknown field "cpu"`},
		{"bad.yaml", "version: 1\nirqs:\n  - irq: 3\n    cpus: 3-1\n    reason: x\n", "bad.yaml:4: irqs[0].cpus: bad cpulist"},
		{"bad.yaml", "version: 1\nirqs:\n  - irq: 3\n    cpus: 0-99999999\n    reason: x\n", "bad.yaml:4: irqs[0].cpus: bad cpulist"},
		{"bad.yaml", "version: 1\nirqs:\n  - irq: -3\n    cpus: 0\n    reason: x\n", "bad.yaml:3: irqs[0].irq: -3 is negative"},
		{"bad.yaml", "version: 1\nirqs:\n  - irq: 3\n    cpus: \"\"\n    reason: x\n", "bad.yaml:4: irqs[0].cpus: missing or empty"},
		{"bad.yaml", "version: 1\nirqs:\n  - irq: 3\n    cpus: 0\n", "bad.yaml:3: irqs[0].reason: missing"},
		{"bad.yaml", "version: 1\nirqs:\n  - irq: 3\n    cpus: 0\n    reason: \"a\\nb\"\n", "bad.yaml:5: irqs[0].reason: must be one line"},
		{"bad.yaml", "version: 1\nirqs:\n  - irq: 3\n    action: eth*\n    cpus: 0\n    reason: x\n", "bad.yaml:3: irqs[0]: more than one selector"},
		{"bad.yaml", "version: 1\nirqs:\n  - cpus: 0\n    reason: x\n", "bad.yaml:3: irqs[0]: no selector"},
		{"bad.yaml", "version: 1\nirqs:\n  - queue: 1\n    cpus: 0\n    reason: x\n", "bad.yaml:3: irqs[0].device: missing"},
		{"bad.yaml", "version: 1\nirqs:\n  - action: \"eth[\"\n    cpus: 0\n    reason: x\n", "bad.yaml:3: irqs[0].action: bad pattern"},
		{"bad.yaml", "version: 1\nirqs:\n  - irq: 3\n    cpus: 0\n    reason: x\n  - irq: 3\n    cpus: 1\n    reason: y\n",
			"bad.yaml:6: irqs[1]: duplicate: irq 3 is already set by the entry at line 3"},
		{"bad.yaml", "version: 1\nirqs:\n  - device: eth0\n    queue: 0\n    cpus: 0\n    reason: x\n  - device: eth0\n    queue: 0\n    cpus: 1\n    reason: y\n",
			"bad.yaml:7: irqs[1]: duplicate: device eth0 queue 0 is already set by the entry at line 3"},
		{"bad.yaml", "version: 1\nrx_queues:\n  - device: eth0\n    queue: 0\n    rps_cpus: 0\n    reason: x\n  - device: eth0\n    rps_cpus: 1\n    reason: y\n",
			"bad.yaml:7: rx_queues[1]: duplicate: every rx queue of eth0 is already set by the entry at line 3"},
		{"bad.yaml", "version: 1\nrx_queues:\n  - device: eth0\n    rps_flow_cnt: -5\n    reason: x\n", "bad.yaml:4: rx_queues[0].rps_flow_cnt: -5 is negative"},
		{"bad.yaml", "version: 1\nrx_queues:\n  - device: eth0\n    rps_flow_cnt: 3000\n    reason: x\n", "bad.yaml:4: rx_queues[0].rps_flow_cnt: 3000 is not a power of two (the kernel rounds it up to 4096"},
		{"bad.yaml", "version: 1\nrx_queues:\n  - device: eth0\n    reason: x\n", "bad.yaml:3: rx_queues[0]: nothing to set"},
		{"bad.yaml", "version: 1\ntx_queues:\n  - device: eth0\n    reason: x\n", "bad.yaml:3: tx_queues[0].xps_cpus: missing"},
		{"bad.yaml", "version: 1\nrps_sock_flow_entries:\n  value: 1073741824\n  reason: x\n", "bad.yaml:3: rps_sock_flow_entries.value: 1073741824 exceeds the maximum 16777216"},
		// Sanity caps (issue 15): 2^29 flows per queue would cost gigabytes
		// of kernel memory; a megabyte cpulist took minutes to parse.
		{"bad.yaml", "version: 1\nrx_queues:\n  - device: eth0\n    rps_flow_cnt: 536870912\n    reason: x\n", "bad.yaml:4: rx_queues[0].rps_flow_cnt: 536870912 exceeds the maximum 1048576"},
		{"bad.yaml", "version: 1\nirqs:\n  - irq: 1\n    cpus: \"" + strings.Repeat("0,", 40000) + "0\"\n    reason: x\n", "bad.yaml:4: irqs[0].cpus: CPU list of 80001 bytes is longer than the 65536 any real host needs"},
		{"bad.yaml", "version: 1\napps:\n  - pid: 1\n    comm: x\n    cpus: 0\n    reason: x\n", "bad.yaml:3: apps[0]: more than one selector"},
		{"bad.yaml", "version: 1\napps:\n  - pid: 0\n    cpus: 0\n    reason: x\n", "bad.yaml:3: apps[0].pid: 0 is below the minimum 1"},
		{"bad.yaml", "version: 1\nirqbalance:\n  mode: pause\n  reason: x\n", `bad.yaml:3: irqbalance.mode: "pause" is not one of leave, ban, stop`},
		{"bad.yaml", "version: 1\nirqbalance:\n  mode: ban\n  reason: x\n", "bad.yaml:2: irqbalance.banned_cpus: missing"},
		{"bad.yaml", "version: 1\ncoalesce:\n  - device: eth0\n    reason: x\n", "bad.yaml:3: coalesce[0]: nothing to set"},
		{"bad.yaml", "version: 1\ncoalesce:\n  - device: eth0\n    adaptive_rx: maybe\n    reason: x\n", `bad.yaml:4: coalesce[0].adaptive_rx: "maybe" is not true or false`},
		{"bad.yaml", "version: 1\nirqs: 5\n", `bad.yaml:2: irqs: expected a list, found "5"`},
		{"bad.yaml", "version: 1\nx: &a 1\nirqs:\n  - irq: *a\n    cpus: 0\n    reason: r\n", "unknown field"},
		{"bad.yaml", "version: 1\nirqs:\n  - irq: *a\n", "malformed YAML"},
		{"bad.yaml", "version: 1\nirqs:\n  - &e {irq: 1, cpus: 0, reason: r}\n  - *e\n", "bad.yaml:4: irqs[1]: YAML aliases are not supported"},
	}
	for _, c := range cases {
		_, err := Parse(c.name, []byte(c.text))
		if err == nil {
			t.Errorf("%q: no error, want %q", c.text, c.want)
			continue
		}
		if !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q:\n got %v\nwant %q", c.text, err, c.want)
		}
		var es Errors
		if !errors.As(err, &es) || len(es) == 0 || es[0].File != c.name {
			t.Errorf("%q: error %T does not carry the file", c.text, err)
		}
	}
	// All problems at once, in file order.
	_, err := Parse("many.yaml", []byte("version: 1\nirqs:\n  - irq: 1\n    cpus: x\n    reason: r\n  - irq: 2\n    cpus: 0\nbogus: 1\n"))
	var es Errors
	if !errors.As(err, &es) || len(es) != 2 || es[0].Line != 4 || es[1].Line != 8 {
		t.Errorf("many errors: %v", err)
	}
}

func TestLoadFileMissing(t *testing.T) {
	if _, err := LoadFile("testdata/nope.yaml"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
}

func TestResolveErrors(t *testing.T) {
	s := fullHost()
	s.Offline = []int{7}
	s.NICs = append(s.NICs, plantest.NIC{Name: "nvme0n1", Queues: 2, Managed: true})
	h := s.Build()
	head := "version: 1\n"
	cases := []struct{ text, want string }{
		{"irqs:\n  - irq: 999\n    cpus: 0\n    reason: x\n", "host.yaml:3: irqs[0].irq: IRQ 999 does not exist on this host"},
		{"irqs:\n  - irq: 9\n    cpus: 7\n    reason: x\n", "host.yaml:4: irqs[0].cpus: CPU 7 is offline"},
		{"irqs:\n  - irq: 9\n    cpus: 0-300\n    reason: x\n", "host.yaml:4: irqs[0].cpus: CPUs 8-300 do not exist on this host (it has CPUs 0-7)"},
		{"irqs:\n  - device: eth0\n    queue: 7\n    cpus: 0\n    reason: x\n", "host.yaml:4: irqs[0].queue: device eth0 has no IRQ for queue 7 (queues with IRQs: 0-1)"},
		{"irqs:\n  - device: eth9\n    queue: 0\n    cpus: 0\n    reason: x\n", "host.yaml:3: irqs[0].device: device eth9 not found"},
		{"irqs:\n  - action: \"mlx5*\"\n    cpus: 0\n    reason: x\n", `host.yaml:3: irqs[0].action: pattern "mlx5*" matches no IRQ`},
		{"irqs:\n  - irq: 100\n    cpus: 0\n    reason: x\n  - action: \"eth0-*\"\n    cpus: 1\n    reason: y\n",
			"host.yaml:6: irqs[1]: irq 100 (eth0 rxtx queue 0) is also set by the entry at line 3"},
		{"rx_queues:\n  - device: eth9\n    rps_cpus: 0\n    reason: x\n", "host.yaml:3: rx_queues[0].device: network interface eth9 not found on this host (it has: eth0, eth1, nvme0n1)"},
		{"rx_queues:\n  - device: eth0\n    queue: 5\n    rps_cpus: 0\n    reason: x\n", "host.yaml:4: rx_queues[0].queue: eth0 has no rx queue 5 (it has 2 rx queues)"},
		{"rx_queues:\n  - device: eth0\n    rps_cpus: 0-63\n    reason: x\n", "host.yaml:4: rx_queues[0].rps_cpus: CPUs 8-63 do not exist on this host"},
		{"rx_queues:\n  - device: eth0\n    rps_cpus: 5-7\n    reason: x\n", "host.yaml:4: rx_queues[0].rps_cpus: CPU 7 is offline"},
		{"rx_queues:\n  - device: eth0\n    rps_cpus: 0xffffffff,ffffffff\n    reason: x\n", "host.yaml:4: rx_queues[0].rps_cpus: CPUs 8-63 do not exist on this host (it has CPUs 0-7)"},
		{"tx_queues:\n  - device: eth1\n    queue: 2\n    xps_cpus: 0\n    reason: x\n", "host.yaml:4: tx_queues[0].queue: eth1 has no tx queue 2"},
		{"apps:\n  - comm: x\n    cpus: 9\n    reason: x\n", "host.yaml:4: apps[0].cpus: CPU 9 does not exist"},
		{"irqbalance:\n  mode: ban\n  banned_cpus: 7\n  reason: x\n", "host.yaml:4: irqbalance.banned_cpus: CPU 7 is offline"},
		{"coalesce:\n  - device: eth7\n    rx_usecs: 3\n    reason: x\n", "host.yaml:3: coalesce[0].device: network interface eth7 not found"},
	}
	for _, c := range cases {
		p, err := Parse("host.yaml", []byte(head+c.text))
		if err != nil {
			t.Fatalf("%q: load: %v", c.text, err)
		}
		_, err = Resolve(p, h)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q:\n got %v\nwant %q", c.text, err, c.want)
		}
	}
}

func TestResolveManagedAndStatus(t *testing.T) {
	s := fullHost()
	s.NICs = append(s.NICs, plantest.NIC{Name: "nvme0n1", Queues: 2, Managed: true})
	h := s.Build()
	p, err := Parse("m.yaml", []byte("version: 1\nirqs:\n  - action: \"nvme0n1-*\"\n    cpus: 0\n    reason: x\n  - irq: 100\n    cpus: 0-7\n    reason: y\n  - irq: 101\n    cpus: 1\n    reason: z\nirqbalance:\n  mode: leave\n  reason: l\n"))
	if err != nil {
		t.Fatal(err)
	}
	ss, err := Resolve(p, h)
	if err != nil {
		t.Fatal(err)
	}
	status := map[string]setting.Status{}
	for _, s := range ss {
		status[s.Target] = setting.StatusFor(&s)
		if setting.StatusFor(&s) == setting.StatusSkipped && s.Note == "" {
			t.Errorf("%s skipped without reason", s.Target)
		}
	}
	want := map[string]setting.Status{
		"irq 104 (nvme0n1 rxtx queue 0)": setting.StatusSkipped,
		"irq 105 (nvme0n1 rxtx queue 1)": setting.StatusSkipped,
		"irq 100 (eth0 rxtx queue 0)":    setting.StatusUnchanged, // affinity already 0-7
		"irq 101 (eth0 rxtx queue 1)":    setting.StatusPending,
		"irqbalance":                     setting.StatusSkipped,
	}
	if d := cmp.Diff(want, status); d != "" {
		t.Errorf("status (-want +got):\n%s", d)
	}
	if ss[0].Note != ManagedSkip {
		t.Errorf("managed skip reason %q", ss[0].Note)
	}
}

func TestHostMismatch(t *testing.T) {
	h := fullHost().Build() // hostname "synth"
	p, err := LoadFile("testdata/full.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if m := HostMismatch(p, h); m != "" {
		t.Errorf("same host: %q", m)
	}
	p.Host = "db7"
	if m := HostMismatch(p, h); m != "plan testdata/full.yaml was made for host db7, this is synth" {
		t.Errorf("mismatch: %q", m)
	}
}

// An error on line 2 is reported on line 2: a key given again, and a YAML
// syntax error that yaml.v3 reports at the line its enclosing mapping
// began.
func TestParseErrorLine(t *testing.T) {
	for _, c := range []struct {
		doc  string
		line int
	}{
		{"version: 1\nversion: 1\n", 2},
		{"version: 1\n: x\n", 2},
		{"version: 1\n- x\n", 2},
		{"version: 1\nirqs: {a: 1\n", 2},
		{"version: 1\nbogus: 3\n", 2},
		{"version: 1\nirqs:\n- irq: 1\n cpus: 2\n", 4},
		{"version: 1\nrx_queues:\n  - device: va0\n    rps_cpus: \"zz\"\n    reason: x\n", 4},
	} {
		_, err := Parse("p.yaml", []byte(c.doc))
		var el Errors
		if !errors.As(err, &el) || len(el) == 0 {
			t.Errorf("%q: error %v, want plan Errors", c.doc, err)
			continue
		}
		if el[0].Line != c.line {
			t.Errorf("%q: %v: line %d, want %d", c.doc, err, el[0].Line, c.line)
		}
	}
}

// FuzzLoad feeds arbitrary bytes to the loader: it must never panic, and a
// plan it accepts must pass the static checks, survive a YAML round trip
// and resolve against a host without panicking.
func FuzzLoad(f *testing.F) {
	for _, file := range []string{"testdata/full.yaml", "testdata/full.json"} {
		data, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	for _, s := range []string{
		"version: 1\n",
		"version: 1\nirqs:\n  - irq: 3\n    cpus: 0-1\n    reason: r\n",
		"version: 1\nirqs:\n  - &e {irq: 1, cpus: 0, reason: r}\n  - *e\n",
		"version: 1\nrx_queues:\n  - device: eth0\n    rps_cpus: 0xff\n    rps_flow_cnt: 4096\n    reason: r\n",
		"{\"version\": 1, \"apps\": [{\"pid\": 5, \"cpus\": [1, 2], \"reason\": \"r\"}]}",
		"version: 1\nirqbalance: {mode: ban, banned_cpus: 0-3:2, reason: r}\n",
		"a: [[[[[[[[[[]]]]]]]]]]",
		"version: !!binary AAAA\n",
	} {
		f.Add([]byte(s))
	}
	h := fullHost().Build()
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := Parse("fuzz.yaml", data)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "fuzz.yaml") {
				t.Fatalf("error does not name the file: %v", err)
			}
			return
		}
		if err := Check(p); err != nil {
			t.Fatalf("accepted plan fails Check: %v", err)
		}
		out, err := p.MarshalFile()
		if err != nil {
			t.Fatalf("marshal: %v", err)
		}
		if _, err := Parse("again.yaml", out); err != nil {
			t.Fatalf("re-load of marshalled plan: %v\n%s", err, out)
		}
		_, _ = Resolve(p, h)
	})
}

// everyField is a plan with every field of every entry type set (to a
// value other than its zero), for TestRoundTripEveryField.
func everyField() *Plan {
	cpus := func(s string) *cpuset.Set { c := cpuset.MustParse(s); return &c }
	return &Plan{Version: Version, Policy: "hand", Host: "synth", Why: "every field", Notes: []string{"a note"}, AppCPUs: cpus("1-7"),
		IRQs: []IRQEntry{{IRQ: ptr(9), CPUs: *cpus("0"), Reason: "by number"},
			{Device: "eth0", Queue: ptr(1), CPUs: *cpus("2-3"), Reason: "by queue"},
			{Action: "eth1-*", CPUs: *cpus("4-5"), Reason: "by action"}},
		RxQueues:           []RxQueueEntry{{Device: "eth0", Queue: ptr(0), RPSCPUs: cpus("0-3"), RPSFlowCnt: ptr(4096), Reason: "rps"}},
		TxQueues:           []TxQueueEntry{{Device: "eth0", Queue: ptr(0), XPSCPUs: *cpus("0"), Reason: "xps"}},
		RPSSockFlowEntries: &SockFlowEntry{Value: 32768, Reason: "rfs"},
		Apps: []AppEntry{{PID: 42, CPUs: *cpus("1"), Reason: "pid"}, {Comm: "memcached", All: true, CPUs: *cpus("1-7"), Reason: "comm"},
			{Unit: "nginx.service", CPUs: *cpus("6-7"), Reason: "unit"}, {Cgroup: "/web", CPUs: *cpus("5"), Reason: "cgroup"}},
		Irqbalance: &IrqbalanceEntry{Mode: IrqbalanceBan, BannedCPUs: cpus("1-7"), Reason: "ban"},
		Coalesce: []CoalesceEntry{{Device: "eth0", RxUsecs: ptr(uint32(50)), RxFrames: ptr(uint32(8)), TxUsecs: ptr(uint32(60)), TxFrames: ptr(uint32(9)),
			AdaptiveRx: ptr(true), AdaptiveTx: ptr(false), Reason: "coalesce"}},
		NAPI: []NAPIEntry{{Device: "eth0", ID: ptr(uint32(8193)), Threaded: ptr(true), DeferHardIRQs: ptr(uint32(2)), GROFlushTimeout: ptr(uint64(200000)),
			IRQSuspendTimeout: ptr(uint64(20000000)), CPUs: cpus("3"), Reason: "napi"}},
		BusyPoll: &BusyPollEntry{BusyRead: ptr(50), BusyPoll: ptr(60), Reason: "busy"},
		Prediction: &Prediction{Source: "bpf", IntervalMs: 3000, TrafficPPS: 51234.5, CPUs: []CPUPrediction{
			{CPU: 1, BeforeBusy: 62.5, PredictedBusy: 30.1, BeforeIRQ: 55.2, PredictedIRQ: 20.7}},
			Queues: []QueueShare{{Device: "eth0", Queue: 1, RxShare: 0.69}}},
	}
}

// fieldsSet records, for each field the parse reads (yaml key not "-")
// below v, that it exists (seen) and whether some entry gives it a value
// other than its zero (set), walking into entries, lists and pointers.
func fieldsSet(v reflect.Value, path string, seen, set map[string]bool) {
	seen[path] = true
	switch {
	case v.Kind() == reflect.Pointer:
		if !v.IsNil() { // given, whatever its value (adaptive_tx: false)
			set[path] = true
			fieldsSet(v.Elem(), path, seen, set)
		}
	case v.Kind() == reflect.Slice:
		for i := range v.Len() {
			fieldsSet(v.Index(i), path, seen, set)
		}
	case v.Type() == reflect.TypeOf(cpuset.Set{}):
		set[path] = set[path] || !v.Interface().(cpuset.Set).IsEmpty()
	case v.Kind() == reflect.Struct:
		set[path] = true
		for i := range v.NumField() {
			key, _, _ := strings.Cut(v.Type().Field(i).Tag.Get("yaml"), ",")
			if key != "" && key != "-" {
				fieldsSet(v.Field(i), strings.TrimPrefix(path+"."+key, "."), seen, set)
			}
		}
	default:
		set[path] = set[path] || !v.IsZero()
	}
}

// Every field the plan types declare survives a YAML and a JSON round
// trip: the tag-driven parse reads what the marshallers write, for each
// type of value. A field added to a type without a decoder for its type
// fails here (everyField must set each field in some entry).
func TestRoundTripEveryField(t *testing.T) {
	p := everyField()
	seen, set := map[string]bool{}, map[string]bool{}
	fieldsSet(reflect.ValueOf(p).Elem(), "", seen, set)
	for f := range seen {
		if !set[f] {
			t.Errorf("everyField leaves %s unset: give it a value", f)
		}
	}
	if err := Check(p); err != nil {
		t.Fatal(err)
	}
	plantest.RoundTrip(t, "every field", p, Parse)
}

// A clone's lists are its own: entries added to or replaced in them, and a
// changed irqbalance entry, leave the plan it was cloned from as it was.
func TestCloneKeepsOriginal(t *testing.T) {
	p, err := Parse("p.yaml", []byte("version: 1\nirqs:\n  - {irq: 3, cpus: 0, reason: a}\nirqbalance: {mode: stop, reason: b}\nnotes: [n]\n"))
	if err != nil {
		t.Fatal(err)
	}
	before, err := p.MarshalFile()
	if err != nil {
		t.Fatal(err)
	}
	c := p.Clone()
	c.IRQs[0].Reason = "changed"
	c.IRQs = append(c.IRQs, IRQEntry{Action: "eth*", CPUs: cpuset.Of(1), Reason: "added"})
	c.RxQueues = append(c.RxQueues, RxQueueEntry{Device: "eth0", Reason: "added"})
	c.Apps = append(c.Apps, AppEntry{Comm: "x", CPUs: cpuset.Of(1), Reason: "added"})
	c.NAPI = append(c.NAPI, NAPIEntry{Device: "eth0", Reason: "added"})
	c.Notes[0] = "changed"
	c.Irqbalance.Mode = IrqbalanceLeave
	after, err := p.MarshalFile()
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(string(before), string(after)); d != "" {
		t.Errorf("the original changed with its clone (-before +after):\n%s", d)
	}
	if c.IRQs[0].Reason != "changed" || len(c.IRQs) != 2 || c.Irqbalance.Mode != IrqbalanceLeave {
		t.Errorf("clone %+v %+v", c.IRQs, c.Irqbalance)
	}
}
