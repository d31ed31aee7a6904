package lab

import (
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"testing"
)

// sharesScript gives the virtio-net (eth0) an address, asks the host for
// UDP traffic into it, and applies the per-queue plan for it with
// --verify, up to twice while the verdict is inconclusive (under TCG the
// guest's packet rate can sag while it is measured), reverting after each.
const sharesScript = `
ip link set eth0 up && ip addr add 10.77.0.2/24 dev eth0 || echo "NET-FAIL"
echo "@@HOST:traffic@@"
sleep 5
irqpilot plan --policy per-queue --device eth0 -o /tmp/pq.yaml 2>/tmp/pq.err || { echo "PLAN-FAIL"; cat /tmp/pq.err; }
for a in 1 2; do
  irqpilot apply --verify=12s --json /tmp/pq.yaml > /tmp/v$a.json 2>/tmp/v$a.err
  echo "VERIFY-RC $a $?"
  irqpilot revert > /tmp/r$a.out 2>&1; echo "REVERT-RC $a $?"
  grep -q '"verdict": *"inconclusive"' /tmp/v$a.json || break
  cat /tmp/v$a.err
  sleep 3
done
echo "@@HOST:stop@@"
echo "@@VERIFY"; cat /tmp/v$a.json
echo "@@END"
cat /tmp/v$a.err
`

// sharesRate is the host's packet rate into the guest: enough interrupt
// work to be measured under TCG, little enough that the guest keeps up.
const sharesRate = 3000

// TestLabShares: the cost model's prediction of where interrupt time goes
// holds in a real guest under traffic. The host sends UDP flows into the
// multi-queue virtio-net (the tap spreads them over its queues by flow;
// the guest answers nothing, so no flow follows a reply to another
// queue); inside, the per-queue plan for the NIC is applied with --verify.
// Under TCG the guest's CPU time says nothing of speed, but how interrupt
// time divides between CPUs is the kernel's: the work must leave the CPUs
// the plan relieves and land on the ones it gives work to, the shares of
// the measured interrupt time must be within 8 points of the predicted
// ones on average (the constants below), the verdict confirmed or missed
// (never worse), and the plan must move interrupt work (a plan that moves
// nothing proves nothing).
//
// Shapes of more than 32 vCPUs are left out: on the big shape (64 vCPUs
// taking turns on one TCG thread) a CPU the plan relieved read 3 % busy
// before and 7 % after, beyond verify's 2-point noise floor, and the
// verdict was worse for work nothing moved there. A kernel that accounts
// less than 3 points of interrupt time to the traffic (Debian's 5.10 under
// TCG: 0.8) has no shares to check, and the test says so and skips.
func TestLabShares(t *testing.T) {
	eachCase(t, func(t *testing.T, c labCase) {
		if c.Shape.CPUs() > 32 {
			t.Skipf("%d vCPUs on one TCG thread: per-CPU times too noisy for verify's verdicts", c.Shape.CPUs())
		}
		labShares(t, c)
	})
}

