package bench

import (
	"strings"
	"testing"

	"github.com/irqpilot/irqpilot/internal/bench/testbed"
	"github.com/irqpilot/irqpilot/internal/bench/workload"
)

func TestCutRunOptions(t *testing.T) {
	for _, c := range []struct {
		in, name string
		bp       *workload.BusyPoll
	}{
		{"latency", "latency", nil},
		{"latency/busypoll=50", "latency", &workload.BusyPoll{SocketUsecs: 50}},
		{"default/epollbusy=100/busypoll=0", "default", &workload.BusyPoll{EpollUsecs: 100}},
		{"spec:app=1,rps=0/busypoll=25", "spec:app=1,rps=0", &workload.BusyPoll{SocketUsecs: 25}},
	} {
		name, o, err := CutRunOptions(c.in)
		if err != nil || name != c.name || (o.BusyPoll == nil) != (c.bp == nil) || (c.bp != nil && *o.BusyPoll != *c.bp) {
			t.Errorf("%s → %q %+v %v, want %q %+v", c.in, name, o.BusyPoll, err, c.name, c.bp)
		}
	}
	for in, want := range map[string]string{
		"/busypoll=1":              "no name",
		"latency/busypoll":         "not KEY=MICROSECONDS",
		"latency/busypoll=x":       "not KEY=MICROSECONDS",
		"latency/spin=5":           "unknown option",
		"latency/busypoll=-1":      "want 0 (off) to 1000",
		"latency/epollbusy=100000": "want 0 (off) to 1000",
	} {
		if _, _, err := CutRunOptions(in); err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), in) {
			t.Errorf("%s: %v, want an error naming it and %q", in, err, want)
		}
	}
}

// Busy polling is the udp sink's: a configuration label asking it of
// another workload is refused before anything runs.
func TestBusyPollOnlyUDP(t *testing.T) {
	w, err := workload.NewNet("memcached", workload.NetOptions{Testbed: testbed.Options{Queues: 1}})
	if err != nil {
		t.Fatal(err)
	}
	r := &Runner{Workload: w, Configurator: Configs{}}
	if _, err := r.Setup("default/busypoll=50", workload.AppInfo{}); err == nil || !strings.Contains(err.Error(), "memcached") {
		t.Errorf("memcached default/busypoll=50: %v", err)
	}
	if _, err := r.Setup("default/busypoll=0", workload.AppInfo{}); err != nil {
		t.Errorf("busypoll=0 (off) refused: %v", err)
	}
}
