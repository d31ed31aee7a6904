package bench

import (
	"context"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/irqpilot/irqpilot/internal/bench/testbed"
	"github.com/irqpilot/irqpilot/internal/bench/workload"
	"github.com/irqpilot/irqpilot/internal/cpuset"
	"github.com/irqpilot/irqpilot/internal/kernel/bpfcost"
	"github.com/irqpilot/irqpilot/internal/livetest"
	"github.com/irqpilot/irqpilot/internal/load"
	"github.com/irqpilot/irqpilot/internal/verify"
)

// A short smoke of the predictions campaign (make bench-predictions) on
// the udp workload (2-queue veth, sender pinned to CPU 0), two policies,
// 2 s windows: every row has a verdict and finite errors, and the table
// written from the report has a row per policy between the markers. The
// error goal is not asserted: the machine is shared.
func TestPredictionsSmokeLive(t *testing.T) {
	livetest.NeedRoot(t, "taskset")
	w, err := workload.NewNet("udp", workload.NetOptions{Testbed: testbed.Options{FS: liveFS, Queues: 2, StateDir: t.TempDir()}, Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	r := &Runner{FS: liveFS, Workload: w, Rounds: 1, StateDir: t.TempDir(), Configurator: Pinned{Inner: Configs{}, Client: cpuset.Of(0)}}
	var cost load.CostReader
	if c, err := bpfcost.Open(); err == nil {
		defer c.Close()
		cost = c
	} else {
		t.Logf("eBPF collector unavailable (%v): interrupt time estimated from counts", err)
	}
	rep, err := Predictions(context.Background(), r, []string{"rps-spread", "auto"}, PredictionOptions{Window: 2 * time.Second, Warmup: 500 * time.Millisecond, Cost: cost})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Restored {
		t.Errorf("machine not restored: %v", rep.Diff)
	}
	if len(rep.Rows) != 2 {
		t.Fatalf("%d rows, want one per policy: %+v", len(rep.Rows), rep.Rows)
	}
	verdicts := map[verify.Verdict]bool{verify.Confirmed: true, verify.Missed: true, verify.Worse: true, verify.Inconclusive: true}
	for _, row := range rep.Rows {
		v := row.Verification
		if v == nil {
			t.Errorf("%s: no verification (%s; workload: %s)", row.Policy, row.Error, row.WorkloadError)
			continue
		}
		if !verdicts[v.Verdict] || v.Reason == "" {
			t.Errorf("%s: verdict %q (%q)", row.Policy, v.Verdict, v.Reason)
		}
		if len(v.CPUs) == 0 {
			t.Errorf("%s: no CPU rows", row.Policy)
		}
		for _, e := range []float64{v.MeanBusyError, v.MaxBusyError, v.MeanIRQError, v.MaxIRQError} {
			if math.IsNaN(e) || math.IsInf(e, 0) || e < 0 {
				t.Errorf("%s: error %v is not a finite absolute error", row.Policy, e)
			}
		}
		if row.Policy == "rps-spread" && row.Changes == 0 {
			t.Errorf("rps-spread changed nothing on the testbed's device: %+v", row)
		}
		t.Logf("%s: %d changes, %s: %s", row.Policy, row.Changes, v.Verdict, v.Reason)
	}
	md := PredictionMarkdown([]*PredictionReport{rep})
	if !strings.HasPrefix(md, PredictionsBegin) || !strings.Contains(md, PredictionsEnd) ||
		!strings.Contains(md, "| udp | rps-spread |") || !strings.Contains(md, "| udp | auto |") {
		t.Errorf("table:\n%s", md)
	}
}
