package agent

import (
	"log/slog"
	"math"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"golang.org/x/sys/unix"

	names "github.com/irqpilot/irqpilot/internal/agent/metricnames"
	"github.com/irqpilot/irqpilot/internal/cpuset"
	"github.com/irqpilot/irqpilot/internal/diagnose"
	"github.com/irqpilot/irqpilot/internal/host"
	"github.com/irqpilot/irqpilot/internal/kernel"
	"github.com/irqpilot/irqpilot/internal/livetest"
	"github.com/irqpilot/irqpilot/internal/load"
	"github.com/irqpilot/irqpilot/internal/plan"
	"github.com/irqpilot/irqpilot/internal/verify"
)

// verifyBed is an agent with --adapt on the generated host, driven one pass
// at a time with constructed loads: CPU 0 runs eth0 rx-0's interrupt and
// its whole receive softirq, CPU 1 is idle, CPU 2 runs other work; the
// planner steers rx-0 onto CPU 1 with RPS.
type verifyBed struct {
	t       *testing.T
	ag      *Agent
	root    string
	rps     string
	orig    string
	irq     int
	planned int
	log     *livetest.Buffer
}

const bedPPS = 50000.0

func newVerifyBed(t *testing.T) *verifyBed {
	t.Helper()
	root, fs, h := bigHostCopy(t)
	b := &verifyBed{t: t, root: root, rps: "sys/class/net/eth0/queues/rx-0/rps_cpus", irq: *h.NIC("eth0").RxQueues[0].IRQ, log: &livetest.Buffer{}}
	b.orig = readTree(t, root, b.rps)
	planner := func(h *host.Host, l *load.Load) (*plan.Plan, error) {
		b.planned++
		one := cpuset.Of(1)
		return &plan.Plan{Version: plan.Version, Policy: "test", Why: "rx-0's softirq onto idle CPU 1",
			RxQueues: []plan.RxQueueEntry{{Device: "eth0", Queue: ptr(0), RPSCPUs: &one, Reason: "test"}}}, nil
	}
	ag := newTestAgent(t, Options{FS: fs, PlanFile: writePlan(t, "version: 1\n"), Interval: time.Second, Listen: "",
		Log: slog.New(slog.NewTextHandler(b.log, nil)), Adapt: true, Planner: planner,
		AdaptOptions: AdaptOptions{Persist: 2, Window: 5, MinDwell: time.Nanosecond, MaxPerHour: 1000}})
	withMetrics(t, ag)
	b.ag = ag
	return b
}

// figures are one CPU's busy and interrupt time, percent.
type figures struct{ busy, irq float64 }

// load is an interval in which each CPU is as given, pps packets are
// received and delivered by rxCPU (0 before the change, 1 after).
func (b *verifyBed) load(cpus map[int]figures, pps float64, rxCPU int) *load.Load {
	l := &load.Load{Interval: time.Second, CostSource: load.CostCounts}
	for id := 0; id <= 2; id++ {
		f := cpus[id]
		c := load.CPULoad{ID: id, CPUTime: load.CPUTime{SoftIRQ: f.irq, System: f.busy - f.irq, Idle: 100 - f.busy},
			Softirqs: map[string]float64{"TIMER": 250}}
		if id == rxCPU {
			c.Softirqs["NET_RX"] = pps
		}
		l.CPUs = append(l.CPUs, c)
		s := load.SoftnetRate{CPU: id}
		if id == rxCPU {
			s.Processed = pps
		}
		l.Softnet = append(l.Softnet, s)
	}
	l.IRQs = []load.IRQRate{{IRQ: b.irq, Rate: 40000, PerCPU: map[int]float64{0: 40000}}}
	return l
}

var beforeFigures = map[int]figures{0: {96, 80}, 1: {5, 0}, 2: {10, 0}}

