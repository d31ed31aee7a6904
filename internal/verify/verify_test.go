package verify

import (
	"strings"
	"testing"

	"github.com/irqpilot/irqpilot/internal/plan"
)

// The RPS move of the single-queue write-up on two CPUs: CPU 0 carries the
// receive work, the plan moves most of it to CPU 1.
var rpsPred = &plan.Prediction{Source: "bpf", CPUs: []plan.CPUPrediction{
	{CPU: 0, BeforeBusy: 70, PredictedBusy: 25, BeforeIRQ: 60, PredictedIRQ: 15},
	{CPU: 1, BeforeBusy: 10, PredictedBusy: 52, BeforeIRQ: 0, PredictedIRQ: 42},
}}

func window(traffic float64, figs ...Figures) Measurement {
	m := Measurement{CPUs: map[int]Figures{}, Noise: map[int]Figures{}, Traffic: traffic, TrafficHalves: [2]float64{traffic, traffic}, Source: "bpf"}
	for c, f := range figs {
		m.CPUs[c] = f
		m.Noise[c] = Figures{Busy: 1, IRQ: 1}
	}
	return m
}

var before = window(50000, Figures{70, 60}, Figures{10, 0})

// judgeWant judges pred against the windows and reports an error, naming
// what, unless the verdict is want with a reason that holds reason.
func judgeWant(t *testing.T, what string, pred *plan.Prediction, before, after Measurement, want Verdict, reason string) Result {
	t.Helper()
	r := Judge(pred, before, after, Options{})
	if r.Verdict != want || !strings.Contains(r.Reason, reason) {
		t.Errorf("%s: verdict %s (%s), want %s with %q", what, r.Verdict, r.Reason, want, reason)
	}
	return r
}

func TestJudgeVerdicts(t *testing.T) {
	for _, tc := range []struct {
		name   string
		after  Measurement
		want   Verdict
		reason string
	}{
		{"as predicted", window(50000, Figures{28, 18}, Figures{49, 40}), Confirmed, "every CPU within 10 points"},
		{"within the tolerance at its edge", window(52000, Figures{35, 25}, Figures{42, 33}), Confirmed, "mean error"},
		{"the right way, too little", window(50000, Figures{50, 40}, Figures{30, 20}), Missed, "CPU 0 50% busy (40% in interrupts), predicted 25% (15%)"},
		{"the wrong way", window(50000, Figures{80, 70}, Figures{8, 0}), Worse, "CPU 0 busy 70% → 80%, predicted 25%"},
		{"broke the headroom rule", window(50000, Figures{20, 10}, Figures{90, 80}), Worse, "the change broke the headroom rule: CPU 1 10% → 90% busy"},
		{"the workload stopped", window(900, Figures{5, 1}, Figures{3, 0}), Inconclusive, "50000 packets/s before, 900 after"},
		{"the workload doubled", window(100000, Figures{40, 30}, Figures{80, 70}), Inconclusive, "the workload changed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := judgeWant(t, tc.name, rpsPred, before, tc.after, tc.want, tc.reason)
			if len(r.CPUs) != 2 {
				t.Fatalf("rows %+v", r.CPUs)
			}
		})
	}
}

// The errors are measured minus predicted, per CPU, and their means and
// maxima are what the published error table sums.
func TestJudgeErrors(t *testing.T) {
	r := Judge(rpsPred, before, window(50000, Figures{30, 20}, Figures{45, 36}), Options{})
	c0, c1 := r.CPUs[0], r.CPUs[1]
	if c0.BusyError != 5 || c0.IRQError != 5 || c1.BusyError != -7 || c1.IRQError != -6 {
		t.Fatalf("errors %+v %+v", c0, c1)
	}
	if r.MeanBusyError != 6 || r.MaxBusyError != 7 || r.MeanIRQError != 5.5 || r.MaxIRQError != 6 {
		t.Fatalf("summary %+v", r)
	}
	if !c0.Within || !c1.Within || c0.Noise != NoiseFloor {
		t.Fatalf("within %+v %+v", c0, c1)
	}
}

