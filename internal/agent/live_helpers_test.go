package agent

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"

	"github.com/irqpilot/irqpilot/internal/kernel"
	"github.com/irqpilot/irqpilot/internal/livetest"
	"github.com/irqpilot/irqpilot/internal/promclient"
)

// irqpilot is cmd/irqpilot built once per test binary: the live tests run
// the agent as its own process (signals, SIGKILL, exit codes, a network
// namespace of its own).
func irqpilot(t *testing.T) string { return livetest.Irqpilot(t) }

func run(t *testing.T, name string, args ...string) string {
	t.Helper()
	return livetest.Run(t, name, args...)
}

// bed is a network namespace this test created with a veth pair va0/vb0.
type bed struct {
	ns     string
	queues int
}

func newBed(t *testing.T, queues int) *bed {
	t.Helper()
	b := &bed{ns: livetest.Netns(t, livetest.Name("irqp-ag-")), queues: queues}
	b.addVeth(t)
	return b
}

// addVeth adds va0/vb0 with the bed's queue count (again, after a test
// deleted it).
func (b *bed) addVeth(t *testing.T) { livetest.Veth(t, b.ns, "va0", "vb0", b.queues) }

// read reads a file as the namespace sees it (its /sys shows its devices).
func (b *bed) read(t *testing.T, path string) string {
	t.Helper()
	return run(t, "ip", "netns", "exec", b.ns, "cat", path)
}

func (b *bed) write(t *testing.T, path, value string) {
	t.Helper()
	run(t, "ip", "netns", "exec", b.ns, "sh", "-c", "echo "+value+" > "+path)
}

func (b *bed) curl(t *testing.T, url string) string {
	t.Helper()
	return run(t, "ip", "netns", "exec", b.ns, "curl", "-sf", "--max-time", "5", url)
}

type agentProc struct {
	cmd      *exec.Cmd
	log      *livetest.Buffer
	stateDir string
	done     chan struct{}
	err      error
}

// startAgent runs `irqpilot agent` (in ns when not "") and waits until its
// status socket answers. The cleanup stops it by PID.
func startAgent(t *testing.T, ns, stateDir string, args ...string) *agentProc {
	t.Helper()
	p := startAgentNoWait(t, ns, stateDir, args...)
	waitSocket(t, p, stateDir)
	return p
}

// waitSocket waits until the agent p answers on its status socket, and
// fails the test if it exits first.
func waitSocket(t *testing.T, p *agentProc, stateDir string) {
	t.Helper()
	waitFor(t, 20*time.Second, "agent status socket", func() bool {
		select {
		case <-p.done:
			t.Fatalf("agent exited: %v\n%s", p.err, p.log)
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_, err := Query(ctx, filepath.Join(stateDir, SocketName))
		return err == nil
	})
}

func startAgentNoWait(t *testing.T, ns, stateDir string, args ...string) *agentProc {
	t.Helper()
	argv := append([]string{irqpilot(t), "agent", "--state-dir", stateDir}, args...)
	if ns != "" {
		argv = append([]string{"ip", "netns", "exec", ns}, argv...)
	}
	return startCmd(t, stateDir, argv[0], argv[1:]...)
}

// startCmd runs name argv as the agent process (its output in p.log); the
// cleanup stops it by PID.
func startCmd(t *testing.T, stateDir, name string, argv ...string) *agentProc {
	t.Helper()
	p := &agentProc{cmd: exec.Command(name, argv...), log: &livetest.Buffer{}, stateDir: stateDir, done: make(chan struct{})}
	p.cmd.Stderr, p.cmd.Stdout = p.log, p.log
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.err = p.cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		p.stop(t, syscall.SIGTERM)
		if t.Failed() {
			t.Logf("agent log:\n%s", p.log)
		}
	})
	return p
}

// stop signals the agent by PID and waits for it (SIGKILL after 10 s).
func (p *agentProc) stop(t *testing.T, sig syscall.Signal) {
	select {
	case <-p.done:
		return
	default:
	}
	p.cmd.Process.Signal(sig)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		t.Errorf("agent pid %d did not stop on %v; killing it", p.cmd.Process.Pid, sig)
		p.cmd.Process.Kill()
		<-p.done
	}
}

func (p *agentProc) status(t *testing.T) *Status {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	st, err := Query(ctx, filepath.Join(p.stateDir, SocketName))
	if err != nil {
		t.Fatalf("status: %v\n%s", err, p.log)
	}
	return st
}

