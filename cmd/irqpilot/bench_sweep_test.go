package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/irqpilot/irqpilot/internal/bench"
)

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
