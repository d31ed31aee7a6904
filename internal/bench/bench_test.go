package bench

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/irqpilot/irqpilot/internal/apply"
	"github.com/irqpilot/irqpilot/internal/bench/stats"
	"github.com/irqpilot/irqpilot/internal/bench/testbed"
	"github.com/irqpilot/irqpilot/internal/bench/workload"
	"github.com/irqpilot/irqpilot/internal/kernel"
	"github.com/irqpilot/irqpilot/internal/livetest"
	"github.com/irqpilot/irqpilot/internal/load"
)

// liveFS is the machine the tests' runners measure and their testbeds are
// made on.
var liveFS = kernel.New("/")

func TestSummarizeFixedRuns(t *testing.T) {
	mk := func(c string, tps ...float64) []Run {
		var out []Run
		for i, v := range tps {
			out = append(out, Run{Config: c, Round: i, Result: workload.Result{Throughput: v, Unit: "ops/s"},
				CPUs: []CPU{{ID: 0, CPUTime: load.CPUTime{SoftIRQ: 50, Idle: float64(i)}}, {ID: 1, CPUTime: load.CPUTime{SoftIRQ: 10, Idle: 40}}}})
		}
		return out
	}
	var runs []Run
	runs = append(runs, mk("default", 100, 101, 99, 100, 102, 98)...)
	runs = append(runs, mk("better", 120, 121, 119, 122, 120, 118)...)
	runs = append(runs, mk("same", 100, 103, 98, 101, 99, 100)...)
	runs = append(runs, Run{Config: "same", Error: "wrk could not connect"})
	s := Summarize([]string{"default", "better", "same"}, runs, "", false)
	if len(s) != 3 {
		t.Fatalf("%d summaries", len(s))
	}
	if s[0].Verdict != "baseline" || s[0].Throughput.Point != 100 || s[0].Ratio != nil {
		t.Errorf("baseline %+v", s[0])
	}
	if s[1].Verdict != "better" || math.Abs(s[1].Ratio.Point-1.2) > 1e-9 || s[1].Ratio.Low <= 1 {
		t.Errorf("better %+v ratio %+v", s[1], s[1].Ratio)
	}
	if s[2].Verdict != "within noise" || s[2].Failed != 1 || s[2].N != 7 || s[2].Throughput.Point != 100 {
		t.Errorf("same %+v", s[2])
	}
	// Per-CPU medians: CPU 0 idle 0,1,2,3,4,5 → 2.5; soft 50.
	if c := s[0].CPUs[0]; c.SoftIRQ != 50 || c.Idle != 2.5 {
		t.Errorf("cpu 0 %+v", c)
	}
	one := Summarize([]string{"a", "b"}, append(mk("a", 10), mk("b", 20)...), "a", true)
	if one[1].Verdict != stats.VerdictIndicative || one[1].Ratio.Point != 2 {
		t.Errorf("single runs: %+v", one[1])
	}
}

func TestParseSpecRoundTrip(t *testing.T) {
	for _, c := range []string{
		"spec:app=1,client=0,rps=0-1",
		"spec:app=0+2,client=1",
		"spec:app=0,napi=1,rps=off,flows=4096,irq=38:0;39:1",
	} {
		s, err := ParseSpec(c)
		if err != nil {
			t.Fatalf("%s: %v", c, err)
		}
		if got := s.String(); got != c {
			t.Errorf("%s → %s", c, got)
		}
	}
	if s, _ := ParseSpec("spec:rps=1+0"); s.String() != "spec:rps=0-1" {
		t.Errorf("rps=1+0 → %s", s)
	}
	if s, _ := ParseSpec("spec:rps=off"); s.RPS == nil || !s.RPS.IsEmpty() {
		t.Errorf("rps=off: %+v", s.RPS)
	}
	for _, bad := range []string{"spec:cpu=1", "spec:app=x", "spec:irq=38", "spec:app"} {
		if _, err := ParseSpec(bad); err == nil {
			t.Errorf("%s parsed", bad)
		}
	}
}

func TestMachineStateDiff(t *testing.T) {
	a := MachineState{"proc/irq/38/smp_affinity_list": "1", "x": "f"}
	b := MachineState{"proc/irq/38/smp_affinity_list": "0", "y": "1"}
	d := a.Diff(b)
	want := []string{"proc/irq/38/smp_affinity_list: 1 → 0", "x: gone (was f)", "y: new (1)"}
	if strings.Join(d, "|") != strings.Join(want, "|") {
		t.Errorf("diff %q", d)
	}
}

