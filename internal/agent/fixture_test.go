package agent

import (
	"context"
	"encoding/json"
	"os"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/irqpilot/irqpilot/internal/agent/metrics"
	"github.com/irqpilot/irqpilot/internal/cpuset"
)

// newTestAgent is New for the tests that drive an agent in this process:
// o with a fresh state directory and a quiet log unless o gives its own,
// and no link events (a test tree has no netlink). New's error fails the
// test.
func newTestAgent(t testing.TB, o Options) *Agent {
	t.Helper()
	if o.StateDir == "" {
		o.StateDir = stateDir(t)
	}
	if o.Log == nil {
		o.Log = quiet()
	}
	o.NoLinkEvents = true
	ag, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	return ag
}

// withMetrics gives ag the metrics Run would register, for a test that
// runs passes itself; it returns their registry.
func withMetrics(t testing.TB, ag *Agent) *prometheus.Registry {
	t.Helper()
	reg, m, err := metrics.New(&metrics.Source{FS: ag.o.FS, Host: ag.hostModel.Load})
	if err != nil {
		t.Fatal(err)
	}
	ag.m = m
	return reg
}

// runAgent runs ag until the test ends and waits for its first pass. stop
// ends it at once and returns Run's error (the cleanup then has nothing
// left to do).
func runAgent(t *testing.T, ag *Agent) (stop func() error) {
	t.Helper()
	ready := make(chan struct{})
	ag.o.Ready = func() { close(ready) }
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- ag.Run(ctx) }()
	var runErr error
	stopped := false
	stop = func() error {
		if !stopped {
			stopped = true
			cancel()
			runErr = <-done
		}
		return runErr
	}
	t.Cleanup(func() {
		if stopped {
			return
		}
		if err := stop(); err != nil {
			t.Error(err)
		}
	})
	select {
	case <-ready:
	case err := <-done:
		stopped = true
		t.Fatal(err)
	}
	return stop
}

// viaJSON marshals v and decodes it into out, as a client of the status
// socket reads it; it returns the JSON.
func viaJSON(t testing.TB, v, out any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, out); err != nil {
		t.Fatalf("%v: %s", err, b)
	}
	return b
}

// maskIs reports whether the CPU mask file at path (an rps_cpus) holds
// exactly the CPUs cpus; false while it cannot be read or parsed (a test
// polling it may read it mid-write).
func maskIs(path string, cpus ...int) bool {
	b, err := os.ReadFile(path)
	if err != nil {
		return false
	}
	s, err := cpuset.ParseMask(string(b))
	return err == nil && s.Equal(cpuset.Of(cpus...))
}

// maskOf is the CPU set of the mask file at path; an unreadable file or a
// malformed mask fails the test.
func maskOf(t testing.TB, path string) cpuset.Set {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s, err := cpuset.ParseMask(string(b))
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return s
}