// hot is CPU 0 interrupt-bound, the evidence the planner acts on.
var hot = []diagnose.Finding{{ID: diagnose.IDInterruptBound, Severity: diagnose.Critical, CPUs: []int{0}, Summary: "CPU0 interrupt-bound"}}

// pass runs n passes of the adaptation state machine on one interval.
func (b *verifyBed) pass(n int, l *load.Load, findings []diagnose.Finding) {
	for i := 0; i < n; i++ {
		b.ag.mu.Lock()
		b.ag.lastLoad, b.ag.findings = l, findings
		b.ag.adaptStep()
		b.ag.mu.Unlock()
	}
}

// apply runs the baseline until the adaptation is applied and returns the
// prediction it is verified against.
func (b *verifyBed) apply() *plan.Prediction {
	b.t.Helper()
	b.pass(2, b.load(beforeFigures, bedPPS, 0), hot)
	st := b.ag.Status()
	if n := len(st.Adaptations); n == 0 || st.Adaptations[n-1].Result != "verifying" {
		b.t.Fatalf("adaptations %+v; want the plan applied and verifying", st.Adaptations)
	}
	if got := b.rpsCPUs(); !got.Equal(cpuset.Of(1)) {
		b.t.Fatalf("%s = CPUs %s after the plan onto CPU 1 was applied", b.rps, got)
	}
	p := b.ag.adapt.pred
	if p.CPU(0) == nil || p.CPU(1) == nil || p.CPU(0).BeforeBusy-p.CPU(0).PredictedBusy < 30 || p.CPU(1).PredictedBusy-p.CPU(1).BeforeBusy < 30 {
		b.t.Fatalf("prediction %+v: want CPU 0 predicted much less busy and CPU 1 much busier", p.CPUs)
	}
	return p
}

// predicted are the prediction's after figures; off moves CPU 0 and CPU 1
// back towards where they were by frac of the predicted move.
func predicted(p *plan.Prediction, frac float64) map[int]figures {
	out := map[int]figures{}
	for _, c := range p.CPUs {
		out[c.CPU] = figures{c.PredictedBusy + frac*(c.BeforeBusy-c.PredictedBusy), c.PredictedIRQ + frac*(c.BeforeIRQ-c.PredictedIRQ)}
	}
	return out
}

// rpsCPUs are the CPUs of rx-0's rps_cpus in the tree now.
func (b *verifyBed) rpsCPUs() cpuset.Set { return maskOf(b.t, filepath.Join(b.root, b.rps)) }

func (b *verifyBed) last() Adaptation {
	st := b.ag.Status()
	return st.Adaptations[len(st.Adaptations)-1]
}

func (b *verifyBed) verdicts(v string) float64 {
	return testutil.ToFloat64(b.ag.m.Adaptations.WithLabelValues(v))
}

func (b *verifyBed) checkJudged(a Adaptation, result string, v verify.Verdict) {
	b.t.Helper()
	if a.Result != result || a.Verdict != string(v) || a.Verification == nil || a.Verification.Verdict != v {
		b.t.Fatalf("adaptation %s %q verdict %q (%+v); want %s with verdict %s", a.Result, a.Reason, a.Verdict, a.Verification, result, v)
	}
	if b.verdicts(string(v)) != 1 {
		b.t.Errorf("%s{verdict=%q} = %v, want 1", "irqpilot_adaptations_total", v, b.verdicts(string(v)))
	}
	if v != verify.Inconclusive {
		e := testutil.ToFloat64(b.ag.m.PredictionError.WithLabelValues("busy"))
		if math.IsNaN(e) || e != a.Verification.MeanBusyError {
			b.t.Errorf("prediction error gauge %v, want the verification's mean busy error %v", e, a.Verification.MeanBusyError)
		}
	}
	b.t.Logf("%s: %s; %s", a.Result, a.Reason, a.Verification.Line())
}