// TestShortBench is the CI run: 2 configurations × 2 rounds × 2 s of
// memcached in a testbed; the machine must be restored exactly, and the
// testbed gone.
func TestShortBench(t *testing.T) {
	livetest.NeedRoot(t, "memcached", "memcaslap", "taskset")
	tbDir := t.TempDir()
	w, err := workload.NewNet("memcached", workload.NetOptions{Testbed: testbed.Options{FS: liveFS, Queues: 2, StateDir: tbDir}, ClientThreads: 2, Connections: 16})
	if err != nil {
		t.Fatal(err)
	}
	before, err := ReadMachineState(liveFS)
	if err != nil {
		t.Fatal(err)
	}
	r := &Runner{FS: liveFS, Workload: w, Configs: []string{"default", "spec:app=1,client=0,rps=0+1,flows=2048"}, Rounds: 2,
		Duration: 2 * time.Second, Prime: time.Second, StateDir: t.TempDir()} // primed: the priming run applies and reverts too
	rep, err := Bench(context.Background(), r, "")
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Restored {
		t.Errorf("machine not restored: %v", rep.Diff)
	}
	after, _ := ReadMachineState(liveFS)
	if d := before.Diff(after); len(d) > 0 {
		t.Errorf("state differs: %v", d)
	}
	if len(rep.Runs) != 4 {
		t.Fatalf("%d runs, want 4", len(rep.Runs))
	}
	// Interleaved in the balanced order: A B, B A.
	for i, run := range rep.Runs {
		if run.Config != RoundOrder(r.Configs, i/2)[i%2] || run.Round != i/2 {
			t.Errorf("run %d is %s round %d", i, run.Config, run.Round)
		}
		if run.Error != "" || run.Throughput <= 0 || run.Unit != "ops/s" {
			t.Errorf("run %d: %+v", i, run)
		}
		if len(run.CPUs) == 0 {
			t.Errorf("run %d: no per-CPU load", i)
		}
	}
	if rep.Summary[1].Ratio == nil || rep.Summary[0].Verdict != "baseline" {
		t.Errorf("summary %+v", rep.Summary)
	}
	// Two rounds give a direction, no verdict.
	if v := rep.Summary[1].Verdict; v != stats.VerdictIndicative {
		t.Errorf("2 rounds judged %q", v)
	}
	// Each run records where memcached and memcaslap could run: default
	// leaves both free (every online CPU: shared), the spec separates them.
	for _, run := range rep.Runs {
		switch run.Config {
		case "default":
			if run.AppCPUs == "" || run.ClientCPUs != run.AppCPUs {
				t.Errorf("default run: app %q client %q, want both on the online CPUs", run.AppCPUs, run.ClientCPUs)
			}
		default:
			if run.AppCPUs != "1" || run.ClientCPUs != "0" {
				t.Errorf("%s run: app %q client %q", run.Config, run.AppCPUs, run.ClientCPUs)
			}
		}
	}
	if w := strings.Join(rep.Summary[0].Warnings, ";"); !strings.Contains(w, "shared CPU") {
		t.Errorf("default's warnings %q: the load generator shared the server's CPUs", w)
	}
	if w := strings.Join(rep.Summary[1].Warnings, ";"); strings.Contains(w, "shared") {
		t.Errorf("separated client and server, yet %q", w)
	}
	if left, _ := testbed.List(liveFS, tbDir); len(left) > 0 {
		t.Errorf("testbed state left: %+v", left)
	}
	if ns := testbed.Namespaces(); len(ns) > 0 && w.TB != nil {
		t.Errorf("namespaces left: %v", ns)
	}
	var sb strings.Builder
	if err := rep.WriteTable(&sb); err != nil || !strings.Contains(sb.String(), "machine restored") {
		t.Errorf("table: %v\n%s", err, sb.String())
	}
}

