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

// The load generator's defaults: memcaslap one thread more than the CPUs
// (so runs do not settle into one arrangement, see clientThreads), wrk 2,
// 16 connections a thread; given values are kept.
func TestNetClientDefaults(t *testing.T) {
	for _, c := range []struct {
		kind       string
		cpus       int
		in         NetOptions
		thr, conns int
	}{
		{"memcached", 2, NetOptions{}, 3, 48},
		{"memcached", 8, NetOptions{}, 9, 144},
		{"memcached", 0, NetOptions{}, 2, 32}, // CPUs unknown
		{"nginx", 2, NetOptions{}, 2, 32},
		{"udp", 4, NetOptions{}, 2, 32},
		{"memcached", 2, NetOptions{ClientThreads: 2, Connections: 8}, 2, 8},
		{"memcached", 2, NetOptions{ClientThreads: 4}, 4, 64},
	} {
		o := c.in
		o.defaults(c.kind, c.cpus)
		if o.ClientThreads != c.thr || o.Connections != c.conns {
			t.Errorf("%s on %d CPUs, given %d×%d: got %d threads, %d connections; want %d, %d",
				c.kind, c.cpus, c.in.ClientThreads, c.in.Connections, o.ClientThreads, o.Connections, c.thr, c.conns)
		}
	}
	if n := machineCPUs(); n < 1 {
		t.Errorf("machineCPUs() = %d on this machine", n)
	}
}