// Noise measured before the change widens a CPU's band: what two halves
// of an unchanged load already disagree by is no evidence against the
// prediction.
func TestJudgeNoiseWidens(t *testing.T) {
	noisy := window(50000, Figures{70, 60}, Figures{10, 0})
	noisy.Noise[0] = Figures{Busy: 12, IRQ: 12}
	after := window(50000, Figures{45, 36}, Figures{48, 40})
	judgeWant(t, "quiet before", rpsPred, before, after, Missed, "")
	judgeWant(t, "noisy before", rpsPred, noisy, after, Confirmed, "")
}

// A workload that changed while it was measured before the change gives
// no verdict either.
func TestJudgeUnsteadyBefore(t *testing.T) {
	b := before
	b.TrafficHalves = [2]float64{60000, 40000}
	judgeWant(t, "unsteady before", rpsPred, b, window(50000, Figures{28, 18}, Figures{49, 40}), Inconclusive, "while it was measured before")
}

func TestAgrees(t *testing.T) {
	if ok, why := Agrees(rpsPred, before, Options{}); !ok {
		t.Fatalf("the measurement the prediction was made from: %s", why)
	}
	if ok, why := Agrees(rpsPred, window(50000, Figures{20, 5}, Figures{10, 0}), Options{}); ok || !strings.Contains(why, "CPU 0 20% busy now, 70% when predicted") {
		t.Fatalf("a changed load: %v %s", ok, why)
	}
}

// A CPU that was full before the change and is full after it did not break
// the headroom rule (it was beyond it already), and a prediction above
// 100 % busy is compared with a full CPU.
func TestJudgeSaturatedCPU(t *testing.T) {
	pred := &plan.Prediction{Source: "bpf", CPUs: []plan.CPUPrediction{
		{CPU: 0, BeforeBusy: 99, PredictedBusy: 119, BeforeIRQ: 10, PredictedIRQ: 30},
		{CPU: 1, BeforeBusy: 60, PredictedBusy: 40, BeforeIRQ: 30, PredictedIRQ: 10},
	}}
	b := window(50000, Figures{99, 10}, Figures{60, 30})
	r := judgeWant(t, "full before and after", pred, b, window(50000, Figures{102, 31}, Figures{41, 11}), Confirmed, "")
	if len(r.CPUs) == 0 {
		t.Fatalf("no CPU rows: %+v", r)
	}
	if c0 := r.CPUs[0]; c0.BusyError != 2 || c0.PredictedBusy != 119 {
		t.Errorf("CPU 0 row %+v: want the error against a full CPU (2) and the model's 119 kept", c0)
	}
	// Predicted beyond full, measured a few points under its before and
	// still above the headroom line: full, as predicted, not the wrong
	// way. Measured well under the line, it is.
	pred.CPUs[0] = plan.CPUPrediction{CPU: 0, BeforeBusy: 96, PredictedBusy: 134, BeforeIRQ: 0, PredictedIRQ: 0}
	b = window(50000, Figures{96, 0}, Figures{60, 30})
	if r := Judge(pred, b, window(50000, Figures{88, 0}, Figures{41, 11}), Options{}); r.Verdict == Worse {
		t.Errorf("96 %% → 88 %% busy, predicted 134 %%: verdict %s (%s), want no wrong way", r.Verdict, r.Reason)
	}
	judgeWant(t, "96 % → 62 % busy, predicted 134 %", pred, b, window(50000, Figures{62, 0}, Figures{41, 11}), Worse, "CPU 0 busy")
}

