package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/irqpilot/irqpilot/internal/host"
	"github.com/irqpilot/irqpilot/internal/kernel"
	"github.com/irqpilot/irqpilot/internal/livetest"
	"github.com/irqpilot/irqpilot/internal/plan"
)

// planFixtures is the shared fixture tree, relative to this package.
const planFixtures = "../../../shared/fixtures"

// snoHost is the single-node OpenShift KVM guest: 12 vCPUs, virtio-net
// virtio1 with IRQs 69 (input.0, affinity 11) and 70 (output.0, affinity 9).
func snoHost(t *testing.T) *host.Host {
	t.Helper()
	fs, done, err := kernel.OpenSnapshot(planFixtures + "/cluster-node-tuning-operator/sno-sysinfo.tgz")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(done)
	h, err := host.Read(fs, host.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func defaultPlanOptions(policy string) planOptions {
	return planOptions{g: &globalFlags{}, policy: policy, cpusPerIRQCore: 8}
}

// Printed without -o, the output is a valid plan file (changes are comments)
// and the changes show from → to and why.
func TestPlanPrintsPlanAndDiff(t *testing.T) {
	h := snoHost(t)
	var out bytes.Buffer
	f := defaultPlanOptions("per-queue")
	f.app = "comm:memcached"
	if err := runPlan(&out, h, f, false, "snapshot sno"); err != nil {
		t.Fatal(err)
	}
	p, err := plan.Parse("stdout", out.Bytes())
	if err != nil {
		t.Fatalf("printed plan does not load: %v\n%s", err, out.String())
	}
	if p.Policy != "per-queue" || len(p.IRQs) != 2 || len(p.Apps) != 1 || p.Apps[0].CPUs.String() != "1-11" {
		t.Errorf("plan %+v", p)
	}
	text := out.String()
	for _, want := range []string{
		"# Against snapshot sno: 2 to change",
		"irq 69 (virtio1 rx queue 0)  smp_affinity_list  11 → 0",
		"irq 70 (virtio1 tx queue 0)  smp_affinity_list  9 → 0",
		"comm memcached",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("output lacks %q:\n%s", want, text)
		}
	}
}

// -o writes the file (YAML, or JSON by extension) and prints the changes;
// --json prints them as JSON.
func TestPlanOutputFile(t *testing.T) {
	h := snoHost(t)
	dir := t.TempDir()
	for _, name := range []string{"p.yaml", "p.json"} {
		f := defaultPlanOptions("dedicated-core")
		f.housekeeping = "0-1"
		f.machineWide = true // every movable IRQ, not only the device queues'
		f.output = filepath.Join(dir, name)
		var out bytes.Buffer
		if err := runPlan(&out, h, f, false, "snapshot sno"); err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(out.String(), "wrote "+f.output) || !strings.Contains(out.String(), "smp_affinity_list") {
			t.Errorf("%s: output %s", name, out.String())
		}
		data, err := os.ReadFile(f.output)
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasSuffix(name, ".json") != json.Valid(data) {
			t.Errorf("%s: JSON=%v", name, json.Valid(data))
		}
		p, err := plan.LoadFile(f.output)
		if err != nil {
			t.Fatal(err)
		}
		if len(p.IRQs) < 40 || p.IRQs[0].CPUs.String() != "0-1" || p.RPSSockFlowEntries.Value != 65536 {
			t.Errorf("%s: %d IRQs, first on %s", name, len(p.IRQs), p.IRQs[0].CPUs)
		}
	}
	var out bytes.Buffer
	f := defaultPlanOptions("per-queue")
	f.output = filepath.Join(dir, "q.yaml")
	if err := runPlan(&out, h, f, true, "snapshot sno"); err != nil {
		t.Fatal(err)
	}
	var d struct {
		File     string         `json:"file"`
		Counts   map[string]int `json:"counts"`
		Settings []struct {
			Target, Old, Value, Status, Reason string
		} `json:"settings"`
	}
	if err := json.Unmarshal(out.Bytes(), &d); err != nil {
		t.Fatal(err)
	}
	if d.File != f.output || d.Counts["pending"] != 2 || d.Settings[0].Old != "11" || d.Settings[0].Status != "pending" || d.Settings[0].Value != "0" || d.Settings[0].Reason == "" {
		t.Errorf("json diff %+v", d)
	}
}

func TestPlanBadFlags(t *testing.T) {
	h := snoHost(t)
	for _, c := range []struct {
		mod  func(*planOptions)
		want string
	}{
		{func(f *planOptions) { f.policy = "magic" }, `unknown policy "magic"`},
		{func(f *planOptions) { f.housekeeping = "x" }, `--housekeeping "x"`},
		{func(f *planOptions) { f.housekeeping = "40" }, "housekeeping CPU 40 does not exist"},
		{func(f *planOptions) { f.appCPUs = "3-1" }, `--app-cpus "3-1"`},
		{func(f *planOptions) { f.app = "exe:foo" }, "--app: application selector"},
		{func(f *planOptions) { f.irqbalance = "pause" }, `--irqbalance "pause"`},
		{func(f *planOptions) { f.devices = []string{"eth9"} }, "network interface eth9 not found"},
		{func(f *planOptions) { f.devices, f.withDefaultRt = []string{"virtio1"}, true }, "--include-default-route is for plans without --device"},
	} {
		f := defaultPlanOptions("dedicated-core")
		c.mod(&f)
		err := runPlan(&bytes.Buffer{}, h, f, false, "x")
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %q", f, err, c.want)
		}
	}
}

