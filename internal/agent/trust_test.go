package agent

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/irqpilot/irqpilot/internal/hostgen"
	"github.com/irqpilot/irqpilot/internal/kernel"
	"github.com/irqpilot/irqpilot/internal/livetest"
)

func genHost(t *testing.T) string {
	t.Helper()
	root, _ := livetest.GenHost(t, hostgen.Spec{CPUs: 8, Packages: 1, Nodes: 1, Offline: hostgen.NoOffline, NVMeQueues: -1,
		NICs: []hostgen.NICSpec{{Name: "eth0", Driver: "ice", Slot: 3, Queues: 4}}})
	return root
}

const rpsPlan = "version: 1\nrx_queues:\n  - device: eth0\n    queue: 0\n    rps_cpus: \"%s\"\n    reason: test\n"

func rpsPlanText(cpus string) string { return strings.Replace(rpsPlan, "%s", cpus, 1) }

// runAgent runs ag until the test ends and waits for its first pass.
func runAgent(t *testing.T, ag *Agent) {
	t.Helper()
	ready := make(chan struct{})
	ag.o.Ready = func() { close(ready) }
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- ag.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	select {
	case <-ready:
	case err := <-done:
		t.Fatal(err)
	}
}

// A plan file another user can write is not trusted, at start or on
// reload: a reload of it is rejected and the plan in force kept; the
// rejection shows in status and the metrics, with the line of the error.
func TestPlanFileOthersCanWriteRejected(t *testing.T) {
	root := genHost(t)
	fs := kernel.New(root)
	pf := writePlan(t, rpsPlanText("3"))
	os.Chmod(pf, 0o646)
	_, err := New(Options{FS: fs, StateDir: stateDir(t), PlanFile: pf, NoLinkEvents: true, Log: quiet()})
	var bad *BadInputError
	if !errors.As(err, &bad) || !strings.Contains(err.Error(), "writable by group or others") {
		t.Fatalf("New with a plan others can write: %v", err)
	}
	os.Chmod(pf, 0o644)
	if os.Geteuid() == 0 {
		os.Chown(filepath.Dir(pf), nobodyUID, nobodyUID)
		_, err := New(Options{FS: fs, StateDir: stateDir(t), PlanFile: pf, NoLinkEvents: true, Log: quiet()})
		if err == nil || !strings.Contains(err.Error(), "owned by uid 65534") {
			t.Fatalf("New with a plan in a directory nobody owns: %v", err)
		}
		os.Chown(filepath.Dir(pf), 0, 0)
	}

	ag, err := New(Options{FS: fs, StateDir: stateDir(t), PlanFile: pf, Interval: 50 * time.Millisecond, NoLinkEvents: true, Log: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	runAgent(t, ag)
	rps := filepath.Join(root, "sys/class/net/eth0/queues/rx-0/rps_cpus")
	waitForT(t, func() bool { b, _ := os.ReadFile(rps); return strings.Contains(string(b), "8") })
	if ag.Status().LastReload != nil {
		t.Errorf("status shows a reload none was asked for")
	}

	// Another user changes the plan (it became writable by others).
	os.Chmod(pf, 0o666)
	os.WriteFile(pf, []byte(rpsPlanText("1")), 0o666)
	if err := ag.Reload(); err == nil {
		t.Fatal("a plan others can write was reloaded")
	}
	time.Sleep(200 * time.Millisecond) // passes run; the old plan stays
	if b, _ := os.ReadFile(rps); !strings.Contains(string(b), "8") {
		t.Errorf("rps_cpus %q: the untrusted plan was enforced", b)
	}
	st := ag.Status()
	if st.LastReload == nil || !st.LastReload.Rejected || !strings.Contains(st.LastReload.Error, "writable by group or others") {
		t.Errorf("status after a rejected reload: %+v", st.LastReload)
	}
	if g := testutil.ToFloat64(ag.m.ReloadRejected); g != 1 {
		t.Errorf("irqpilot_plan_reload_rejected %v, want 1", g)
	}

	// A broken plan: rejected, with the line of the error (2, not 1).
	os.Chmod(pf, 0o644)
	os.WriteFile(pf, []byte("version: 1\nversion: 1\n"), 0o644)
	if err := ag.Reload(); err == nil {
		t.Fatal("a broken plan was reloaded")
	}
	if st := ag.Status(); st.LastReload == nil || !strings.Contains(st.LastReload.Error, "plan.yaml:2:") {
		t.Errorf("status of a plan broken on line 2: %+v", st.LastReload)
	}
	if n := testutil.ToFloat64(ag.m.Reloads.WithLabelValues("rejected")); n != 2 {
		t.Errorf("irqpilot_plan_reloads_total{result=rejected} %v, want 2", n)
	}

	// A good plan clears it.
	os.WriteFile(pf, []byte(rpsPlanText("0")), 0o644)
	if err := ag.Reload(); err != nil {
		t.Fatal(err)
	}
	if st := ag.Status(); st.LastReload == nil || st.LastReload.Rejected {
		t.Errorf("status after a good reload: %+v", st.LastReload)
	}
	if g := testutil.ToFloat64(ag.m.ReloadRejected); g != 0 {
		t.Errorf("irqpilot_plan_reload_rejected %v after a good reload, want 0", g)
	}
	waitForT(t, func() bool { b, _ := os.ReadFile(rps); return strings.Contains(string(b), "1") })
}

// A status socket in a directory another user owns: the agent refuses to
// listen there, and `status` refuses an answer from a socket that user
// put there in the agent's place.
func TestStatusSocketOtherUsersDirectory(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root (a directory owned by nobody, a process run as nobody)")
	}
	// t.TempDir is private to root; nobody needs a way in.
	top, err := os.MkdirTemp("", "irqp-agentsec-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(top) })
	os.Chmod(top, 0o755)
	dir := filepath.Join(top, "nobodys")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	os.Chown(dir, nobodyUID, nobodyUID)
	sock := filepath.Join(dir, "agent.sock")

	ag, err := New(Options{FS: kernel.New(genHost(t)), StateDir: stateDir(t), PlanFile: writePlan(t, rpsPlanText("3")),
		Socket: sock, NoLinkEvents: true, Log: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	if err := ag.Run(context.Background()); err == nil || !strings.Contains(err.Error(), "owned by uid 65534") {
		t.Fatalf("agent with --socket in a directory nobody owns: %v", err)
	}

	f := asNobody(t, "", modeFakeSts, "FAKE_SOCKET="+sock)
	if l := f.line(t, 20*time.Second); l != "ready" {
		t.Fatalf("fake status server: %q\n%s", l, f.errb)
	}
	// The fake answers (what the old `status` printed) ...
	c, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	var fake Status
	json.NewDecoder(c).Decode(&fake)
	c.Close()
	if !strings.Contains(fake.Plan, "FAKE") {
		t.Fatalf("the fake server did not answer: %+v", fake)
	}
	// ... and status refuses it.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	st, err := Query(ctx, sock)
	if err == nil || !strings.Contains(err.Error(), "uid 65534, not by root") {
		t.Fatalf("Query of a socket nobody serves: %+v, %v", st, err)
	}
	t.Log(err)
}

// Options the agent would have replaced with defaults (negative counts) or
// misused (a file:// metric query read as root) are refused by New.
func TestNewRefusesBadOptions(t *testing.T) {
	root := genHost(t)
	pf := writePlan(t, rpsPlanText("3"))
	for _, c := range []struct {
		o    Options
		want string
	}{
		{Options{KeepJournals: -5}, "--keep-journals -5"},
		{Options{PingPongLimit: -1}, "--pingpong-limit -1"},
		{Options{AdaptOptions: AdaptOptions{MaxPerHour: -1}}, "--adapt-budget -1"},
		{Options{Devices: []string{""}}, `--device ""`},
		{Options{AdaptOptions: AdaptOptions{MetricQuery: "file:///etc/shadow"}}, "--adapt-metric-query"},
	} {
		o := c.o
		o.FS, o.StateDir, o.PlanFile, o.NoLinkEvents, o.Log = kernel.New(root), stateDir(t), pf, true, quiet()
		_, err := New(o)
		var bad *BadInputError
		if !errors.As(err, &bad) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("New(%+v): %v, want a bad input naming %s", c.o, err, c.want)
		}
	}
}