// A change that verifies worse (here the RPS target ends up overloaded:
// CPU 1 95 % busy, CPU 0 no better) is undone at once: on the second
// settled interval in a row that is worse, not at the end of the window.
// The same plan is then not retried on the same load (recorded once,
// logged once), and is retried once the load changes.
func TestAdaptWorseRevertedAtOnceNotRetried(t *testing.T) {
	b := newVerifyBed(t)
	b.apply()
	worse := b.load(map[int]figures{0: {96, 78}, 1: {95, 70}, 2: {10, 0}}, bedPPS, 1)
	b.pass(2, worse, hot) // the unsettled first interval, then one worse
	if a := b.last(); a.Result != "verifying" {
		t.Fatalf("after one settled worse interval: %s %q; want still verifying (one noisy interval is not enough)", a.Result, a.Reason)
	}
	b.pass(1, worse, hot)
	a := b.last()
	b.checkJudged(a, "reverted", verify.Worse)
	if !a.Verification.Early || a.Verification.Intervals != worseRun || !strings.Contains(a.Reason, "undone at once") {
		t.Errorf("reverted at the end of the window (%+v), want at once after %d settled intervals", a.Verification, worseRun)
	}
	if !strings.Contains(a.Verification.Reason, "headroom") {
		t.Errorf("worse for %q, want the headroom rule broken on CPU 1", a.Verification.Reason)
	}
	if got := readTree(t, b.root, b.rps); got != b.orig {
		t.Errorf("%s = %q after the revert, want %q", b.rps, got, b.orig)
	}
	if n := testutil.ToFloat64(b.ag.m.AdaptationsReverted); n != 1 {
		t.Errorf("adaptations reverted %v, want 1", n)
	}
	if !strings.Contains(b.log.String(), "adaptation reverted at once") {
		t.Errorf("log has no line saying the adaptation was reverted at once:\n%s", b.log)
	}

	// The same load again: the plan is made but not applied.
	base := b.load(beforeFigures, bedPPS, 0)
	planned := b.planned
	b.pass(2, base, hot)
	a = b.last()
	if b.planned != planned+1 || a.Result != "not-retried" || !strings.Contains(a.Reason, "verified worse") {
		t.Fatalf("planned %d more, last adaptation %s %q; want the plan not retried", b.planned-planned, a.Result, a.Reason)
	}
	if got := readTree(t, b.root, b.rps); got != b.orig {
		t.Errorf("the plan that verified worse was applied again on the same load: %s = %q", b.rps, got)
	}
	n := len(b.ag.Status().Adaptations)
	b.pass(4, base, hot)
	if b.planned != planned+3 || len(b.ag.Status().Adaptations) != n {
		t.Errorf("planned %d more, %d adaptations recorded more; want the refusal recorded once", b.planned-planned, len(b.ag.Status().Adaptations)-n)
	}
	if c := strings.Count(b.log.String(), "plan not retried"); c != 1 {
		t.Errorf("%d log lines say the plan is not retried, want 1:\n%s", c, b.log)
	}

	// Other work on CPU 2: the load changed, and the plan is tried again.
	changed := b.load(map[int]figures{0: {96, 80}, 1: {5, 0}, 2: {45, 0}}, bedPPS, 0)
	b.pass(2, changed, hot)
	if a = b.last(); a.Result != "verifying" {
		t.Fatalf("after the load changed: %s %q; want the plan applied again", a.Result, a.Reason)
	}
	if got := b.rpsCPUs(); !got.Equal(cpuset.Of(1)) {
		t.Errorf("%s = CPUs %s, want the plan onto CPU 1 applied again", b.rps, got)
	}
	if !strings.Contains(b.log.String(), "the load changed") {
		t.Errorf("log does not say why the plan is retried:\n%s", b.log)
	}
}