// A CPU full before and after, predicted relief, was refilled by work
// waiting for it: missed, not worse, when its interrupt time moved the
// predicted way. A CPU that was not full before and rose against the
// prediction is still the wrong way.
func TestJudgeRefilledCPUIsMissedNotWorse(t *testing.T) {
	pred := &plan.Prediction{Source: "bpf", CPUs: []plan.CPUPrediction{
		{CPU: 0, BeforeBusy: 96.3, PredictedBusy: 62.2, BeforeIRQ: 38.6, PredictedIRQ: 1.6},
		{CPU: 1, BeforeBusy: 0.8, PredictedBusy: 39.7, BeforeIRQ: 0, PredictedIRQ: 38},
	}}
	b := window(50000, Figures{96.3, 38.6}, Figures{0.8, 0})
	judgeWant(t, "CPU 0 96 % → 100 % busy (predicted 62 %), interrupts 38.6 → 26.8 (predicted 1.6)", pred, b, window(52000, Figures{100, 26.8}, Figures{38.6, 36.9}), Missed, "busy time of CPU 0, which stayed full")
	pred.CPUs[0] = plan.CPUPrediction{CPU: 0, BeforeBusy: 60, PredictedBusy: 30, BeforeIRQ: 30, PredictedIRQ: 5}
	b = window(50000, Figures{60, 30}, Figures{0.8, 0})
	judgeWant(t, "CPU 0 60 % → 75 % busy against a predicted 30 %", pred, b, window(50000, Figures{75, 20}, Figures{38.6, 25}), Worse, "CPU 0 busy")
}

// The headroom rule judges the CPUs the plan gives work: a plan of no
// change (nginx under latency, in the predictions campaign) whose CPU 1
// drifted from 79.5 % to 83.9 % busy within its tolerance is confirmed, not
// worse; the same drift on a CPU predicted to take work breaks the rule.
func TestJudgeHeadroomOnlyForCPUsGivenWork(t *testing.T) {
	none := &plan.Prediction{Source: "bpf", CPUs: []plan.CPUPrediction{
		{CPU: 0, BeforeBusy: 93.5, PredictedBusy: 93.5, BeforeIRQ: 23.9, PredictedIRQ: 23.9},
		{CPU: 1, BeforeBusy: 79.5, PredictedBusy: 79.5, BeforeIRQ: 17.3, PredictedIRQ: 17.3},
	}}
	b := window(141000, Figures{93.5, 23.9}, Figures{79.5, 17.3})
	after := window(143000, Figures{96.3, 23.3}, Figures{83.9, 17.5})
	judgeWant(t, "no change predicted, CPU 1 79.5 % → 83.9 %", none, b, after, Confirmed, "")
	// Work is read from the prediction's own figures: made when CPU 1 was
	// 70 % busy, it gives CPU 1 five points, though 75 % is under the
	// 79.5 % measured just before the change.
	given := &plan.Prediction{Source: "bpf", CPUs: []plan.CPUPrediction{
		{CPU: 0, BeforeBusy: 93.5, PredictedBusy: 88, BeforeIRQ: 23.9, PredictedIRQ: 18.4},
		{CPU: 1, BeforeBusy: 70, PredictedBusy: 75, BeforeIRQ: 17.3, PredictedIRQ: 22.8},
	}}
	judgeWant(t, "work predicted onto CPU 1, 79.5 % → 83.9 %", given, b, after, Worse, "headroom rule: CPU 1 80% → 84% busy")
}

// Traffic that moved between a device's queues makes the measurement
// unable to judge the prediction (inconclusive, naming the queue), unless
// a CPU that took work broke the headroom rule: that is harm whatever
// moved the work. Shares that moved within the tolerance change nothing.
func TestJudgeQueuesMoved(t *testing.T) {
	withShares := func(m Measurement, q0 float64) Measurement {
		m.QueueShares = map[string]map[int]float64{"eth0": {0: q0, 1: 1 - q0}}
		return m
	}
	b := withShares(before, 0.7)
	for _, tc := range []struct {
		name   string
		after  Measurement
		want   Verdict
		reason string
	}{
		{"moved", withShares(window(50000, Figures{50, 40}, Figures{30, 20}), 0.2), Inconclusive, "the traffic moved between eth0's queues (queue 0 took 70 % of its packets before the change, 20 % after)"},
		{"moved, headroom broken", withShares(window(50000, Figures{20, 10}, Figures{90, 80}), 0.2), Worse, "headroom rule: CPU 1 10% → 90% busy"},
		{"held", withShares(window(50000, Figures{50, 40}, Figures{30, 20}), 0.6), Missed, "off by more than 10 points"},
		{"not counted after", window(50000, Figures{50, 40}, Figures{30, 20}), Missed, "off by more than 10 points"},
	} {
		judgeWant(t, tc.name, rpsPred, b, tc.after, tc.want, tc.reason)
	}
}
