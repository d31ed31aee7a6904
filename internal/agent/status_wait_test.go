package agent

import (
	"testing"
	"time"

	"github.com/irqpilot/irqpilot/internal/kernel"
)

// A status query while a pass holds the agent longer than statusWait is
// answered with the status the last pass left, marked pass_running,
// instead of waiting for the pass (a client's timeout); once the pass
// ends, the status is current again.
func TestStatusDuringLongPass(t *testing.T) {
	ag := newTestAgent(t, Options{FS: kernel.New(treeCopy(t)), PlanFile: writePlan(t, "version: 1\n"), Interval: time.Second, Listen: ""})
	ag.pass("test")
	if st := ag.Status(); st.Passes != 1 || st.PassRunning {
		t.Fatalf("after one pass: passes %d, pass_running %v", st.Passes, st.PassRunning)
	}
	ag.mu.Lock() // a pass that takes long
	ag.passes++
	got := make(chan Status)
	go func() { got <- ag.Status() }()
	var st Status
	select {
	case st = <-got:
	case <-time.After(10 * statusWait):
		ag.mu.Unlock()
		t.Fatal("status waited for the pass")
	}
	if !st.PassRunning || st.Passes != 1 {
		t.Errorf("during a long pass: passes %d, pass_running %v; want the last pass's status (1 pass), marked running", st.Passes, st.PassRunning)
	}
	ag.mu.Unlock()
	if st := ag.Status(); st.PassRunning || st.Passes != 2 {
		t.Errorf("after the pass: passes %d, pass_running %v; want the current status", st.Passes, st.PassRunning)
	}
}