// A worse verdict on a single settled interval, followed by one that is
// not, does not undo the adaptation: the window runs to its end and is
// judged as a whole.
func TestAdaptOneWorseIntervalDoesNotRevert(t *testing.T) {
	b := newVerifyBed(t)
	p := b.apply()
	worse := b.load(map[int]figures{0: {96, 78}, 1: {95, 70}, 2: {10, 0}}, bedPPS, 1)
	good := b.load(predicted(p, 0), bedPPS, 1)
	b.pass(1, good, nil)
	b.pass(1, worse, nil)
	b.pass(1, good, nil)
	b.pass(1, worse, nil)
	if a := b.last(); a.Result != "verifying" {
		t.Fatalf("%s %q: reverted on worse intervals that were not in a row", a.Result, a.Reason)
	}
	b.pass(1, good, nil)
	a := b.last()
	if a.Result == "verifying" || a.Verification == nil || a.Verification.Early || a.Verification.Intervals != 3 {
		t.Fatalf("%s %+v; want judged at the end of the window, on its settled 3 intervals", a.Result, a.Verification)
	}
	t.Logf("%s: %s; %s", a.Result, a.Reason, a.Verification.Line())
}

// At the end of its window an adaptation is judged on its verdict:
//   - confirmed is kept, even where the interval rules alone would revert
//     (the evidence still holds: the model predicted what happened), and
//     the prediction error is exported; drops that rose, which the model
//     does not predict, still revert it;
//   - inconclusive, when the workload changes during the window (the
//     packet rate falls by more than the traffic tolerance), is neither
//     kept as confirmed nor counted as worse: the interval rules decide
//     (the evidence still holds: reverted), and the plan may be tried
//     again;
//   - missed (off by more than the tolerance, every figure moved the
//     predicted way) is judged by the interval rules: kept when the
//     evidence is gone and the hot CPU's interrupt time fell, reverted when
//     it still holds — and not remembered as worse.
func TestAdaptJudgedAtWindowEnd(t *testing.T) {
	for _, c := range []struct {
		name string
		// The window measures the prediction's figures off by frac of the
		// predicted move, pps packets/s, CPU 1 dropping drops/s, with
		// findings.
		frac, pps, drops float64
		findings         []diagnose.Finding
		result           string
		verdict          verify.Verdict
		// reason: what the adaptation's reason names; verification: what
		// the verification's reason names.
		reason       []string
		verification string
		// exact: measured as predicted, the busy error is at most 1 point.
		exact bool
		// retried: the plan is applied again on the load from before.
		retried bool
	}{
		{name: "confirmed kept though the evidence holds", pps: bedPPS, findings: hot, result: "kept", verdict: verify.Confirmed,
			reason: []string{"the prediction came true, though", "still holds"}, exact: true},
		{name: "confirmed reverted for drops that rose", pps: bedPPS, drops: 500, findings: hot, result: "reverted", verdict: verify.Confirmed,
			reason: []string{"softnet drops rose"}},
		{name: "inconclusive falls back", pps: bedPPS * 0.4, findings: hot, result: "reverted", verdict: verify.Inconclusive,
			reason: []string{"still holds"}, verification: "workload changed", retried: true},
		{name: "missed kept, evidence gone", frac: 0.5, pps: bedPPS, result: "kept", verdict: verify.Missed,
			reason: []string{"gone"}},
		{name: "missed reverted, evidence holds", frac: 0.5, pps: bedPPS, findings: hot, result: "reverted", verdict: verify.Missed,
			reason: []string{"still holds"}, retried: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := newVerifyBed(t)
			p := b.apply()
			after := b.load(predicted(p, c.frac), c.pps, 1)
			after.Softnet[1].Dropped = c.drops
			b.pass(5, after, c.findings)
			a := b.last()
			b.checkJudged(a, c.result, c.verdict)
			for _, r := range c.reason {
				if !strings.Contains(a.Reason, r) {
					t.Errorf("%s for %q; want it to name %q", a.Result, a.Reason, r)
				}
			}
			if c.verification != "" && !strings.Contains(a.Verification.Reason, c.verification) {
				t.Errorf("verification reason %q; want it to name %q", a.Verification.Reason, c.verification)
			}
			if c.exact && a.Verification.MaxBusyError > 1 {
				t.Errorf("measured exactly as predicted, but the busy error is %.1f", a.Verification.MaxBusyError)
			}
			if got := b.rpsCPUs(); c.result == "kept" && !got.Equal(cpuset.Of(1)) {
				t.Errorf("%s = CPUs %s, want the kept plan (CPU 1) in force", b.rps, got)
			}
			if got := readTree(t, b.root, b.rps); c.result == "reverted" && got != b.orig {
				t.Errorf("%s = %q after the revert, want %q", b.rps, got, b.orig)
			}
			if c.retried {
				b.pass(2, b.load(beforeFigures, bedPPS, 0), hot)
				if a = b.last(); a.Result != "verifying" {
					t.Errorf("after the revert: %s %q; want the plan tried again", a.Result, a.Reason)
				}
			}
		})
	}
}

