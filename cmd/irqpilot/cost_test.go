package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/irqpilot/irqpilot/internal/kernel/bpfcost"
	"github.com/irqpilot/irqpilot/internal/livetest"
)

// runAs runs the binary as an unprivileged user (nobody) with setpriv.
func runAs(t *testing.T, bin string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	argv := append([]string{"--reuid=65534", "--regid=65534", "--clear-groups", bin}, args...)
	cmd := exec.Command("setpriv", argv...)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr, cmd.Dir = &o, &e, "/"
	err := cmd.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("setpriv %v: %v", args, err)
	}
	return o.String(), e.String(), code
}

// With BPF denied (an unprivileged user) top, doctor and record still work
// and say they estimated interrupt time from counts, and why.
func TestCostFallbackUnprivileged(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to switch to an unprivileged user")
	}
	if _, err := exec.LookPath("setpriv"); err != nil {
		t.Skip("needs setpriv (util-linux)")
	}
	bin := livetest.Irqpilot(t)
	const why = "interrupt cost: estimated from counts, eBPF unavailable: not permitted"

	out, errOut, code := runAs(t, bin, "top", "--once", "--json", "--interval", "200ms")
	if code != 0 {
		t.Fatalf("top as nobody: exit %d: %s", code, errOut)
	}
	var top struct {
		CostSource string `json:"cost_source"`
		CPUs       []struct {
			SoftirqTime map[string]float64 `json:"softirq_time"`
		} `json:"cpus"`
	}
	if err := json.Unmarshal([]byte(out), &top); err != nil {
		t.Fatalf("top --json: %v\n%s", err, out)
	}
	if top.CostSource != "counts" || len(top.CPUs) == 0 || top.CPUs[0].SoftirqTime == nil {
		t.Errorf("top as nobody: cost_source %q, cpus %+v", top.CostSource, top.CPUs)
	}
	if strings.Count(errOut, why) != 1 {
		t.Errorf("top as nobody: stderr does not say once why counts were used:\n%s", errOut)
	}

	out, errOut, code = runAs(t, bin, "doctor", "--json", "--duration", "200ms")
	if code != 0 && code != 1 {
		t.Fatalf("doctor as nobody: exit %d: %s", code, errOut)
	}
	var doc struct {
		CostSource string   `json:"cost_source"`
		Notes      []string `json:"notes"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("doctor --json: %v\n%s", err, out)
	}
	if doc.CostSource != "counts" || !strings.Contains(strings.Join(doc.Notes, "\n"), why) {
		t.Errorf("doctor as nobody: cost_source %q, notes %q", doc.CostSource, doc.Notes)
	}

	out, errOut, code = runAs(t, bin, "record", "-o", "-", "--duration", "200ms", "--interval", "100ms")
	if code != 0 || !strings.Contains(errOut, why) || strings.Contains(out, `"cost"`) {
		t.Errorf("record as nobody: exit %d, stderr %q, cost stored: %v", code, errOut, strings.Contains(out, `"cost"`))
	}

	// --cost=bpf refuses rather than falling back.
	if _, errOut, code = runAs(t, bin, "top", "--once", "--cost=bpf", "--interval", "100ms"); code == 0 || !strings.Contains(errOut, "--cost=bpf") {
		t.Errorf("top --cost=bpf as nobody: exit %d, %q", code, errOut)
	}
}

// As root, top --json says bpf and carries measured times.
func TestCostMeasuredTop(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
	if err := bpfcost.Check(); err != nil {
		t.Skipf("eBPF unavailable: %v", err)
	}
	var o, e bytes.Buffer
	g := &globalFlags{root: "/"}
	opts := &topOptions{g: g, once: true, interval: 300_000_000, irqs: 5, cost: costBPF}
	g.json = true
	if err := opts.run(&o, &e); err != nil {
		t.Fatal(err)
	}
	var top struct {
		CostSource string `json:"cost_source"`
		CPUs       []struct {
			SoftirqTime map[string]float64 `json:"softirq_time"`
		} `json:"cpus"`
	}
	if err := json.Unmarshal(o.Bytes(), &top); err != nil {
		t.Fatal(err)
	}
	if top.CostSource != "bpf" || len(top.CPUs) == 0 {
		t.Fatalf("cost_source %q", top.CostSource)
	}
	for _, v := range []string{"NET_RX", "NET_TX", "BLOCK", "TIMER", "SCHED", "RCU"} {
		if _, ok := top.CPUs[0].SoftirqTime[v]; !ok {
			t.Errorf("softirq_time lacks %s: %v", v, top.CPUs[0].SoftirqTime)
		}
	}
	if e.Len() != 0 {
		t.Errorf("stderr with eBPF working: %q", e.String())
	}
}
