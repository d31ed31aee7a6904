package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/irqpilot/irqpilot/internal/bench/stats"

	"github.com/irqpilot/irqpilot/internal/bench"
	"github.com/irqpilot/irqpilot/internal/verify"
)

// A spec's KEY=VALUE fields stay with it; a configuration with options
// after a spec ("latency/busypoll=50") starts a new one.
func TestSplitConfigs(t *testing.T) {
	for in, want := range map[string][]string{
		"default,spec:app=0,rps=1,auto":                                                             {"default", "spec:app=0,rps=1", "auto"},
		"spec:app=0,latency/busypoll=50":                                                            {"spec:app=0", "latency/busypoll=50"},
		"spec:app=0,client=1,spec:rps=off,flows=8":                                                  {"spec:app=0,client=1", "spec:rps=off,flows=8"},
		"spec:app=0,rps=1#best,default#aa":                                                          {"spec:app=0,rps=1#best", "default#aa"},
		"spec:app=1,rps=0&napi:defer=2,flush=20000#tune,auto":                                       {"spec:app=1,rps=0&napi:defer=2,flush=20000#tune", "auto"},
		"default,napi:defer=2,flush=200000,suspend=20000000/epollbusy=50#best,napi:threaded=1,auto": {"default", "napi:defer=2,flush=200000,suspend=20000000/epollbusy=50#best", "napi:threaded=1", "auto"},
	} {
		if d := cmp.Diff(want, splitConfigs(in)); d != "" {
			t.Errorf("splitConfigs(%q) (-want +got):\n%s", in, d)
		}
	}
}

// A --baseline that names no configuration is refused before anything is
// measured or started (a typo would otherwise run every round and then
// compare nothing).
func TestBenchBaselineChecked(t *testing.T) {
	root := newRootCmd()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs([]string{"bench", "--workload", "memcached", "--configs", "default,default#aa,auto", "--baseline", "#best"})
	err := root.Execute()
	if err == nil || !strings.Contains(err.Error(), `--baseline: baseline "#best" is not one of`) {
		t.Fatalf("bench --baseline #best: %v", err)
	}
	if strings.Contains(out.String(), "round 1") {
		t.Errorf("measured before refusing:\n%s", out.String())
	}
	// --aa measures; --from only reads.
	root = newRootCmd()
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs([]string{"bench", "--from", "x.json", "--aa"})
	if err := root.Execute(); err == nil || !strings.Contains(err.Error(), "--aa") {
		t.Errorf("bench --from --aa: %v", err)
	}
}

// --aa measures a second copy of the baseline beside it: a real (short)
// bench of a command workload whose figure is drawn afresh every run (the
// clock's nanoseconds), so the twin and its baseline come from one
// distribution. The twin is measured every round, judged with a test (6
// rounds: enough for one at 95 %), the table states the noise floor and no
// "no A/A twin" warning, and each run records where the command ran.
// Nothing on the machine is changed by the default configuration.
func TestBenchAATwinLive(t *testing.T) {
	if testing.Short() {
		t.Skip("live test (-short)")
	}
	if _, err := exec.LookPath("date"); err != nil {
		t.Skip("no date command")
	}
	dir := t.TempDir()
	report := filepath.Join(dir, "aa.json")
	root := newRootCmd()
	var out, errOut bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&errOut)
	root.SetArgs([]string{"bench", "--workload", "command", "--command", "date +%N", "--pattern", `^0*(\d+)`, "--unit", "ns",
		"--configs", "default", "--aa", "--rounds", "6", "--duration", "1s", "--warmup", "0", "--prime", "0",
		"--state-dir", filepath.Join(dir, "state"), "-o", report})
	if err := root.Execute(); err != nil {
		t.Fatalf("bench --aa: %v\n%s\n%s", err, out.String(), errOut.String())
	}
	table := out.String()
	for _, want := range []string{"default#aa", "noise floor: default#aa, the same configuration as default", "machine restored"} {
		if !strings.Contains(table, want) {
			t.Errorf("table lacks %q:\n%s", want, table)
		}
	}
	if strings.Contains(table, "no A/A twin") {
		t.Errorf("twin measured over 6 rounds, yet:\n%s", table)
	}
	b, err := os.ReadFile(report)
	if err != nil {
		t.Fatal(err)
	}
	var rep bench.Report
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	twin := 0
	for _, r := range rep.Runs {
		if r.Config == "default#aa" && r.Error == "" {
			twin++
		}
		if r.AppCPUs == "" || r.ClientCPUs != "" {
			t.Errorf("run %s round %d: app %q client %q, want the online CPUs and no load generator", r.Config, r.Round, r.AppCPUs, r.ClientCPUs)
		}
	}
	if twin != 6 {
		t.Errorf("twin measured %d times, want 6", twin)
	}
	for _, s := range rep.Summary {
		if s.Config == "default#aa" && (s.Verdict == stats.VerdictIndicative || s.Test != stats.TestSign || s.Paired != 6 || s.Ratio == nil) {
			t.Errorf("twin: %+v", s)
		}
	}
}

