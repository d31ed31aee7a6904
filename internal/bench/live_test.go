package bench

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/irqpilot/irqpilot/internal/bench/testbed"
	"github.com/irqpilot/irqpilot/internal/bench/workload"
	"github.com/irqpilot/irqpilot/internal/kernel/netdev"
	"github.com/irqpilot/irqpilot/internal/livetest"
	"github.com/irqpilot/irqpilot/internal/setting"
)

// napiProbe is the udp workload that, at the start of every measured run,
// reads the testbed device's NAPI instances through netlink inside the
// testbed's namespace: what the configuration put in force.
type napiProbe struct {
	*workload.NetWorkload
	t    *testing.T
	seen [][]netdev.NAPI
	// busyPolled is, per configuration, how many packets busy polling
	// received in the server namespace during its runs (TcpExt
	// BusyPollRxPackets).
	busyPolled map[string]int64
}

func (p *napiProbe) RunWindow(ctx context.Context, d time.Duration, s workload.Placement, win workload.Window) (workload.Result, error) {
	p.seen = append(p.seen, tbNAPIs(p.t, p.TB))
	b0 := busyPollRx(p.t, p.TB)
	r, err := p.NetWorkload.RunWindow(ctx, d, s, win)
	if p.busyPolled == nil {
		p.busyPolled = map[string]int64{}
	}
	p.busyPolled[s.Config] += busyPollRx(p.t, p.TB) - b0
	return r, err
}

// busyPollRx is the server namespace's TcpExt BusyPollRxPackets: packets
// that busy polling (not the softirq) took from the veth's NAPI instance.
func busyPollRx(t *testing.T, tb *testbed.Testbed) int64 {
	t.Helper()
	// The holder process lives in the server namespace: its net/ is that
	// namespace's.
	b, err := os.ReadFile(strings.TrimSuffix(tb.Root(), "/root") + "/net/netstat")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || f[0] != "TcpExt:" {
			continue
		}
		if names == nil {
			names = f
			continue
		}
		for i := range f {
			if i < len(names) && names[i] == "BusyPollRxPackets" {
				v, _ := strconv.ParseInt(f[i], 10, 64)
				return v
			}
		}
	}
	t.Fatal("no TcpExt BusyPollRxPackets in the server namespace")
	return 0
}

// tbNAPIs dumps the server veth's NAPI instances in the testbed namespace.
func tbNAPIs(t *testing.T, tb *testbed.Testbed) []netdev.NAPI {
	t.Helper()
	ix, err := os.ReadFile(tb.Root() + "/sys/class/net/" + tb.ServerDev + "/ifindex")
	if err != nil {
		t.Fatal(err)
	}
	c, err := netdev.OpenIn(tb.NetNSPath())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	n, err := strconv.Atoi(strings.TrimSpace(string(ix)))
	if err != nil {
		t.Fatal(err)
	}
	ns, err := c.NAPIs(n)
	if err != nil {
		t.Fatal(err)
	}
	return ns
}

// hostNAPIs dumps the NAPI instances of the host's namespace (this
// process's).
func hostNAPIs(t *testing.T) []netdev.NAPI {
	t.Helper()
	c, err := netdev.Open()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ns, err := c.NAPIs(0)
	if err != nil {
		t.Fatal(err)
	}
	return ns
}

func napiValues(n netdev.NAPI) (defer_ uint32, flush, suspend uint64) {
	if n.DeferHardIRQs != nil {
		defer_ = *n.DeferHardIRQs
	}
	if n.GROFlushTimeout != nil {
		flush = *n.GROFlushTimeout
	}
	if n.IRQSuspendTimeout != nil {
		suspend = *n.IRQSuspendTimeout
	}
	return
}