// waitFor polls cond until it holds; it fails the test after limit (a
// bound against hanging, not a timing assertion) and returns how long it
// took.
func waitFor(t *testing.T, limit time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for !cond() {
		if time.Since(start) > limit {
			t.Fatalf("%s: not after %s", what, limit)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return time.Since(start)
}

// movableIRQ finds an IRQ of this machine whose affinity can be written,
// not a network or disk IRQ (so eth0 and the disk are never moved), and
// restores its affinity in t.Cleanup.
func movableIRQ(t *testing.T) (int, string) {
	t.Helper()
	return livetest.MovableIRQ(t, kernel.New("/"))
}

// irqToMove is a movable IRQ (restored in t.Cleanup), its affinity and a
// CPU to move it to: the last online CPU, or 0 if it is there already.
func irqToMove(t *testing.T) (irq int, orig, to string) {
	t.Helper()
	irq, orig = movableIRQ(t)
	if to = lastCPU(t); to == orig {
		to = "0"
	}
	return irq, orig, to
}

func irqAffinity(t *testing.T, irq int) string {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/irq/%d/smp_affinity_list", irq))
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

func setIRQAffinity(t *testing.T, irq int, v string) {
	t.Helper()
	if err := os.WriteFile(fmt.Sprintf("/proc/irq/%d/smp_affinity_list", irq), []byte(v), 0); err != nil {
		t.Fatal(err)
	}
}

// lastCPU is the highest online CPU.
func lastCPU(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("/sys/devices/system/cpu/online")
	if err != nil {
		t.Fatal(err)
	}
	s := strings.TrimSpace(string(b))
	if i := strings.LastIndexAny(s, ",-"); i >= 0 {
		s = s[i+1:]
	}
	return s
}

// openTempDir is a directory below /tmp that every user may enter (mode
// 0755, root's), unlike t.TempDir's; removed when the test ends.
func openTempDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "irqp-agentsec-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	os.Chmod(dir, 0o755)
	return dir
}

func mkState(t *testing.T) string {
	t.Helper()
	d := filepath.Join(t.TempDir(), "state")
	if err := os.Mkdir(d, 0o700); err != nil {
		t.Fatal(err)
	}
	return d
}

// promStart runs a real Prometheus in ns on loopback, scraping target
// every 500 ms, with a temporary configuration and data directory; the
// cleanup stops it by PID.
func promStart(t *testing.T, b *bed, target string) string {
	t.Helper()
	prom, err := exec.LookPath("prometheus")
	if err != nil {
		t.Skip("prometheus not installed (Debian package prometheus; make deps)")
	}
	dir := t.TempDir()
	cfg := filepath.Join(dir, "prometheus.yml")
	os.WriteFile(cfg, []byte(fmt.Sprintf(`global:
  scrape_interval: 500ms
  scrape_timeout: 400ms
scrape_configs:
  - job_name: irqpilot
    static_configs:
      - targets: ["%s"]
`, target)), 0o644)
	addr := "127.0.0.1:19090"
	cmd := exec.Command("ip", "netns", "exec", b.ns, prom, "--config.file="+cfg, "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+addr, "--log.level=warn")
	logb := &livetest.Buffer{}
	cmd.Stdout, cmd.Stderr = logb, logb
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("prometheus log:\n%s", logb)
		}
	})
	livetest.Start(t, cmd, 15*time.Second)
	return "http://" + addr
}

// TestMain removes the binary and the generated host the tests built.
func TestMain(m *testing.M) {
	code := m.Run()
	if bigHostBuilt {
		if dir, _ := bigHost(); dir != "" {
			os.RemoveAll(dir)
		}
	}
	livetest.RemoveBuilt()
	removeNobodyBinary()
	os.Exit(code)
}

// startVa0Agent starts the agent on va0RPSPlan(reason) in a new bed of 2
// queues, passing at the given interval, with no metrics listener and
// args: the bed, the agent's state directory and the agent.
func startVa0Agent(t *testing.T, reason, interval string, args ...string) (*bed, string, *agentProc) {
	t.Helper()
	b := newBed(t, 2)
	pf := writePlan(t, va0RPSPlan(reason))
	sd := mkState(t)
	p := startAgent(t, b.ns, sd, append([]string{"--plan", pf, "--interval", interval, "--listen", ""}, args...)...)
	return b, sd, p
}

// va0RPSPlan is a plan that steers va0's receive queues to CPU 0 with an
// RFS flow count.
func va0RPSPlan(reason string) string {
	return "version: 1\nrx_queues:\n  - device: va0\n    rps_cpus: \"0\"\n    rps_flow_cnt: 256\n    reason: " + reason + "\n"
}

// irqAndVa0Plan is a plan that moves irq to cpus and steers va0's receive
// queues to CPU 0.
func irqAndVa0Plan(irq int, cpus, reason string) string {
	return fmt.Sprintf("version: 1\nirqs:\n  - irq: %d\n    cpus: %q\n    reason: %s\n"+
		"rx_queues:\n  - device: va0\n    rps_cpus: \"0\"\n    reason: %s\n", irq, cpus, reason, reason)
}

// promAPI is client_golang's Prometheus API client for the server at url
// inside the bed's namespace: its connections are dialed from a thread in
// that namespace (a socket stays in the namespace it was made in).
func (b *bed) promAPI(t *testing.T, url string) promv1.API {
	t.Helper()
	tr := &http.Transport{DialContext: func(ctx context.Context, network, addr string) (c net.Conn, err error) {
		err = kernel.InNetns(b.ns, func() error {
			c, err = (&net.Dialer{}).DialContext(ctx, network, addr)
			return err
		})
		return c, err
	}}
	t.Cleanup(tr.CloseIdleConnections)
	c, err := promclient.New(url, promclient.Limits{MaxBytes: 64 << 20}, tr)
	if err != nil {
		t.Fatal(err)
	}
	return c
}
