package record

import (
	"bytes"
	"encoding/json"
	"os"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/irqpilot/irqpilot/internal/kernel/bpfcost"
	"github.com/irqpilot/irqpilot/internal/load"
)

// The eBPF collector's snapshots are stored with each sample and read
// back unchanged, so a report gets measured interrupt time.
func TestRoundTripCost(t *testing.T) {
	samples := liveSamples(t, 2)
	for i, name := range []string{"snapshot-1.json", "snapshot-2.json"} {
		b, err := os.ReadFile("../kernel/bpfcost/testdata/" + name)
		if err != nil {
			t.Fatal(err)
		}
		samples[i].Cost = &bpfcost.Snapshot{}
		if err := json.Unmarshal(b, samples[i].Cost); err != nil {
			t.Fatal(err)
		}
	}
	samples[1].Cost.NAPI = []bpfcost.NAPICounters{{Dev: "veth0", NAPIID: 3, Polls: []uint64{1, 2}, Work: []uint64{3, 4}, Exhausted: []uint64{0, 1}}}
	rec, err := Read(bytes.NewReader(writeRecording(t, "alpha", samples)), "cost.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	for i := range samples {
		if d := cmp.Diff(samples[i].Cost, rec.Samples[i].Cost); d != "" {
			t.Errorf("sample %d cost (-want +got):\n%s", i, d)
		}
	}
	l, err := load.Rates(rec.Samples[0], rec.Samples[1])
	if err != nil {
		t.Fatal(err)
	}
	if l.CostSource != load.CostBPF {
		t.Errorf("rates of the recording: cost source %q, want bpf", l.CostSource)
	}
	// Without the collector the lines carry no "cost" at all.
	samples[0].Cost, samples[1].Cost = nil, nil
	if bytes.Contains(writeRecording(t, "alpha", samples), []byte(`"cost"`)) {
		t.Error("a counts-only recording has a cost field")
	}
}