func labShares(t *testing.T, c labCase) {
	s := c.Shape
	var sent int
	r := runGuest(t, Options{
		Shape: s, Kernel: c.Kernel, Script: sharesScript,
		Host: map[string]func(*Monitor) error{
			"traffic": func(m *Monitor) error { return m.StartUDP(0, "10.77.0.1", "10.77.0.2", 16, sharesRate) },
			"stop": func(m *Monitor) (err error) {
				sent, err = m.StopUDP()
				return err
			},
		},
	})
	out := r.Output
	t.Logf("%s ran in %s", s.Name, r.Elapsed.Round(100e6))
	for _, bad := range []string{"NET-FAIL", "PLAN-FAIL"} {
		if strings.Contains(out, bad) {
			t.Fatalf("%s:\n%s", bad, out)
		}
	}
	if !strings.Contains(out, "REVERT-RC 1 0\n") {
		t.Errorf("the per-queue plan was not reverted:\n%s", out)
	}
	var v struct {
		Verification struct {
			Verdict string  `json:"verdict"`
			Reason  string  `json:"reason"`
			Source  string  `json:"cost_source"`
			Traffic float64 `json:"traffic_before_pps"`
			CPUs    []struct {
				CPU          int     `json:"cpu"`
				BeforeIRQ    float64 `json:"before_irq_pct"`
				PredictedIRQ float64 `json:"predicted_irq_pct"`
				MeasuredIRQ  float64 `json:"measured_irq_pct"`
			} `json:"cpus"`
		} `json:"verification"`
	}
	js := section(out, "@@VERIFY")
	if err := json.Unmarshal([]byte(js), &v); err != nil {
		t.Fatalf("apply --verify --json: %v\n%s", err, js)
	}
	ver := v.Verification
	if ver.Traffic < sharesRate/2 {
		t.Fatalf("the guest received %.0f packets/s of the host's %d (%d datagrams sent)", ver.Traffic, sharesRate, sent)
	}
	var total float64
	for _, c := range ver.CPUs {
		total += c.BeforeIRQ
	}
	if total < 3 {
		t.Skipf("the guest's kernel accounted %.1f points of interrupt time to %.0f packets/s: no shares to check", total, ver.Traffic)
	}
	if ver.Verdict != "confirmed" && ver.Verdict != "missed" {
		t.Fatalf("verdict %s (%s), want confirmed or missed:\n%s", ver.Verdict, ver.Reason, out)
	}
	var before, pred, meas, moved float64
	for _, c := range ver.CPUs {
		before += c.BeforeIRQ
		pred += c.PredictedIRQ
		meas += c.MeasuredIRQ
		moved = math.Max(moved, math.Abs(c.PredictedIRQ-c.BeforeIRQ))
	}
	if moved < 2 || meas < 3 {
		t.Fatalf("the plan moves at most %.1f points of interrupt time and %.1f were measured: nothing to check the shares by", moved, meas)
	}
	var rows, wrong []string
	var errSum float64
	n := 0
	for _, c := range ver.CPUs {
		if c.BeforeIRQ+c.PredictedIRQ+c.MeasuredIRQ < 0.5 {
			continue // a CPU with no interrupt time in any column
		}
		ps, ms := 100*c.PredictedIRQ/pred, 100*c.MeasuredIRQ/meas
		errSum += math.Abs(ps - ms)
		n++
		row := fmt.Sprintf("CPU %d %.0f→%.0f (measured %.0f; %.1f→%.1f, measured %.1f %% of the CPU)",
			c.CPU, 100*c.BeforeIRQ/before, ps, ms, c.BeforeIRQ, c.PredictedIRQ, c.MeasuredIRQ)
		rows = append(rows, row)
		switch {
		case ps < sharesRelieved && ms >= sharesLeftBehind:
			wrong = append(wrong, fmt.Sprintf("CPU %d was to be relieved and kept %.0f %%", c.CPU, ms))
		case ps >= sharesGiven && ms < sharesLanded:
			wrong = append(wrong, fmt.Sprintf("CPU %d was to take %.0f %% and took %.0f %%", c.CPU, ps, ms))
		}
	}
	if mean := errSum / float64(n); mean > sharesMeanError {
		wrong = append(wrong, fmt.Sprintf("the shares are %.1f points from the predicted ones on average, more than %d", mean, sharesMeanError))
	}
	if len(wrong) > 0 {
		t.Errorf("%s (%s: %s; interrupt time from %s; before → predicted, in %% of the interrupt time; CPUs with none left out): %s",
			strings.Join(wrong, "; "), ver.Verdict, ver.Reason, ver.Source, strings.Join(rows, ", "))
	}
}

// What TestLabShares holds the shares to, in points of the measured
// interrupt time. One CPU's share moves with the guest's batching under
// TCG (a 6.1 run: CPU 7 predicted 28, measured 15, while the mean error was
// 3.8), so each CPU is held to where the work went, and the model's error
// to its mean.
const (
	sharesRelieved   = 2  // a predicted share below this: the plan relieves the CPU
	sharesLeftBehind = 5  // …and a relieved CPU must measure below this
	sharesGiven      = 10 // a predicted share from this up: the plan gives the CPU work
	sharesLanded     = 5  // …and such a CPU must measure at least this
	sharesMeanError  = 8  // the mean over the CPUs of |predicted − measured|
)