// The irqbalance configuration really runs `irqbalance --oneshot` with every
// IRQ outside the test bed banned: the machine must come back exactly and no
// applied journal may remain that `irqpilot revert` could replay. (The veth
// has no IRQs, so here irqbalance has nothing to place and this checks the
// bans; the write-back of moved IRQs runs only where it moves one.)
func TestBenchIrqbalanceRestoresMachine(t *testing.T) {
	livetest.NeedRoot(t, "memcached", "memcaslap", "taskset", "irqbalance")
	w, err := workload.NewNet("memcached", workload.NetOptions{Testbed: testbed.Options{FS: liveFS, Queues: 2, StateDir: t.TempDir()}, ClientThreads: 2, Connections: 8})
	if err != nil {
		t.Fatal(err)
	}
	before, err := ReadMachineState(liveFS)
	if err != nil {
		t.Fatal(err)
	}
	state := t.TempDir()
	r := &Runner{FS: liveFS, Workload: w, Configs: []string{"irqbalance"}, Rounds: 1, Duration: time.Second, StateDir: state}
	rep, err := Bench(context.Background(), r, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Runs) != 1 || rep.Runs[0].Error != "" {
		t.Fatalf("runs %+v", rep.Runs)
	}
	after, _ := ReadMachineState(liveFS)
	if d := before.Diff(after); len(d) > 0 {
		t.Errorf("state differs after the irqbalance configuration: %v", d)
	}
	js, err := apply.History(state)
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range js {
		if j.State == apply.StateApplied || j.State == apply.StateApplying {
			t.Errorf("journal %s (%s) left %s: a revert would replay it", j.ID, j.PlanFile, j.State)
		}
	}
}

func TestCutRunOptions(t *testing.T) {
	for _, c := range []struct {
		in, name string
		bp       *workload.BusyPoll
	}{
		{"latency", "latency", nil},
		{"latency/busypoll=50", "latency", &workload.BusyPoll{SocketUsecs: 50}},
		{"default/epollbusy=100/busypoll=0", "default", &workload.BusyPoll{EpollUsecs: 100}},
		{"spec:app=1,rps=0/busypoll=25", "spec:app=1,rps=0", &workload.BusyPoll{SocketUsecs: 25}},
	} {
		name, o, err := CutRunOptions(c.in)
		if err != nil || name != c.name || (o.BusyPoll == nil) != (c.bp == nil) || (c.bp != nil && *o.BusyPoll != *c.bp) {
			t.Errorf("%s → %q %+v %v, want %q %+v", c.in, name, o.BusyPoll, err, c.name, c.bp)
		}
	}
	for in, want := range map[string]string{
		"/busypoll=1":              "no name",
		"latency/busypoll":         "not KEY=MICROSECONDS",
		"latency/busypoll=x":       "not KEY=MICROSECONDS",
		"latency/spin=5":           "unknown option",
		"latency/busypoll=-1":      "want 0 (off) to 1000",
		"latency/epollbusy=100000": "want 0 (off) to 1000",
	} {
		if _, _, err := CutRunOptions(in); err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), in) {
			t.Errorf("%s: %v, want an error naming it and %q", in, err, want)
		}
	}
}

// Busy polling is the udp sink's: a configuration label asking it of
// another workload is refused before anything runs.
func TestBusyPollOnlyUDP(t *testing.T) {
	w, err := workload.NewNet("memcached", workload.NetOptions{Testbed: testbed.Options{FS: liveFS, Queues: 1}})
	if err != nil {
		t.Fatal(err)
	}
	r := &Runner{FS: liveFS, Workload: w, Configurator: Configs{}}
	if _, err := r.Setup("default/busypoll=50", workload.AppInfo{}); err == nil || !strings.Contains(err.Error(), "memcached") {
		t.Errorf("memcached default/busypoll=50: %v", err)
	}
	if _, err := r.Setup("default/busypoll=0", workload.AppInfo{}); err != nil {
		t.Errorf("busypoll=0 (off) refused: %v", err)
	}
}

// bench created /var/lib/irqpilot (and its bench directory) 0755 with
// MkdirAll. Both are now made under the state directory's rules: 0700.
func TestBenchStateDirPrivate(t *testing.T) {
	base := filepath.Join(t.TempDir(), "lib")
	if err := os.Mkdir(base, 0o755); err != nil {
		t.Fatal(err)
	}
	state := filepath.Join(base, "irqpilot", "bench")
	if err := secureStateDir(state); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{filepath.Dir(state), state} {
		fi, err := os.Stat(d)
		if err != nil {
			t.Fatal(err)
		}
		if perm := fi.Mode().Perm(); perm != 0o700 {
			t.Errorf("%s created %04o, want 0700", d, perm)
		}
	}
	// An existing parent is left as it is (it may be /tmp); a state
	// directory others can write is refused.
	if fi, _ := os.Stat(base); fi.Mode().Perm() != 0o755 {
		t.Errorf("existing parent %s changed to %04o", base, fi.Mode().Perm())
	}
	open := filepath.Join(base, "open")
	os.Mkdir(open, 0o777)
	os.Chmod(open, 0o777)
	if err := secureStateDir(filepath.Join(open, "bench")); err == nil {
		t.Errorf("a bench state directory below a world-writable directory was accepted")
	}
}
