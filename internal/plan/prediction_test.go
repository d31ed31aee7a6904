package plan

import (
	"strings"
	"testing"

	"github.com/irqpilot/irqpilot/internal/host"
)

const predictedPlan = `version: 1
prediction:
  source: bpf
  interval_ms: 3000
  cpus:
    - cpu: 0
      before_busy_pct: 60
      predicted_busy_pct: 30
      before_irq_pct: 50
      predicted_irq_pct: 20
    - cpu: %d
      before_busy_pct: 10
      predicted_busy_pct: 40
      before_irq_pct: %s
      predicted_irq_pct: 30
`

func predicted(cpu, irq string) string {
	return strings.Replace(strings.Replace(predictedPlan, "%d", cpu, 1), "%s", irq, 1)
}

// A plan's prediction is read with the rest of the file and checked: a
// number that is no percentage, or interrupt time above busy time, is an
// error naming the field.
func TestPredictionParse(t *testing.T) {
	p, err := Parse("p.yaml", []byte(predicted("1", "0")))
	if err != nil {
		t.Fatal(err)
	}
	if c := p.Prediction.CPU(1); c == nil || c.PredictedBusy != 40 || p.Prediction.Source != "bpf" || p.Prediction.IntervalMs != 3000 {
		t.Fatalf("prediction %+v", p.Prediction)
	}
	for _, tc := range []struct{ irq, want string }{
		{"NaN", `p.yaml:14: prediction.cpus[1].before_irq_pct: "NaN" is not a number`},
		{"-3", "p.yaml:14: prediction.cpus[1].before_irq_pct: -3 is not a percentage between 0 and 1000"},
		{"35", "p.yaml:14: prediction.cpus[1].before_irq_pct: 35.0 exceeds before_busy_pct 10.0"},
	} {
		_, err := Parse("p.yaml", []byte(predicted("1", tc.irq)))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("before_irq_pct %s: got %v, want %q", tc.irq, err, tc.want)
		}
	}
}

// A prediction that names a CPU the host does not have was made for
// another machine: Resolve (and so apply) refuses the plan, naming the line.
func TestPredictionContradictsHost(t *testing.T) {
	h := &host.Host{CPUs: []host.CPU{{ID: 0}, {ID: 1}}}
	p, err := Parse("p.yaml", []byte(predicted("7", "0")))
	if err != nil {
		t.Fatal(err)
	}
	_, err = Resolve(p, h)
	if err == nil || !strings.Contains(err.Error(), "p.yaml:11: prediction.cpus[1].cpu: CPU 7 does not exist on this host") {
		t.Fatalf("got %v", err)
	}
	p, _ = Parse("p.yaml", []byte(predicted("1", "0")))
	if _, err := Resolve(p, h); err != nil {
		t.Fatalf("a prediction for CPUs 0 and 1 on a 2-CPU host: %v", err)
	}
}

const queuesPlan = `version: 1
prediction:
  source: counts
  interval_ms: 3000
  cpus:
    - {cpu: 0, before_busy_pct: 60, predicted_busy_pct: 30, before_irq_pct: 50, predicted_irq_pct: 20}
  queues:
    - {device: eth0, queue: 0, rx_share: 0.69}
    - {device: eth0, queue: 1, rx_share: %s}
`

// A prediction keeps the share of each queue's packets it was made with
// (verify --journal compares them later); a share outside 0 to 1, a queue
// given twice or one without a device is an error naming the field.
func TestPredictionQueues(t *testing.T) {
	p, err := Parse("p.yaml", []byte(strings.Replace(queuesPlan, "%s", "0.31", 1)))
	if err != nil {
		t.Fatal(err)
	}
	if got := p.Prediction.QueueShares(); got["eth0"][0] != 0.69 || got["eth0"][1] != 0.31 || len(got) != 1 {
		t.Fatalf("queue shares %v, want eth0 0.69 and 0.31", got)
	}
	for _, tc := range []struct{ q1, want string }{
		{"1.5", "p.yaml:9: prediction.queues[1].rx_share: 1.5 is not a share between 0 and 1"},
		{"0.31}\n    - {device: eth0, queue: 0, rx_share: 0.1", "p.yaml:10: prediction.queues[2]: eth0 queue 0 is also given at line 8"},
		{"0.31}\n    - {queue: 2, rx_share: 0.1", "p.yaml:10: prediction.queues[2].device: missing"},
	} {
		_, err := Parse("p.yaml", []byte(strings.Replace(queuesPlan, "%s", tc.q1, 1)))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("rx_share %s: got %v, want %q", tc.q1, err, tc.want)
		}
	}
	var out Prediction
	out.SetQueueShares(map[string]map[int]float64{"eth1": {1: 0.25, 0: 0.7504}, "eth0": {0: 1}})
	want := []QueueShare{{Device: "eth0", Queue: 0, RxShare: 1}, {Device: "eth1", Queue: 0, RxShare: 0.75}, {Device: "eth1", Queue: 1, RxShare: 0.25}}
	if len(out.Queues) != len(want) {
		t.Fatalf("SetQueueShares gave %+v, want %+v", out.Queues, want)
	}
	for i := range want {
		if out.Queues[i] != want[i] {
			t.Errorf("SetQueueShares[%d] = %+v, want %+v", i, out.Queues[i], want[i])
		}
	}
}
