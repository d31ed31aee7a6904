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
)

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
	r := &Runner{Workload: probe, Configs: []string{"default", "rps-spread"}, Rounds: 2,
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
	if left, _ := testbed.List(stateDir); len(left) > 0 {
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
	if testing.Short() {
		t.Skip("live test (-short)")
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
	for _, b := range append(progs, "taskset", "ss") {
		if _, err := exec.LookPath(b); err != nil {
			t.Skipf("%s not installed", b)
		}
	}
}

// MariaDB started by bench in the testbed, sysbench oltp_point_select
// against it: transactions per second parsed, the server stopped by PID.
func TestMySQLWorkloadLive(t *testing.T) {
	skipUnlessLive(t, "mariadbd", "mariadb-install-db", "mariadb", "sysbench")
	dir := t.TempDir()
	w, err := workload.NewDB(workload.DBOptions{Testbed: testbed.Options{StateDir: dir}, Connections: 4, TableSize: 2000})
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
	w, err := workload.NewSockperf(workload.SockperfOptions{Testbed: testbed.Options{StateDir: dir}})
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