// The fingerprint of a plan is its settings: reasons, the explanation and
// the prediction do not change it, a setting does.
func TestPlanKey(t *testing.T) {
	one, two := cpuset.Of(1), cpuset.Of(2)
	mk := func(cpus *cpuset.Set, reason, why string) *plan.Plan {
		return &plan.Plan{Version: 1, Policy: "auto", Why: why, Prediction: &plan.Prediction{Source: "counts"},
			RxQueues: []plan.RxQueueEntry{{Device: "eth0", Queue: ptr(0), RPSCPUs: cpus, Reason: reason}}}
	}
	a, b, c := planKey(mk(&one, "x", "y")), planKey(mk(&one, "other reason", "other why")), planKey(mk(&two, "x", "y"))
	if a == "" || a != b || a == c {
		t.Errorf("keys %q %q %q: want equal for the same settings, different for another CPU", a, b, c)
	}
}

// The load a plan was made on is within tolerance of another unless the
// packet rate moved by more than the traffic tolerance or a CPU's busy
// time by more than the tolerance.
func TestLoadChanged(t *testing.T) {
	m := func(pps float64, busy ...float64) verify.Measurement {
		out := verify.Measurement{Traffic: pps, CPUs: map[int]verify.Figures{}}
		for i, x := range busy {
			out.CPUs[i] = verify.Figures{Busy: x}
		}
		return out
	}
	for _, c := range []struct {
		then, now verify.Measurement
		want      string
	}{
		{m(50000, 96, 5), m(52000, 90, 9), ""},
		{m(50000, 96, 5), m(30000, 96, 5), "traffic"},
		{m(50, 96, 5), m(150, 96, 5), ""}, // below verify.MinTraffic
		{m(50000, 96, 5), m(50000, 96, 25), "CPU 1"},
		{m(50000, 96, 5), m(50000, 96, 5, 0), "CPU 2"},
	} {
		if got := loadChanged(c.then, c.now); c.want == "" && got != "" || c.want != "" && !strings.Contains(got, c.want) {
			t.Errorf("loadChanged(%v, %v) = %q, want %q", c.then, c.now, got, c.want)
		}
	}
}

