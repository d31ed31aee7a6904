package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/irqpilot/irqpilot/internal/diagnose"
	"github.com/irqpilot/irqpilot/internal/kernel"
	"github.com/irqpilot/irqpilot/internal/kernel/bpfcost"
	"github.com/irqpilot/irqpilot/internal/livetest"
	"github.com/irqpilot/irqpilot/internal/load"
	"github.com/irqpilot/irqpilot/internal/plan"
)

const loadTestdata = "../../internal/load/testdata"

// copyTree copies a small directory of regular files.
func copyTree(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.Walk(src, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		if fi.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
}

type doctorJSON struct {
	Interval float64 `json:"interval_seconds"`
	Findings []struct {
		ID       string `json:"id"`
		Severity string `json:"severity"`
		CPUs     []int  `json:"cpus"`
		Summary  string `json:"summary"`
		Evidence []struct {
			Name  string  `json:"name"`
			Value float64 `json:"value"`
			Unit  string  `json:"unit"`
		} `json:"evidence"`
		Fix string `json:"fix"`
	} `json:"findings"`
}

func TestDoctorCapturedPairs(t *testing.T) {
	a, b := filepath.Join(loadTestdata, "udp-loopback/a"), filepath.Join(loadTestdata, "udp-loopback/b")
	// The real loopback capture: both CPUs share the work; no warnings.
	out, errOut, err := runIrqpilot(t, "doctor", "--root", a, "--after", b, "--json")
	if exitCode(err) != 0 {
		t.Fatalf("exit %v: %s", err, errOut)
	}
	var rep doctorJSON
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if rep.Interval < 1 || rep.Interval > 1.1 || rep.Findings == nil {
		t.Errorf("interval %v findings %v", rep.Interval, rep.Findings)
	}
	for _, f := range rep.Findings {
		if f.Severity != "info" {
			t.Errorf("unexpected %s finding %s", f.Severity, f.ID)
		}
	}

	// The same pair with 300 backlog drops on CPU1 in the second sample:
	// a softnet-drops warning and exit status 1.
	dir := udpLoopbackWithDrops(t)
	out, errOut, err = runIrqpilot(t, "doctor", "--root", filepath.Join(dir, "a"), "--after", filepath.Join(dir, "b"), "--json")
	if exitCode(err) != 1 {
		t.Fatalf("exit %v (want 1): %s %s", err, out, errOut)
	}
	rep = doctorJSON{}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	found, evidence := false, ""
	for _, f := range rep.Findings {
		if f.ID == "softnet-drops" {
			found = true
			if f.Severity != "warning" || len(f.CPUs) != 1 || f.CPUs[0] != 1 || len(f.Evidence) == 0 || f.Evidence[0].Name != "CPU1 dropped" {
				t.Errorf("%+v", f)
			}
			// 300 drops over the capture's interval.
			if want := 300 / rep.Interval; f.Evidence[0].Value < want-0.01 || f.Evidence[0].Value > want+0.01 {
				t.Errorf("drops %v/s, want %.2f", f.Evidence[0].Value, want)
			}
			var evs []string
			for _, e := range f.Evidence {
				evs = append(evs, e.Name+" "+trimFloat(e.Value)+unitSuffix(e.Unit))
			}
			evidence = "  Evidence: " + strings.Join(evs, "; ")
		}
	}
	if !found {
		t.Errorf("no softnet-drops finding: %s", out)
	}

	// Text for people: the finding, its evidence and fix.
	out, _, err = runIrqpilot(t, "doctor", "--root", filepath.Join(dir, "a"), "--after", filepath.Join(dir, "b"))
	if exitCode(err) != 1 || !strings.Contains(out, "\n  Fix: Raise the backlog") {
		t.Errorf("text output (exit %v):\n%s", err, out)
	}
	wantLines(t, out, "WARNING  softnet-drops (CPU 1)", evidence)
}

func TestDoctorErrors(t *testing.T) {
	a := filepath.Join(loadTestdata, "udp-loopback/a")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"doctor", "--root", a}, "needs two samples"},
		{[]string{"doctor", "--root", a, "--after", "/nonexistent"}, "--after /nonexistent"},
		{[]string{"doctor", "--root", filepath.Join(loadTestdata, "udp-loopback/b"), "--after", a}, "positive interval"},
		{[]string{"doctor", "--after", a}, "--after is for captured state"},
	} {
		_, errOut, err := runIrqpilot(t, c.args...)
		if exitCode(err) != 2 || !strings.Contains(errOut, c.want) {
			t.Errorf("%v: exit %v stderr %q, want 2 and %q", c.args, err, errOut, c.want)
		}
	}
}

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
	livetest.NeedRoot(t)
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
	livetest.NeedRoot(t)
	if err := bpfcost.Check(); err != nil {
		t.Skipf("eBPF unavailable: %v", err)
	}
	var o, e bytes.Buffer
	g := &globalFlags{root: "/"}
	opts := &topOptions{g: g, once: true, interval: 300_000_000, irqs: 5, cost: costBPF}
	g.json = true
	if err := opts.complete(nil, nil); err != nil {
		t.Fatal(err)
	}
	defer opts.cleanup()
	if err := opts.run(context.Background(), &o, &e); err != nil {
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

// udpLoopbackWithDrops copies the captured pair of a UDP flood over
// loopback (a, b) and gives CPU1 300 backlog drops in the second sample.
func udpLoopbackWithDrops(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	copyTree(t, filepath.Join(loadTestdata, "udp-loopback"), dir)
	sn := filepath.Join(dir, "b/proc/net/softnet_stat")
	data, err := os.ReadFile(sn)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(data), "\n")
	f := strings.Fields(lines[1])
	f[1] = fmt.Sprintf("%08x", 300)
	lines[1] = strings.Join(f, " ")
	if err := os.WriteFile(sn, []byte(strings.Join(lines, "\n")), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// startKilled starts a helper process and stops it by its PID when the test
// ends (SIGTERM, so that stress-ng reaps its workers; SIGKILL if it lingers).
func startKilled(t *testing.T, args ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(args[0], args[1:]...)
	if err := cmd.Start(); err != nil {
		t.Fatalf("%s: %v", strings.Join(args, " "), err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	})
	return cmd
}

// The machine, live: memcached in a namespace of its own behind a
// 2-queue veth pair, memcaslap loading it from the host side and two
// CPU-bound stress-ng workers keeping both CPUs saturated. doctor (the
// built binary, --json) must not move work onto a CPU whose measured
// headroom — the one it reports — is insufficient, must find memcached as
// the consumer of the traffic, and no fix may ever move memcaslap, the load
// generator.
func TestDoctorFixesRespectHeadroomLive(t *testing.T) {
	livetest.NeedRoot(t, "ip", "memcached", "memcaslap", "stress-ng")
	var tools []string
	for _, name := range []string{"ip", "memcached", "memcaslap", "stress-ng"} {
		p, _ := exec.LookPath(name)
		tools = append(tools, p)
	}
	mc, mcs, stress := tools[1], tools[2], tools[3]
	bin := livetest.Irqpilot(t)

	b := make([]byte, 3)
	_, _ = rand.Read(b)
	sfx := hex.EncodeToString(b)
	ns, hostEnd, peer := "ihr"+sfx, "vhr"+sfx, "vhp"+sfx
	o3 := int(b[1]%200) + 20
	hostIP, peerIP := fmt.Sprintf("10.216.%d.1", o3), fmt.Sprintf("10.216.%d.2", o3)
	livetest.Netns(t, ns)
	livetest.Run(t, "ip", "link", "add", hostEnd, "numtxqueues", "2", "numrxqueues", "2", "type", "veth",
		"peer", "name", peer, "numtxqueues", "2", "numrxqueues", "2", "netns", ns)
	t.Cleanup(func() { _ = exec.Command("ip", "link", "del", hostEnd).Run() })
	livetest.Run(t, "ip", "addr", "add", hostIP+"/24", "dev", hostEnd)
	livetest.Run(t, "ip", "link", "set", hostEnd, "up")
	livetest.Run(t, "ip", "-n", ns, "addr", "add", peerIP+"/24", "dev", peer)
	livetest.Run(t, "ip", "-n", ns, "link", "set", peer, "up")

	// `ip netns exec` execs memcached: the PID is memcached's.
	server := startKilled(t, "ip", "netns", "exec", ns, mc, "-u", "nobody", "-l", peerIP, "-p", "11211", "-U", "0", "-t", "2")
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", peerIP+":11211", time.Second)
		if err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("memcached never listened: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	gen := startKilled(t, mcs, "-s", peerIP+":11211", "-T", "2", "-c", "32", "-t", "60s")
	startKilled(t, stress, "--cpu", strconv.Itoa(runtime.NumCPU()), "--timeout", "60s", "--quiet")
	time.Sleep(2 * time.Second) // connections up, load steady

	out, err := exec.Command(bin, "--json", "doctor", "--duration", "3s").Output()
	if code := exitCode(err); code != 0 && code != 1 {
		t.Fatalf("doctor: exit %d: %v\n%s", code, err, out)
	}
	var rep struct {
		CPUs      []load.CPULoad       `json:"cpus"`
		Headroom  []diagnose.Headroom  `json:"headroom"`
		Consumers []kernel.SocketOwner `json:"consumers"`
		Findings  []struct {
			ID     string        `json:"id"`
			Fix    string        `json:"fix"`
			Remedy *doctorRemedy `json:"remedy"`
		} `json:"findings"`
	}
	if err := json.Unmarshal(out, &rep); err != nil {
		t.Fatalf("doctor --json: %v\n%s", err, out)
	}
	t.Logf("headroom %+v", rep.Headroom)

	// The consumer: memcached, through the host's end of the veth pair;
	// memcaslap is not one.
	var found bool
	for _, o := range rep.Consumers {
		if o.PID == gen.Process.Pid {
			t.Errorf("the load generator memcaslap (pid %d) is listed as a consumer: %+v", o.PID, o)
		}
		if o.PID == server.Process.Pid {
			found = true
			if o.Comm != "memcached" || len(o.Devices) != 1 || o.Devices[0] != hostEnd {
				t.Errorf("consumer %+v, want memcached behind %s", o, hostEnd)
			}
		}
	}
	if !found {
		t.Errorf("memcached (pid %d) not among the consumers %+v", server.Process.Pid, rep.Consumers)
	}

	// The measurement doctor printed.
	headroom := map[int]diagnose.Headroom{}
	for _, h := range rep.Headroom {
		headroom[h.CPU] = h
	}
	saturated := true
	for _, c := range rep.CPUs {
		h, ok := headroom[c.ID]
		if !ok || (h.Measured && math.Abs(h.Busy-(100-c.Idle-c.IOWait)) > 1e-6) {
			t.Errorf("CPU%d: headroom %+v does not match its measured use %+v", c.ID, h, c)
		}
		saturated = saturated && h.Measured && h.Spare == 0
	}
	if !saturated {
		t.Errorf("two CPU-bound workers and memcaslap left spare time: %+v", rep.Headroom)
	}

	taskset := regexp.MustCompile("taskset -apc ([0-9,-]+) ([0-9]+)")
	for _, f := range rep.Findings {
		if f.Remedy == nil {
			t.Errorf("%s has no remedy object", f.ID)
			continue
		}
		if p := f.Remedy.Plan; p != nil {
			for _, a := range p.Apps {
				if a.PID != server.Process.Pid {
					t.Errorf("%s moves pid %d, not memcached (pid %d)", f.ID, a.PID, server.Process.Pid)
				}
			}
			for _, c := range f.Remedy.Prediction.CPUs {
				h := headroom[c.CPU]
				if c.PredictedBusy > c.BeforeBusy+0.1 && (!h.Measured || h.Spare <= 0 || c.PredictedBusy > diagnose.HeadroomBusyMaxPct+0.05) {
					t.Errorf("%s moves work onto CPU%d without the headroom doctor measured (%+v): %+v", f.ID, c.CPU, h, c)
				}
			}
			if saturated {
				t.Errorf("%s moves work on a saturated machine: %+v", f.ID, p)
			}
		}
		for _, mt := range taskset.FindAllStringSubmatch(f.Fix, -1) {
			if pid, _ := strconv.Atoi(mt[2]); pid != server.Process.Pid {
				t.Errorf("%s: fix moves pid %d, not memcached (pid %d): %q", f.ID, pid, server.Process.Pid, f.Fix)
			}
		}
		if strings.Contains(f.Fix, fmt.Sprintf("(pid %d)", gen.Process.Pid)) && !strings.Contains(f.Fix, fmt.Sprintf("(pid %d) stays", gen.Process.Pid)) {
			t.Errorf("%s: fix names memcaslap other than to keep it: %q", f.ID, f.Fix)
		}
	}
}

// hardirqBoundPair is the udp-loopback pair with CPU0 made interrupt-bound
// by one IRQ in the second sample: 70 % hardirq, 5 % idle, IRQ 34
// (virtio4-input) firing 20000 times on it, while CPU1 is 96 % idle. Its
// remedy moves IRQ 34 onto CPU1.
func hardirqBoundPair(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	copyTree(t, filepath.Join(loadTestdata, "udp-loopback"), dir)
	edit := func(name string, f func(a, b []string) []string) {
		t.Helper()
		ra, err := os.ReadFile(filepath.Join(dir, "a", name))
		if err != nil {
			t.Fatal(err)
		}
		rb, err := os.ReadFile(filepath.Join(dir, "b", name))
		if err != nil {
			t.Fatal(err)
		}
		out := f(strings.Split(string(ra), "\n"), strings.Split(string(rb), "\n"))
		if err := os.WriteFile(filepath.Join(dir, "b", name), []byte(strings.Join(out, "\n")), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// proc/stat: the interval is 1.03 s, 103 ticks per CPU.
	ticks := map[string][]uint64{
		"cpu0": {10, 0, 10, 5, 0, 72, 6, 0, 0, 0},
		"cpu1": {2, 0, 2, 99, 0, 0, 0, 0, 0, 0},
	}
	edit("proc/stat", func(a, b []string) []string {
		sum := make([]uint64, 10)
		for i, line := range a {
			f := strings.Fields(line)
			if len(f) < 11 || ticks[f[0]] == nil {
				continue
			}
			for k := range 10 {
				v, _ := strconv.ParseUint(f[k+1], 10, 64)
				v += ticks[f[0]][k]
				f[k+1] = strconv.FormatUint(v, 10)
				sum[k] += v
			}
			b[i] = strings.Join(f, " ")
		}
		for i, line := range b {
			if f := strings.Fields(line); len(f) > 0 && f[0] == "cpu" {
				for k := range 10 {
					f[k+1] = strconv.FormatUint(sum[k], 10)
				}
				b[i] = strings.Join(f, " ")
			}
		}
		return b
	})
	edit("proc/interrupts", func(a, b []string) []string {
		for i, line := range a {
			f := strings.Fields(line)
			if len(f) > 2 && f[0] == "34:" {
				v, _ := strconv.ParseUint(f[1], 10, 64)
				f[1] = strconv.FormatUint(v+20000, 10)
				b[i] = strings.Join(f, " ")
			}
		}
		return b
	})
	return dir
}

// doctor's remedy for a finding and `plan --remedy` for the same finding,
// from the same measurement (a captured pair), are one plan with one
// prediction: both are made by policy.Remedy and predicted by
// policy.Predict. The plan file and plan's text output carry it too.
func TestDoctorRemedyPredictionEqualsPlan(t *testing.T) {
	dir := hardirqBoundPair(t)
	a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	out, errOut, err := runIrqpilot(t, "doctor", "--root", a, "--after", b, "--json")
	if exitCode(err) != 1 {
		t.Fatalf("doctor: exit %v: %s", err, errOut)
	}
	var rep struct {
		Findings []doctorFinding `json:"findings"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	var f *doctorFinding
	for i := range rep.Findings {
		if rep.Findings[i].ID == diagnose.IDInterruptBound {
			f = &rep.Findings[i]
		}
	}
	if f == nil || f.Remedy == nil || f.Remedy.Plan == nil || f.Remedy.Prediction == nil {
		t.Fatalf("no interrupt-bound finding with a remedy: %s", out)
	}
	if f.Ref != "interrupt-bound-cpu:cpu0" || len(f.Remedy.Plan.IRQs) != 1 || *f.Remedy.Plan.IRQs[0].IRQ != 34 || f.Remedy.Plan.IRQs[0].CPUs.String() != "1" {
		t.Fatalf("remedy %+v", f.Remedy.Plan)
	}
	if !slices.Contains(f.Remedy.Commands, "echo 1 > /proc/irq/34/smp_affinity_list") || !strings.Contains(f.Fix, "irqpilot plan --remedy interrupt-bound-cpu:cpu0 -o fix.yaml && irqpilot apply --verify fix.yaml") {
		t.Errorf("commands %q fix %q", f.Remedy.Commands, f.Fix)
	}
	cpu1 := f.Remedy.Prediction.CPU(1)
	if cpu1 == nil || cpu1.PredictedBusy <= cpu1.BeforeBusy || cpu1.PredictedBusy > diagnose.HeadroomBusyMaxPct {
		t.Errorf("CPU1 prediction %+v", cpu1)
	}

	out, errOut, err = runIrqpilot(t, "plan", "--root", a, "--after", b, "--remedy", f.Ref, "--json")
	if err != nil {
		t.Fatalf("plan --remedy: %v: %s", err, errOut)
	}
	var d struct {
		Plan *plan.Plan `json:"plan"`
	}
	if err := json.Unmarshal([]byte(out), &d); err != nil || d.Plan == nil {
		t.Fatalf("%v: %s", err, out)
	}
	if !reflect.DeepEqual(d.Plan.Prediction, f.Remedy.Prediction) {
		t.Errorf("plan's prediction differs from doctor's:\nplan   %+v\ndoctor %+v", d.Plan.Prediction, f.Remedy.Prediction)
	}
	if !reflect.DeepEqual(d.Plan.IRQs, f.Remedy.Plan.IRQs) || d.Plan.Why != f.Remedy.Plan.Why {
		t.Errorf("plan differs from doctor's remedy:\nplan   %+v\ndoctor %+v", d.Plan, f.Remedy.Plan)
	}

	// The text output: the plan file, then the changes and the prediction
	// table as YAML comments.
	out, _, err = runIrqpilot(t, "plan", "--root", a, "--after", b, "--remedy", diagnose.IDInterruptBound)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := plan.Parse("stdout", []byte(out)); err != nil {
		t.Errorf("printed plan does not parse: %v\n%s", err, out)
	}
	wantLines(t, out,
		"# Prediction per CPU (% of the CPU; measured over 1.0 s, interrupt time estimated from interrupt counts):",
		"#   CPU  busy before  busy predicted  irq before  irq predicted",
		fmt.Sprintf("#     1  %11.1f  %14.1f  %10.1f  %13.1f", cpu1.BeforeBusy, cpu1.PredictedBusy, cpu1.BeforeIRQ, cpu1.PredictedIRQ),
	)
}

// plan measures the way doctor does: as root with the eBPF collector (the
// plan's prediction says bpf), and where eBPF is denied from counts, saying
// why once on stderr and in the prediction table.
func TestPlanMeasuresLikeDoctorLive(t *testing.T) {
	livetest.NeedRoot(t)
	c, err := bpfcost.Open()
	if err != nil {
		t.Skipf("eBPF collector unavailable here: %v", err)
	}
	_ = c.Close()
	bin := livetest.Irqpilot(t)
	out, err := exec.Command(bin, "plan", "--policy", "auto", "--sample", "300ms", "--json").Output()
	if err != nil {
		t.Fatalf("plan: %v\n%s", err, out)
	}
	var d struct {
		Plan *plan.Plan `json:"plan"`
	}
	if err := json.Unmarshal(out, &d); err != nil || d.Plan == nil || d.Plan.Prediction == nil {
		t.Fatalf("plan --json: %v\n%s", err, out)
	}
	if d.Plan.Prediction.Source != "bpf" || strings.Contains(d.Plan.Why, "estimated from interrupt counts") {
		t.Errorf("plan as root: prediction source %q, why %q", d.Plan.Prediction.Source, d.Plan.Why)
	}
	if _, err := exec.LookPath("setpriv"); err != nil {
		t.Skip("needs setpriv (util-linux) for the unprivileged half")
	}
	text, errOut, code := runAs(t, bin, "plan", "--policy", "auto", "--sample", "300ms")
	if code != 0 {
		t.Fatalf("plan as nobody: exit %d: %s", code, errOut)
	}
	if strings.Count(errOut, "interrupt cost: estimated from counts, eBPF unavailable: not permitted") != 1 ||
		!strings.Contains(text, "  source: counts") || !strings.Contains(text, "interrupt time estimated from interrupt counts):") {
		t.Errorf("plan as nobody does not say it estimated from counts:\nstderr %s\n%s", errOut, text)
	}
}