// TestLiveBenchNAPIInTestbedNamespace (issue 13): the latency policy on the
// udp workload's GRO veth sets per-NAPI IRQ suspension (netlink only, no
// file) and device-wide deferral. bench sees the device's NAPI instances,
// applies the per-NAPI changes inside the testbed's namespace (read back
// there through netlink during the run), restores them after it, and leaves
// the host namespace's NAPI instances and every file of the machine as they
// were.
func TestLiveBenchNAPIInTestbedNamespace(t *testing.T) {
	livetest.NeedRoot(t)
	w, err := workload.NewNet("udp", workload.NetOptions{Testbed: testbed.Options{FS: liveFS, Queues: 2, GRO: true, StateDir: t.TempDir()}, Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	p := &napiProbe{NetWorkload: w, t: t}
	hostBefore := hostNAPIs(t)
	stateBefore, err := ReadMachineState(liveFS)
	if err != nil {
		t.Fatal(err)
	}
	r := &Runner{FS: liveFS, Workload: p, Configs: []string{"latency"}, Rounds: 1, Duration: time.Second, StateDir: t.TempDir()}
	if err := r.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := r.Close(); err != nil {
			t.Error(err)
		}
	})
	initial := tbNAPIs(t, w.TB)
	if len(initial) != 2 {
		t.Fatalf("testbed veth: %d NAPI instances, want 2 (GRO on, 2 queues)", len(initial))
	}
	if initial[0].IRQSuspendTimeout == nil {
		t.Skip("kernel without per-NAPI irq-suspend-timeout (6.13)")
	}
	if got := r.Host().NAPIsOf(w.TB.ServerDev); len(got) != 2 {
		t.Fatalf("host model lists %d NAPI instances of %s, want 2: %+v", len(got), w.TB.ServerDev, got)
	}
	run, err := r.Measure(context.Background(), "latency", 0)
	if err != nil {
		t.Fatal(err)
	}
	if run.Error != "" || run.Throughput <= 0 {
		b, _ := os.ReadFile(w.TB.Dir + "/udp-sink.log")
		t.Fatalf("run %+v\nsink: %s", run, b)
	}
	suspends := 0
	for _, c := range r.Setups["latency"].Changes {
		if c.Kind == setting.KindNAPIIRQSuspendTimeout && c.Device == w.TB.ServerDev {
			suspends++
		}
	}
	if suspends != 2 {
		t.Errorf("latency kept %d irq-suspend-timeout changes of %s, want 2 (dropped: %v)", suspends, w.TB.ServerDev, r.Dropped)
	}
	if len(p.seen) != 1 {
		t.Fatalf("%d probes", len(p.seen))
	}
	for _, n := range p.seen[0] {
		d, f, s := napiValues(n)
		if d != latencyDeferWant || f != latencyFlushWant || s != latencySuspendWant {
			t.Errorf("during the run, napi %d in the testbed namespace: defer %d, gro flush %d ns, irq suspend %d ns; want %d, %d, %d",
				n.ID, d, f, s, latencyDeferWant, latencyFlushWant, latencySuspendWant)
		}
	}
	after := tbNAPIs(t, w.TB)
	for i, n := range initial {
		d0, f0, s0 := napiValues(n)
		if i >= len(after) || after[i].ID != n.ID {
			t.Fatalf("NAPI instances changed: %+v → %+v", initial, after)
		}
		if d, f, s := napiValues(after[i]); d != d0 || f != f0 || s != s0 {
			t.Errorf("after the run, napi %d: defer %d, gro flush %d, irq suspend %d; was %d, %d, %d", n.ID, d, f, s, d0, f0, s0)
		}
	}
	hostAfter := hostNAPIs(t)
	if len(hostAfter) != len(hostBefore) {
		t.Errorf("host namespace: %d NAPI instances after, %d before", len(hostAfter), len(hostBefore))
	} else {
		for i := range hostBefore {
			d0, f0, s0 := napiValues(hostBefore[i])
			if d, f, s := napiValues(hostAfter[i]); hostAfter[i].ID != hostBefore[i].ID || d != d0 || f != f0 || s != s0 {
				t.Errorf("host namespace napi %d changed: %+v → %+v", hostBefore[i].ID, hostBefore[i], hostAfter[i])
			}
		}
	}
	stateAfter, err := ReadMachineState(liveFS)
	if err != nil {
		t.Fatal(err)
	}
	if d := stateBefore.Diff(stateAfter); len(d) > 0 {
		t.Errorf("machine state differs: %v", d)
	}
}

// What the latency policy sets (plan/napipolicies.go).
const (
	latencyDeferWant   = 2
	latencyFlushWant   = 200_000
	latencySuspendWant = 20_000_000
)