// --sample feeds the measured per-CPU interrupt share to auto, which says
// what it measured; on a captured tree it is refused.
func TestPlanSampleLoad(t *testing.T) {
	out, err := selfCmd(nil, "--root", sharedFixtures+"/node_exporter", "plan", "--sample", "1s").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "--sample measures the live machine") {
		t.Errorf("--sample with --root: %v\n%s", err, out)
	}
	livetest.NeedRoot(t)
	live, err := selfCmd(nil, "plan", "--policy", "auto", "--sample", "300ms", "--json").Output()
	if err != nil {
		t.Fatalf("%v\n%s", err, live)
	}
	var p struct {
		Plan struct {
			Why string `json:"why"`
		} `json:"plan"`
		Why string `json:"why"`
	}
	if err := json.Unmarshal(live, &p); err != nil {
		t.Fatalf("%v\n%s", err, live)
	}
	why := p.Why + p.Plan.Why
	// auto decides from the measurement: either it names the evidence of
	// harm it found and what it chose — a plan, or nothing (marginal, no
	// candidate fits the headroom, or none worth it) — or it says there is
	// none, with the numbers it measured.
	if !strings.Contains(why, "no evidence of harm") && !strings.Contains(why, "auto chose") && !strings.Contains(why, "nothing is changed") {
		t.Errorf("auto does not explain a load-based decision: %q", why)
	}
	if !strings.Contains(why, "irq+softirq") && !strings.Contains(why, "Predicted") {
		t.Errorf("auto's reason has no measured numbers: %q", why)
	}
}

// Issue 10, live: on this machine at rest `plan --policy auto` measures the
// load and plans no change, saying why with the numbers; if something on
// the machine is hurting right now, the plan must name the evidence.
func TestLiveAutoPlansNothingAtRest(t *testing.T) {
	livetest.NeedRoot(t) // to read every IRQ's placement
	out, errOut, err := runIrqpilot(t, "plan", "--policy", "auto", "--sample", "1s", "--json")
	if err != nil {
		t.Fatalf("plan: %v\n%s", err, errOut)
	}
	var d struct {
		Why    string         `json:"why"`
		Counts map[string]int `json:"counts"`
	}
	if err := json.Unmarshal([]byte(out), &d); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if d.Counts["pending"] == 0 {
		// At rest: no evidence of harm. Busy with other work (a build, another
		// test): evidence named, and why nothing is changed. Either way with
		// the measured numbers.
		if !(strings.Contains(d.Why, "no evidence of harm") || strings.Contains(d.Why, "nothing is changed")) || !strings.Contains(d.Why, "% busy") {
			t.Errorf("empty plan without the reason and numbers: %q", d.Why)
		}
		return
	}
	for _, ev := range []string{"interrupt-bound", "saturated", "drop", "squeeze", "remote", "isolated", "another NUMA node"} {
		if strings.Contains(d.Why, ev) {
			t.Logf("the machine is busy: auto planned %d changes from evidence: %s", d.Counts["pending"], d.Why)
			return
		}
	}
	t.Errorf("auto planned %d changes without naming evidence of harm: %q", d.Counts["pending"], d.Why)
}

// auto's why runs to hundreds of characters: the printed plan wraps it,
// and every other long text, at the width the rest of the output has, and
// the wrapped file reads back as the same plan.
func TestPlanWrapsLongWhy(t *testing.T) {
	p := &plan.Plan{Version: 1, Policy: "auto", Notes: []string{strings.Repeat("left out irq 1 (i8042), ", 12) + "and 31 more: they serve no network or storage queue"}}
	p.Why = "auto chose threaded NAPI on eth1: interrupt-bound-cpu:cpu0 (CPU0 0.0 % idle, 62.3 % in interrupts); " +
		"Predicted from the measurement (interrupt time measured with eBPF over 3.0 s): CPU0 100.0 % busy, 62.3 % interrupts, CPU1 41.0 % busy now → CPU0 71.2 % busy, CPU1 70.1 % busy after; " +
		"busiest interrupt-loaded CPU 100 % → 71 % busy (12 candidates compared, 9 rejected: 4 would move work onto a CPU without spare time, 3 predict a new saturated CPU, 2 do not lower the busiest CPU; " +
		"the choice holds with every measured input 10 % higher or lower, 6 re-decisions). Warning: the consumer's threads share CPU1 with the NAPI threads, so its latency may rise; " +
		"measure with irqpilot apply --verify, which compares the prediction with a new measurement and reverts when the machine is worse. 'Quoted' words and colons: stay."
	if n := len(p.Why); n < 800 {
		t.Fatalf("why is %d characters, want a long one", n)
	}
	data, err := planFile(p)
	if err != nil {
		t.Fatal(err)
	}
	for i, line := range strings.Split(string(data), "\n") {
		if n := utf8.RuneCountInString(line); n > width {
			t.Errorf("line %d is %d characters wide, more than %d:\n%s", i+1, n, width, line)
		}
	}
	back, err := plan.Parse("printed", data)
	if err != nil {
		t.Fatalf("%v\n%s", err, data)
	}
	if back.Why != p.Why || !reflect.DeepEqual(back.Notes, p.Notes) {
		t.Errorf("read back why %q\nnotes %q\nwant %q\n%q", back.Why, back.Notes, p.Why, p.Notes)
	}
	var b bytes.Buffer
	writePlanChanges(&b, planDiff{Notes: p.Notes}, "this host", "# ")
	for _, line := range strings.Split(b.String(), "\n") {
		if utf8.RuneCountInString(line) > width {
			t.Errorf("Left alone line wider than %d: %s", width, line)
		}
	}
}
