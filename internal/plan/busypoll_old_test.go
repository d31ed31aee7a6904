package plan

import (
	"testing"

	"github.com/irqpilot/irqpilot/internal/host"
	"github.com/irqpilot/irqpilot/internal/setting"
)

// busy_read and busy_poll resolve with the value in force as their old
// value, read one way everywhere: plan shows "0 → 50" as apply's diff does.
func TestBusyPollOldValueFromHost(t *testing.T) {
	zero, fifty := 0, 50
	h := &host.Host{CPUs: []host.CPU{{ID: 0, Online: true}}, BusyRead: &zero, BusyPoll: &fifty}
	p := &Plan{Version: Version, BusyPoll: &BusyPollEntry{BusyRead: ptr(50), BusyPoll: ptr(60), Reason: "busy"}}
	cs, err := Resolve(p, h)
	if err != nil {
		t.Fatal(err)
	}
	old := map[string]string{}
	for _, c := range cs {
		old[c.Path] = c.Old
	}
	if old[setting.BusyReadPath] != "0" || old[setting.BusyPollPath] != "50" {
		t.Fatalf("old values %v", old)
	}
}