// TestLiveUDPBusyPollConfigs: the udp sink busy-polls per configuration —
// socket busy polling, epoll busy polling (read back by the sink, or the
// run fails) and back to blocking reads — on the GRO veth, one short round
// each; the labels keep their options and the machine is restored.
func TestLiveUDPBusyPollConfigs(t *testing.T) {
	livetest.NeedRoot(t)
	w, err := workload.NewNet("udp", workload.NetOptions{Testbed: testbed.Options{FS: liveFS, Queues: 1, GRO: true, StateDir: t.TempDir()}, Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	p := &napiProbe{NetWorkload: w, t: t}
	configs := []string{"default/busypoll=50", "default/epollbusy=50", "default"}
	r := &Runner{FS: liveFS, Workload: p, Configs: configs, Rounds: 1, Duration: time.Second, StateDir: t.TempDir()}
	rep, err := Bench(context.Background(), r, "")
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Restored {
		t.Errorf("machine not restored: %v", rep.Diff)
	}
	for i, run := range rep.Runs {
		if run.Config != configs[i] || run.Error != "" || run.Throughput <= 0 {
			t.Errorf("run %d: %+v", i, run)
		}
	}
	if bp := r.Setups["default/epollbusy=50"].BusyPoll; bp == nil || bp.EpollUsecs != 50 || bp.SocketUsecs != 0 {
		t.Errorf("epollbusy setup: %+v", bp)
	}
	if bp := r.Setups["default"].BusyPoll; bp != nil {
		t.Errorf("default setup busy-polls: %+v", bp)
	}
	t.Logf("packets received by busy polling: %v", p.busyPolled)
	// Blocking reads never busy-poll; the opted-in sink does (the flood
	// keeps its queue full most of the time, so a handful of packets, but
	// not none over both configurations).
	if n := p.busyPolled["default"]; n != 0 {
		t.Errorf("default (blocking reads) received %d packets by busy polling", n)
	}
	if p.busyPolled["default/busypoll=50"]+p.busyPolled["default/epollbusy=50"] == 0 {
		t.Errorf("the sink opted in to busy polling and no packet was received by it: %v", p.busyPolled)
	}
}

// serverProbe wraps a workload and, at every measured run, checks that its
// server runs with the PID bench started and listens in the testbed's
// server namespace alone.
type serverProbe struct {
	workload.Workload
	t      *testing.T
	server func() testbed.Proc
	tb     func() *testbed.Testbed
	// seen is the server as the first run found it; id the testbed's.
	seen    testbed.Proc
	id      string
	checked int
}

func (p *serverProbe) Run(ctx context.Context, d time.Duration, s workload.Placement) (workload.Result, error) {
	srv := p.server()
	if p.checked == 0 {
		p.seen, p.id = srv, p.tb().ID
	}
	p.checked++
	if srv.PID != p.seen.PID || !procIs(srv.PID, srv.Comm) {
		p.t.Errorf("run %d: server %+v not running as started (%+v)", p.checked, srv, p.seen)
	}
	// Nothing of the server's listens in the machine's own namespace.
	out, err := exec.Command("ss", "-Hlnp").Output()
	if err != nil {
		p.t.Fatalf("ss in the root namespace: %v", err)
	}
	if strings.Contains(string(out), "pid="+strconv.Itoa(srv.PID)+",") {
		p.t.Errorf("server pid %d listens in the root namespace:\n%s", srv.PID, out)
	}
	return p.Workload.Run(ctx, d, s)
}

func procIs(pid int, comm string) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
	return err == nil && strings.TrimSpace(string(b)) == comm
}

// procsNamed lists the PIDs whose comm is comm and whose command line
// mentions s (a testbed's ID, in its temporary directory's name).
func procsNamed(comm, s string) []int {
	var out []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || !procIs(pid, comm) {
			continue
		}
		if b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid)); strings.Contains(string(b), s) {
			out = append(out, pid)
		}
	}
	return out
}