// The verification on the machine's real load: an agent in this process
// samples /proc as it does when it runs, and its planner pins a process
// this test started (a sleep: a real change through the journal that loads
// no CPU) to CPU 1, on evidence the test supplies. The adaptation is judged
// on the measured intervals: whatever the verdict (other work on the
// machine decides it), it is recorded in status — through the JSON the
// status socket serves — with finite errors on every online CPU measured,
// counted in irqpilot_adaptations_total and exported as
// irqpilot_prediction_error_percent; the sleep's affinity is its own again
// if the change was reverted.
func TestLiveAdaptVerdictOnRealLoad(t *testing.T) {
	livetest.NeedRoot(t)
	if runtime.NumCPU() < 2 {
		t.Skip("needs 2 CPUs")
	}
	sleep := exec.Command("sleep", "600")
	if err := sleep.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sleep.Process.Kill(); sleep.Wait() })
	pid := sleep.Process.Pid
	planner := func(h *host.Host, l *load.Load) (*plan.Plan, error) {
		return &plan.Plan{Version: plan.Version, Policy: "test", Why: "pin the test's sleep to CPU 1",
			Apps: []plan.AppEntry{{PID: pid, CPUs: cpuset.Of(1), Reason: "test"}}}, nil
	}
	ag := newTestAgent(t, Options{FS: kernel.New("/"), StateDir: mkState(t), PlanFile: writePlan(t, "version: 1\n"), Interval: 300 * time.Millisecond,
		Adapt: true, Planner: planner, AdaptOptions: AdaptOptions{Persist: 2, Window: 4, MinDwell: time.Hour}})
	reg := withMetrics(t, ag)
	m := ag.m
	evidence := []diagnose.Finding{{ID: diagnose.IDInterruptBound, Severity: diagnose.Critical, CPUs: []int{0}, Summary: "supplied by the test"}}
	var a *Adaptation
	for i := 0; i < 20 && a == nil; i++ {
		ag.mu.Lock()
		ag.observe()
		ag.findings = evidence
		ag.adaptStep()
		ag.mu.Unlock()
		st := ag.Status()
		if n := len(st.Adaptations); n > 0 && st.Adaptations[n-1].Result != "verifying" {
			a = &st.Adaptations[n-1]
		}
		time.Sleep(300 * time.Millisecond)
	}
	if a == nil {
		t.Fatalf("no adaptation decided in 20 passes: %+v", ag.Status().Adaptations)
	}
	// Through the status socket's JSON.
	var st Status
	viaJSON(t, ag.Status(), &st)
	got := st.Adaptations[len(st.Adaptations)-1]
	v := got.Verification
	t.Logf("%s: %s\n  %s", got.Result, got.Reason, v.Line())
	if got.Result != "kept" && got.Result != "reverted" || v == nil || got.Verdict != string(v.Verdict) {
		t.Fatalf("adaptation %s verdict %q verification %+v; want kept or reverted with a verdict", got.Result, got.Verdict, v)
	}
	if v.Verdict == verify.Inconclusive && len(v.CPUs) == 0 {
		t.Fatalf("inconclusive without judging a CPU: %s", v.Reason)
	}
	if len(v.CPUs) < 2 {
		t.Errorf("judged %d CPUs, want every measured CPU (≥ 2)", len(v.CPUs))
	}
	for _, x := range []float64{v.MeanBusyError, v.MaxBusyError, v.MeanIRQError, v.MaxIRQError} {
		if math.IsNaN(x) || math.IsInf(x, 0) || x < 0 || x > 200 {
			t.Errorf("prediction errors %v %v %v %v: want finite", v.MeanBusyError, v.MaxBusyError, v.MeanIRQError, v.MaxIRQError)
			break
		}
	}
	if n := testutil.ToFloat64(m.Adaptations.WithLabelValues(got.Verdict)); n != 1 {
		t.Errorf("irqpilot_adaptations_total{verdict=%q} = %v, want 1", got.Verdict, n)
	}
	if n, err := testutil.GatherAndCount(reg, names.PredictionError); err != nil || n != 2 {
		t.Errorf("%s: %d series (%v), want busy and irq", names.PredictionError, n, err)
	}
	if e := testutil.ToFloat64(m.PredictionError.WithLabelValues("busy")); e != v.MeanBusyError {
		t.Errorf("prediction error gauge %v, want the verification's %v", e, v.MeanBusyError)
	}
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(pid, &set); err != nil {
		t.Fatal(err)
	}
	if got.Result == "kept" && (set.Count() != 1 || !set.IsSet(1)) {
		t.Errorf("kept, but the sleep runs on %d CPUs", set.Count())
	}
	if got.Result == "reverted" && set.Count() != runtime.NumCPU() {
		t.Errorf("reverted, but the sleep's affinity has %d CPUs, not its own %d", set.Count(), runtime.NumCPU())
	}
}
