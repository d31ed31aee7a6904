package agent

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	names "github.com/irqpilot/irqpilot/internal/agent/metricnames"
	"github.com/irqpilot/irqpilot/internal/hostgen"
	"github.com/irqpilot/irqpilot/internal/kernel"
	"github.com/irqpilot/irqpilot/internal/livetest"
)

// Run on the generated host with status queries, metric scrapes, reloads
// and a drift all happening at once (run with -race): the status socket is
// 0600, drift is repaired and counted, a rejected reload keeps the plan,
// and the socket is gone after the agent stops.
func TestRunConcurrent(t *testing.T) {
	root, _ := livetest.GenHost(t, hostgen.Spec{CPUs: 8, Packages: 1, Nodes: 1, Offline: hostgen.NoOffline, NVMeQueues: -1,
		NICs: []hostgen.NICSpec{{Name: "eth0", Driver: "ice", Slot: 3, Queues: 4}}})
	sd := stateDir(t)
	pf := writePlan(t, "version: 1\nrx_queues:\n  - device: eth0\n    queue: 0\n    rps_cpus: \"3\"\n    reason: test\n")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	ag, err := New(Options{FS: kernel.New(root), StateDir: sd, PlanFile: pf, Interval: 50 * time.Millisecond,
		Listen: addr, NoLinkEvents: true, Log: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	ready := make(chan struct{})
	ag.o.Ready = func() { close(ready) }
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- ag.Run(ctx) }()
	select {
	case <-ready:
	case err := <-done:
		t.Fatal(err)
	}
	sock := filepath.Join(sd, SocketName)
	if fi, err := os.Stat(sock); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("status socket %s: %v %v, want mode 0600", sock, fi.Mode(), err)
	}
	rps := filepath.Join(root, "sys/class/net/eth0/queues/rx-0/rps_cpus")
	var wg sync.WaitGroup
	stop := make(chan struct{})
	var once sync.Once
	halt := func() { once.Do(func() { close(stop) }); wg.Wait() }
	t.Cleanup(func() { halt(); cancel() })
	for _, f := range []func(){
		func() {
			if _, err := Query(context.Background(), sock); err != nil {
				t.Error(err)
			}
		},
		func() {
			resp, err := http.Get("http://" + addr + "/metrics")
			if err != nil {
				t.Error(err)
				return
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		},
	} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
					f()
					time.Sleep(5 * time.Millisecond)
				}
			}
		}()
	}
	waitForT(t, func() bool { b, _ := os.ReadFile(rps); return strings.Contains(string(b), "8") })
	os.WriteFile(rps, []byte("0\n"), 0o644)
	waitForT(t, func() bool { return len(ag.Status().Repairs) > 0 })
	if b, _ := os.ReadFile(rps); !strings.Contains(string(b), "8") {
		t.Errorf("rps_cpus %q after repair", b)
	}
	// Reloads (a new plan's values are applied, not counted as drift).
	for i := 0; i < 5; i++ {
		if err := ag.Reload(); err != nil {
			t.Fatal(err)
		}
	}
	os.WriteFile(pf, []byte("version: 1\nrx_queues: [\n"), 0o644)
	if err := ag.Reload(); err == nil {
		t.Errorf("a broken plan was accepted on reload")
	}
	halt()
	// The repair as served on /metrics.
	want := fmt.Sprintf("# HELP %[1]s Settings the agent found changed behind its back and restored.\n"+
		"# TYPE %[1]s counter\n%[1]s{device=\"eth0\",setting=\"rps-cpus\"} 1\n", names.DriftRepairs)
	if err := testutil.ScrapeAndCompare("http://"+addr+"/metrics", strings.NewReader(want), names.DriftRepairs); err != nil {
		t.Error(err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(sock); !os.IsNotExist(err) {
		t.Errorf("status socket left behind: %v", err)
	}
}

func waitForT(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			t.Fatal("condition not met after 20s")
		}
		time.Sleep(10 * time.Millisecond)
	}
}
