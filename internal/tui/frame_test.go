package tui

import (
	"encoding/json"
	"testing"
)

// top --json's cpus[] entries keep every name docs/json.md lists, with
// load's values for the CPU and the softnet rates beside them.
func TestFrameCPUKeys(t *testing.T) {
	l := loadPair(t, "testdata/busy/a", "testdata/busy/b")
	if len(l.Softnet) == 0 {
		t.Fatal("the busy pair has no softnet rates")
	}
	l.Softnet[0].Dropped, l.Softnet[0].TimeSqueeze = 7, 3
	b, err := json.Marshal(NewFrame("vm", nil, l))
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		CPUs []map[string]any `json:"cpus"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.CPUs) != len(l.CPUs) {
		t.Fatalf("%d cpus, load has %d", len(doc.CPUs), len(l.CPUs))
	}
	softnet := false
	for i, c := range doc.CPUs {
		for _, k := range []string{"id", "user", "nice", "system", "iowait", "irq", "softirq", "steal", "guest",
			"guest_nice", "idle", "net_rx", "net_tx", "block", "softnet_dropped", "softnet_squeezed",
			"softirq_time", "hardirq_time"} {
			if _, ok := c[k]; !ok {
				t.Errorf("cpus[%d] lacks %q: %v", i, k, c)
			}
		}
		lc := &l.CPUs[i]
		if c["id"] != float64(lc.ID) || c["softirq"] != lc.SoftIRQ || c["net_rx"] != lc.NetRx || c["idle"] != lc.Idle {
			t.Errorf("cpus[%d] = %v, load has %+v", i, c, *lc)
		}
		if lc.ID == l.Softnet[0].CPU {
			softnet = true
			if c["softnet_dropped"] != 7.0 || c["softnet_squeezed"] != 3.0 {
				t.Errorf("cpu%d softnet %v and %v, want 7 and 3", lc.ID, c["softnet_dropped"], c["softnet_squeezed"])
			}
		}
	}
	if !softnet {
		t.Errorf("no cpus[] entry for softnet row CPU %d", l.Softnet[0].CPU)
	}
}
