package agent

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	names "github.com/irqpilot/irqpilot/internal/agent/metricnames"
	"github.com/irqpilot/irqpilot/internal/cpuset"
	"github.com/irqpilot/irqpilot/internal/hostgen"
	"github.com/irqpilot/irqpilot/internal/kernel"
	"github.com/irqpilot/irqpilot/internal/livetest"
	"github.com/irqpilot/irqpilot/internal/setting"
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
	ag := newTestAgent(t, Options{FS: kernel.New(root), StateDir: sd, PlanFile: pf, Interval: 50 * time.Millisecond, Listen: addr})
	stopAgent := runAgent(t, ag)
	sock := filepath.Join(sd, SocketName)
	if fi, err := os.Stat(sock); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("status socket %s: %v %v, want mode 0600", sock, fi.Mode(), err)
	}
	rps := filepath.Join(root, "sys/class/net/eth0/queues/rx-0/rps_cpus")
	var wg sync.WaitGroup
	stop := make(chan struct{})
	var once sync.Once
	halt := func() { once.Do(func() { close(stop) }); wg.Wait() }
	t.Cleanup(halt)
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
	waitForT(t, func() bool { return maskIs(rps, 3) })
	os.WriteFile(rps, []byte("0\n"), 0o644)
	waitForT(t, func() bool { return len(ag.Status().Repairs) > 0 })
	if got := maskOf(t, rps); !got.Equal(cpuset.Of(3)) {
		t.Errorf("rps_cpus CPUs %s after repair, want 3", got)
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
	if err := stopAgent(); err != nil {
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

// errListener fails Accept with each of errs in turn, then accepts from
// the real listener.
type errListener struct {
	net.Listener
	errs []error
}

func (l *errListener) Accept() (net.Conn, error) {
	if len(l.errs) > 0 {
		err := l.errs[0]
		l.errs = l.errs[1:]
		return nil, err
	}
	return l.Listener.Accept()
}

// Accept errors, whether net/http would call them temporary (EMFILE) or
// not, are retried with a backoff doubling to a bound; only a closed
// listener ends Accept. (A status loop that returned on its first EMFILE
// never answered again.)
func TestGuardedListenerRetriesAcceptErrors(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var errs []error
	for range 12 {
		errs = append(errs, &net.OpError{Op: "accept", Net: "tcp", Err: syscall.EMFILE})
	}
	errs = append(errs, errors.New("accept: something else"))
	gl := guard(&errListener{Listener: ln, errs: errs}, 2, "test listener", quiet())
	var slept []time.Duration
	gl.sleep = func(d time.Duration) { slept = append(slept, d) }
	go func() {
		if c, err := net.Dial("tcp", ln.Addr().String()); err == nil {
			defer c.Close()
			time.Sleep(time.Second)
		}
	}()
	c, err := gl.Accept()
	if err != nil {
		t.Fatalf("Accept ended on an error it should retry: %v", err)
	}
	c.Close()
	if len(slept) != len(errs) {
		t.Fatalf("backoffs %v, want one per error (%d)", slept, len(errs))
	}
	if slept[0] != acceptBackoffMin || slept[len(slept)-1] != acceptBackoffMax {
		t.Errorf("backoffs %v: want from %s doubling to at most %s", slept, acceptBackoffMin, acceptBackoffMax)
	}
	for i := 1; i < len(slept); i++ {
		if slept[i] != min(2*slept[i-1], acceptBackoffMax) {
			t.Errorf("backoff %d is %s after %s", i, slept[i], slept[i-1])
		}
	}
	ln.Close()
	if _, err := gl.Accept(); !errors.Is(err, net.ErrClosed) {
		t.Errorf("Accept on a closed listener: %v, want net.ErrClosed", err)
	}
}

// The listener holds at most its cap of connections: the next waits in
// the kernel's backlog until one closes.
func TestGuardedListenerCapsConnections(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	gl := guard(ln, 2, "test listener", quiet())
	for range 3 {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
	}
	got := make(chan net.Conn, 3)
	go func() {
		for {
			c, err := gl.Accept()
			if err != nil {
				return
			}
			got <- c
		}
	}()
	a, b := <-got, <-got
	select {
	case c := <-got:
		t.Fatalf("a third connection %v accepted beyond the cap of 2", c.RemoteAddr())
	case <-time.After(300 * time.Millisecond):
	}
	a.Close()
	select {
	case c := <-got:
		c.Close()
	case <-time.After(10 * time.Second):
		t.Fatal("the waiting connection was not accepted after one closed")
	}
	b.Close()
}

// The caps leave fdReserve descriptors free, and one connection each even
// at a tiny limit.
func TestConnCaps(t *testing.T) {
	for _, c := range []struct {
		limit     uint64
		mcap, scp int
	}{
		{1 << 20, maxMetricsConns, maxStatusConns},
		{1024, maxMetricsConns, maxStatusConns},
		{fdReserve + 20, 15, 5},
		{fdReserve, 1, 1},
		{64, 1, 1},
	} {
		m, s := connCaps(c.limit)
		if m != c.mcap || s != c.scp {
			t.Errorf("connCaps(%d) = %d, %d; want %d, %d", c.limit, m, s, c.mcap, c.scp)
		}
	}
}

func TestLogAttrsOmitEmpty(t *testing.T) {
	var b bytes.Buffer
	log := slog.New(slog.NewTextHandler(&b, &slog.HandlerOptions{ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
		if a.Key == slog.TimeKey {
			return slog.Attr{}
		}
		return a
	}}))
	log.Warn("drift repaired", logAttrs("setting", setting.KindIRQAffinity, "target", "irq 24", "device", "",
		"old", "1", "culprit", "", "kind", setting.Kind(""), "repairs", 0, "note", shown(setting.KindXPSCPUs, "00000000,00000003"))...)
	want := `level=WARN msg="drift repaired" setting=irq-affinity target="irq 24" old=1 repairs=0 note=0-1` + "\n"
	if got := b.String(); got != want {
		t.Errorf("log line\n%s want\n%s", got, want)
	}
	if strings.Contains(b.String(), `=""`) {
		t.Errorf("empty field logged: %s", b.String())
	}
}
