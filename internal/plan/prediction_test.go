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