// Every value of --sweep is checked before anything starts: memcaslap's
// connections must divide over its client threads (3 on 2 CPUs, 2 given
// here), and an unknown parameter or --from is refused.
func TestBenchSweepChecked(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--workload", "memcached", "--client-threads", "2", "--sweep", "connections=4,5"}, "--sweep connections=5: 5 connections do not divide over 2 client threads"},
		{[]string{"--workload", "memcached", "--sweep", "threads=1,2"}, `sweep parameter "threads"`},
		{[]string{"--workload", "memcached", "--sweep", "connections=4,2"}, "values must increase"},
		{[]string{"--from", "x.json", "--sweep", "connections=1,2"}, "--from measures nothing"},
	} {
		root := newRootCmd()
		var out bytes.Buffer
		root.SetOut(&out)
		root.SetErr(&out)
		root.SetArgs(append([]string{"bench"}, c.args...))
		err := root.Execute()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want %q", c.args, err, c.want)
		}
		if strings.Contains(out.String(), "round 1") || strings.Contains(out.String(), "sweep ") {
			t.Errorf("%v: measured before refusing:\n%s", c.args, out.String())
		}
	}
}

// A real (short) sweep of a command workload: one bench per value, the
// curve drawn, the JSON holding every value's report.
func TestBenchSweepLive(t *testing.T) {
	if testing.Short() {
		t.Skip("live test (-short)")
	}
	if _, err := exec.LookPath("date"); err != nil {
		t.Skip("no date command")
	}
	dir := t.TempDir()
	report, chart := filepath.Join(dir, "sweep.json"), filepath.Join(dir, "curve.svg")
	root := newRootCmd()
	var out, errOut bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&errOut)
	root.SetArgs([]string{"bench", "--workload", "command", "--command", "date +%N", "--pattern", `^0*(\d+)`, "--unit", "ns",
		"--configs", "default,default#b", "--rounds", "2", "--duration", "1s", "--warmup", "0", "--prime", "0",
		"--sweep", "connections=1,2", "--state-dir", filepath.Join(dir, "state"), "-o", report, "--chart", chart})
	if err := root.Execute(); err != nil {
		t.Fatalf("bench --sweep: %v\n%s\n%s", err, out.String(), errOut.String())
	}
	for _, want := range []string{"== connections=1", "== connections=2", "sweep of connections: throughput in ns", "machine restored"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	b, err := os.ReadFile(report)
	if err != nil {
		t.Fatal(err)
	}
	var sw bench.Sweep
	if err := json.Unmarshal(b, &sw); err != nil {
		t.Fatal(err)
	}
	if sw.Param != "connections" || len(sw.Points) != 2 || sw.Points[1].Value != 2 || len(sw.Points[1].Report.Runs) != 4 {
		t.Errorf("sweep JSON: %s %d points", sw.Param, len(sw.Points))
	}
	svg, err := os.ReadFile(chart)
	if err != nil || !strings.Contains(string(svg), "default#b") {
		t.Errorf("chart: %v", err)
	}
}

// bench --predictions refuses the comparison flags, and --from reads saved
// campaigns (comma-separated), prints them and writes the table into
// --markdown's generated section, leaving the rest of the file alone.
func TestBenchPredictionsFrom(t *testing.T) {
	root := newRootCmd()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs([]string{"bench", "--predictions", "--workload", "udp", "--aa"})
	if err := root.Execute(); err == nil || !strings.Contains(err.Error(), "--predictions checks the model") {
		t.Errorf("bench --predictions --aa: %v", err)
	}
	dir := t.TempDir()
	var files []string
	for _, w := range []string{"udp", "nginx"} {
		rep := bench.PredictionReport{Workload: w, Host: "h", CPUs: 2, Kernel: "6.18", WindowSeconds: 4,
			Rows: []bench.PredictionRow{{Workload: w, Policy: "auto", Changes: 1, Verification: &verify.Result{Verdict: verify.Confirmed,
				CPUs: []verify.CPU{{CPU: 0, BusyError: 3, IRQError: 1}}, MeanBusyError: 3, MaxBusyError: 3, MeanIRQError: 1, MaxIRQError: 1}}}}
		b, _ := json.Marshal(rep)
		f := filepath.Join(dir, w+".json")
		if err := os.WriteFile(f, b, 0o644); err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	doc := filepath.Join(dir, "benchmarks.md")
	if err := os.WriteFile(doc, []byte("# Benchmarks\n\n"+bench.PredictionsBegin+"\nold\n"+bench.PredictionsEnd+"\n\n## Next\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	root = newRootCmd()
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs([]string{"bench", "--predictions", "--from", strings.Join(files, ","), "--markdown", doc})
	if err := root.Execute(); err != nil {
		t.Fatalf("bench --predictions --from: %v\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "nginx") || !strings.Contains(out.String(), "Changes auto kept that verified worse: none of 2") {
		t.Errorf("printed:\n%s", out.String())
	}
	b, _ := os.ReadFile(doc)
	if s := string(b); !strings.Contains(s, "| udp | auto | 1 | confirmed | 3.0 |") || !strings.Contains(s, "| nginx | auto |") ||
		strings.Contains(s, "old") || !strings.HasSuffix(s, bench.PredictionsEnd+"\n\n## Next\n") {
		t.Errorf("document:\n%s", s)
	}
}