// liveWorkloadBench runs a 2-round bench of default and rps-spread on w
// and checks what is robust on a busy machine: every run parsed a
// positive figure, the server ran as started and was stopped, the testbed
// and its namespaces are gone and the machine is restored.
func liveWorkloadBench(t *testing.T, w workload.Workload, server func() testbed.Proc, tb func() *testbed.Testbed, stateDir, unit string) *Report {
	t.Helper()
	probe := &serverProbe{Workload: w, t: t, server: server, tb: tb}
	r := &Runner{FS: liveFS, Workload: probe, Configs: []string{"default", "rps-spread"}, Rounds: 2,
		Duration: 2 * time.Second, StateDir: t.TempDir()}
	rep, err := Bench(context.Background(), r, "")
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Restored {
		t.Errorf("machine not restored: %v", rep.Diff)
	}
	if len(rep.Runs) != 4 || probe.checked != 4 {
		t.Fatalf("%d runs, %d probed; want 4", len(rep.Runs), probe.checked)
	}
	for i, run := range rep.Runs {
		if run.Error != "" || run.Throughput <= 0 || run.Unit != unit {
			t.Errorf("run %d: %+v", i, run)
		}
	}
	if probe.seen.PID <= 0 {
		t.Fatal("no server seen")
	}
	if procIs(probe.seen.PID, probe.seen.Comm) {
		t.Errorf("server pid %d (%s) still runs after the bench", probe.seen.PID, probe.seen.Comm)
	}
	if left := procsNamed(probe.seen.Comm, probe.id); len(left) > 0 {
		t.Errorf("%s processes of testbed %s left: %v", probe.seen.Comm, probe.id, left)
	}
	for _, ns := range testbed.Namespaces() {
		if strings.HasPrefix(ns, probe.id) {
			t.Errorf("namespace %s left", ns)
		}
	}
	if left, _ := testbed.List(liveFS, stateDir); len(left) > 0 {
		t.Errorf("testbed state left: %+v", left)
	}
	var tbl strings.Builder
	if err := rep.WriteTable(&tbl); err != nil {
		t.Error(err)
	}
	t.Log("\n" + tbl.String())
	return rep
}

func skipUnlessLive(t *testing.T, progs ...string) {
	t.Helper()
	livetest.NeedRoot(t, append(progs, "taskset", "ss")...)
}

// MariaDB started by bench in the testbed, sysbench oltp_point_select
// against it: transactions per second parsed, the server stopped by PID.
func TestMySQLWorkloadLive(t *testing.T) {
	skipUnlessLive(t, "mariadbd", "mariadb-install-db", "mariadb", "sysbench")
	dir := t.TempDir()
	w, err := workload.NewDB(workload.DBOptions{Testbed: testbed.Options{FS: liveFS, StateDir: dir}, Connections: 4, TableSize: 2000})
	if err != nil {
		t.Fatal(err)
	}
	rep := liveWorkloadBench(t, w, w.Server, func() *testbed.Testbed { return w.TB }, dir, "trx/s")
	for _, run := range rep.Runs {
		if run.LatencyP50 <= 0 || run.LatencyP99 < run.LatencyP50 {
			t.Errorf("%s round %d: p50 %v p99 %v µs", run.Config, run.Round, run.LatencyP50, run.LatencyP99)
		}
	}
}

// A sockperf server in the testbed, ping-pong from the client namespace:
// a latency objective (lower is better) with its percentiles and the
// server's CPU per message.
func TestSockperfWorkloadLive(t *testing.T) {
	skipUnlessLive(t, "sockperf")
	dir := t.TempDir()
	w, err := workload.NewSockperf(workload.SockperfOptions{Testbed: testbed.Options{FS: liveFS, StateDir: dir}})
	if err != nil {
		t.Fatal(err)
	}
	rep := liveWorkloadBench(t, w, w.Server, func() *testbed.Testbed { return w.TB }, dir, "µs")
	for _, run := range rep.Runs {
		if !run.LowerIsBetter || run.LatencyP50 <= 0 || run.LatencyP99 < run.LatencyP50 || run.Rate <= 0 || run.ServerCPUPerOp <= 0 {
			t.Errorf("%s round %d: %+v", run.Config, run.Round, run.Result)
		}
	}
	if !rep.Summary[0].LowerIsBetter || !strings.Contains(rep.Method(), "lower is better") {
		t.Errorf("summary does not judge lower as better: %+v; %s", rep.Summary[0], rep.Method())
	}
}
