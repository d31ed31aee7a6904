package bench

import (
	"strings"
	"testing"

	"github.com/irqpilot/irqpilot/internal/bench/testbed"
)

func TestCutRunOptions(t *testing.T) {
	for _, c := range []struct {
		in, name string
		bp       *BusyPoll
	}{
		{"latency", "latency", nil},
		{"latency/busypoll=50", "latency", &BusyPoll{SocketUsecs: 50}},
		{"default/epollbusy=100/busypoll=0", "default", &BusyPoll{EpollUsecs: 100}},
		{"spec:app=1,rps=0/busypoll=25", "spec:app=1,rps=0", &BusyPoll{SocketUsecs: 25}},
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

// Busy polling is the udp sink's: other workloads refuse it, from the
// options and from a configuration label, before anything runs.
func TestBusyPollOnlyUDP(t *testing.T) {
	if _, err := NewNet("memcached", NetOptions{BusyPoll: BusyPoll{SocketUsecs: 50}}); err == nil || !strings.Contains(err.Error(), "udp") {
		t.Errorf("memcached with busy poll: %v", err)
	}
	if _, err := NewNet("udp", NetOptions{BusyPoll: BusyPoll{EpollUsecs: 5000}}); err == nil {
		t.Error("udp with 5 ms epoll busy poll accepted")
	}
	w, err := NewNet("memcached", NetOptions{Testbed: testbed.Options{Queues: 1}})
	if err != nil {
		t.Fatal(err)
	}
	r := &Runner{Workload: w, Configurator: Configs{}}
	if _, err := r.Setup("default/busypoll=50", AppInfo{}); err == nil || !strings.Contains(err.Error(), "memcached") {
		t.Errorf("memcached default/busypoll=50: %v", err)
	}
	if _, err := r.Setup("default/busypoll=0", AppInfo{}); err != nil {
		t.Errorf("busypoll=0 (off) refused: %v", err)
	}
}
