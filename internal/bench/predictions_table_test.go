package bench

import (
	"strings"
	"testing"
	"time"

	"github.com/irqpilot/irqpilot/internal/verify"
)

func predRow(pol string, changes int, v verify.Verdict, busy, irq float64) PredictionRow {
	return PredictionRow{Workload: "udp", Policy: pol, Changes: changes, Verification: &verify.Result{Verdict: v, Reason: "r",
		CPUs:          []verify.CPU{{CPU: 0, BusyError: busy, IRQError: -irq}, {CPU: 1, BusyError: 0, IRQError: 0}},
		MeanBusyError: busy / 2, MaxBusyError: busy, MeanIRQError: irq / 2, MaxIRQError: irq}}
}

// The summary: judged rows' errors over every CPU of every judged row,
// inconclusive rows only in All; the conclusions say whether a change auto
// kept verified worse; the section replaces the one between the markers
// and nothing else.
func TestPredictionTable(t *testing.T) {
	rep := &PredictionReport{Workload: "udp", Host: "h", CPUs: 2, Kernel: "6.18", WindowSeconds: 4, Started: time.Unix(0, 0).UTC(), Finished: time.Unix(60, 0).UTC(),
		Rows: []PredictionRow{
			predRow("rps-spread", 5, verify.Confirmed, 4, 2),
			predRow("auto", 3, verify.Worse, 12, 20),
			predRow("per-queue", 8, verify.Inconclusive, 40, 40),
			{Workload: "udp", Policy: "latency", Error: "boom"},
		}}
	st := SummarisePredictions(rep.Rows)
	if st.Judged != 2 || st.MeanBusyError != 4 || st.MaxBusyError != 12 || st.MaxIRQError != 20 || st.MeanIRQError != 5.5 {
		t.Errorf("judged stats %+v", st)
	}
	if st.All.Rows != 3 || st.All.MaxBusyError != 40 {
		t.Errorf("all stats %+v", st.All)
	}
	if st.Verdicts["worse"] != 1 || st.Verdicts["error"] != 1 || st.Verdicts["inconclusive"] != 1 {
		t.Errorf("verdicts %v", st.Verdicts)
	}
	md := PredictionMarkdown([]*PredictionReport{rep})
	for _, want := range []string{"| udp | auto | 3 | worse | 6.0 | 12.0 | 10.0 | 20.0 |", "error: boom",
		"Changes auto kept that verified worse: 1 of 1 (udp).", "misses the goal", "| **udp** | **all** |"} {
		if !strings.Contains(md, want) {
			t.Errorf("markdown lacks %q:\n%s", want, md)
		}
	}
	doc := "# B\n\nbefore\n\n" + PredictionsBegin + "\nold\n" + PredictionsEnd + "\n\nafter\n"
	got := ReplacePredictionsSection(doc, md)
	if !strings.HasPrefix(got, "# B\n\nbefore\n\n") || !strings.HasSuffix(got, PredictionsEnd+"\n\nafter\n") || strings.Contains(got, "old") {
		t.Errorf("replaced:\n%s", got)
	}
	if again := ReplacePredictionsSection(got, md); again != got {
		t.Errorf("a second replacement changed the document")
	}
	if fresh := ReplacePredictionsSection("# B\n", md); !strings.Contains(fresh, "## How often the model is right\n\n"+PredictionsBegin) {
		t.Errorf("appended:\n%s", fresh)
	}
}
