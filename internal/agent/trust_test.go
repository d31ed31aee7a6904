package agent

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/irqpilot/irqpilot/internal/cpuset"
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

	ag := newTestAgent(t, Options{FS: fs, PlanFile: pf, Interval: 50 * time.Millisecond})
	runAgent(t, ag)
	rps := filepath.Join(root, "sys/class/net/eth0/queues/rx-0/rps_cpus")
	waitForT(t, func() bool { return maskIs(rps, 3) })
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
	if got := maskOf(t, rps); !got.Equal(cpuset.Of(3)) {
		t.Errorf("rps_cpus CPUs %s: the untrusted plan was enforced", got)
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
	waitForT(t, func() bool { return maskIs(rps, 0) })
}

// A status socket in a directory another user owns: the agent refuses to
// listen there, and `status` refuses an answer from a socket that user
// put there in the agent's place.
func TestStatusSocketOtherUsersDirectory(t *testing.T) {
	livetest.NeedRoot(t)
	// t.TempDir is private to root; nobody needs a way in.
	top := openTempDir(t)
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
		{Options{AdaptOptions: AdaptOptions{MetricQuery: "http://prom:9090/api/v1/series?match=up"}}, "not a Prometheus instant query URL"},
		{Options{AdaptOptions: AdaptOptions{MetricQuery: "http://prom:9090/api/v1/query?query=up&time=1700000000"}}, `parameter "time" is not supported`},
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

// The unprivileged side of the live tests: this test binary re-executed as
// nobody (uid/gid 65534), doing what another local user could do to the
// agent. nobodyMode selects what; TestNobodyHelper is the entry point and
// skips in a normal run.
const (
	nobodyEnv   = "IRQPILOT_TEST_NOBODY"
	nobodyUID   = 65534
	modeFlood   = "flood"
	modeFakeSts = "fake-status"
)

// TestNobodyHelper runs only in the child asNobody starts.
func TestNobodyHelper(t *testing.T) {
	mode := os.Getenv(nobodyEnv)
	if mode == "" {
		t.Skip("the unprivileged child of the live tests")
	}
	if os.Geteuid() != nobodyUID {
		fmt.Printf("error: running as uid %d, not nobody\n", os.Geteuid())
		os.Exit(1)
	}
	switch mode {
	case modeFlood:
		n, _ := strconv.Atoi(os.Getenv("FLOOD_CONNS"))
		flood(os.Getenv("FLOOD_ADDR"), n)
	case modeFakeSts:
		fakeStatus(os.Getenv("FAKE_SOCKET"))
	}
	os.Exit(0)
}

// floodResult is what the flooding child reports on stdout.
type floodResult struct {
	Opened   int    `json:"opened"`   // connections established
	Answered int    `json:"answered"` // of those, answered (404) within 1 s
	Failed   int    `json:"failed"`   // dials that failed or timed out
	FirstErr string `json:"first_err,omitempty"`
}

// flood opens n keep-alive connections to addr, sends each `GET /x
// HTTP/1.1` and reads the answer if one comes, reports on stdout, and
// keeps every socket open until stdin closes.
func flood(addr string, n int) {
	var mu sync.Mutex
	var conns []net.Conn
	var res floodResult
	var answered atomic.Int64
	sem := make(chan struct{}, 1000)
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			c, err := net.DialTimeout("tcp", addr, 3*time.Second)
			mu.Lock()
			if err != nil {
				res.Failed++
				if res.FirstErr == "" {
					res.FirstErr = err.Error()
				}
				mu.Unlock()
				return
			}
			conns = append(conns, c)
			mu.Unlock()
			io.WriteString(c, "GET /x HTTP/1.1\r\nHost: x\r\n\r\n")
			c.SetReadDeadline(time.Now().Add(time.Second))
			if l, err := bufio.NewReader(c).ReadString('\n'); err == nil && strings.Contains(l, "404") {
				answered.Add(1)
			}
		}()
	}
	wg.Wait()
	res.Opened, res.Answered = len(conns), int(answered.Load())
	json.NewEncoder(os.Stdout).Encode(res)
	io.Copy(io.Discard, os.Stdin)
	for _, c := range conns {
		c.Close()
	}
}

// fakeStatus answers on socket with a status of its own making.
func fakeStatus(socket string) {
	ln, err := net.Listen("unix", socket)
	if err != nil {
		fmt.Printf("error: %v\n", err)
		os.Exit(1)
	}
	os.Chmod(socket, 0o666)
	fmt.Println("ready")
	go func() { io.Copy(io.Discard, os.Stdin); os.Exit(0) }()
	for {
		c, err := ln.Accept()
		if err != nil {
			os.Exit(1)
		}
		json.NewEncoder(c).Encode(Status{PID: 1, Plan: "FAKE plan from nobody"})
		c.Close()
	}
}

var (
	nobodyBinOnce sync.Once
	nobodyBin     string
	nobodyBinErr  error
)

// nobodyBinary is a copy of this test binary that nobody may execute (go
// test builds it below a directory only root can enter); TestMain
// removes it.
func nobodyBinary(t *testing.T) string {
	t.Helper()
	nobodyBinOnce.Do(func() {
		dir, err := os.MkdirTemp("", "irqp-agentsec-")
		if err != nil {
			nobodyBinErr = err
			return
		}
		os.Chmod(dir, 0o755)
		self, err := os.Executable()
		if err != nil {
			nobodyBinErr = err
			return
		}
		data, err := os.ReadFile(self)
		if err != nil {
			nobodyBinErr = err
			return
		}
		nobodyBin = filepath.Join(dir, "agent.test")
		nobodyBinErr = os.WriteFile(nobodyBin, data, 0o755)
	})
	if nobodyBinErr != nil {
		t.Fatal(nobodyBinErr)
	}
	return nobodyBin
}

func removeNobodyBinary() {
	if nobodyBin != "" {
		os.RemoveAll(filepath.Dir(nobodyBin))
	}
}

// nobodyProc is the unprivileged child.
type nobodyProc struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	out   *bufio.Reader
	errb  *livetest.Buffer
	done  chan struct{}
}

// asNobody starts this test binary as uid/gid 65534 in mode with env, in
// network namespace ns when not "" (the child is forked from a thread
// that entered it). Closing stdin (end) ends it; the cleanup kills it by
// PID if it is still running.
func asNobody(t *testing.T, ns, mode string, env ...string) *nobodyProc {
	t.Helper()
	bin := nobodyBinary(t)
	cmd := exec.Command(bin, "-test.run=^TestNobodyHelper$", "-test.count=1")
	cmd.Env = append([]string{nobodyEnv + "=" + mode, "PATH=/usr/bin:/bin", "GOMAXPROCS=2"}, env...)
	cmd.Dir = "/"
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobodyUID, Gid: nobodyUID, Groups: []uint32{}}}
	p := &nobodyProc{cmd: cmd, errb: &livetest.Buffer{}, done: make(chan struct{})}
	cmd.Stderr = p.errb
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	p.stdin, p.out = stdin, bufio.NewReader(stdout)
	if err := kernel.InNetns(ns, cmd.Start); err != nil {
		t.Fatalf("start the unprivileged child: %v", err)
	}
	go func() { cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		p.end()
		select {
		case <-p.done:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-p.done
		}
		if t.Failed() {
			t.Logf("unprivileged child stderr:\n%s", p.errb)
		}
	})
	return p
}

// line reads one line of the child's output (bounded).
func (p *nobodyProc) line(t *testing.T, limit time.Duration) string {
	t.Helper()
	ch := make(chan string, 1)
	go func() { s, _ := p.out.ReadString('\n'); ch <- s }()
	select {
	case s := <-ch:
		return strings.TrimSpace(s)
	case <-time.After(limit):
		t.Fatalf("unprivileged child said nothing in %s\n%s", limit, p.errb)
		return ""
	}
}

func (p *nobodyProc) end() { p.stdin.Close() }

// trustDirs makes a root-owned mode 0755 directory with two plans in it
// and two directories where anyone may add entries: sticky (as /tmp) and
// not sticky.
func trustDirs(t *testing.T) (top, planA, planB, sticky, open string) {
	t.Helper()
	top = t.TempDir()
	os.Chmod(top, 0o755)
	planA, planB = filepath.Join(top, "a.yaml"), filepath.Join(top, "b.yaml")
	for f, cpus := range map[string]string{planA: "3", planB: "1"} {
		if err := os.WriteFile(f, []byte(rpsPlanText(cpus)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	sticky, open = filepath.Join(top, "sticky"), filepath.Join(top, "open")
	for d, mode := range map[string]os.FileMode{sticky: 0o777 | os.ModeSticky, open: 0o777} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(d, mode); err != nil {
			t.Fatal(err)
		}
	}
	return top, planA, planB, sticky, open
}

// A symbolic link on the way to the plan is checked as sudo and OpenSSH
// do: its owner, and the directory that holds it. A link another user
// owns is refused even in a sticky directory (that user may point it
// anywhere), a root-owned link in a directory anyone may change is
// refused, and so is a trusted link whose target lies below an untrusted
// directory; a root-owned link in a sticky directory to a trusted plan,
// or a chain of trusted links, passes and resolves to the plan.
func TestPlanSymlinkChecked(t *testing.T) {
	livetest.NeedRoot(t)
	top, planA, _, sticky, open := trustDirs(t)
	link := func(dir, name, target string, uid int) string {
		t.Helper()
		p := filepath.Join(dir, name)
		if err := os.Symlink(target, p); err != nil {
			t.Fatal(err)
		}
		if err := os.Lchown(p, uid, uid); err != nil {
			t.Fatal(err)
		}
		return p
	}
	openPlan := filepath.Join(open, "plan.yaml")
	if err := os.WriteFile(openPlan, []byte(rpsPlanText("2")), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		path, err string
	}{
		{link(sticky, "nobodys", planA, nobodyUID), "owned by uid 65534"},
		{link(open, "roots", planA, 0), "writable by group or others (mode 0777)"},
		{link(top, "to-open", openPlan, 0), "writable by group or others (mode 0777)"},
		{link(top, "to-nobodys", filepath.Join(sticky, "nobodys"), 0), "owned by uid 65534"},
		{link(top, "relative-to-nobodys", "sticky/nobodys", 0), "owned by uid 65534"},
		{link(top, "loop", "loop", 0), "too many levels of symbolic links"},
	} {
		if real, err := checkTrusted("plan file", c.path); err == nil || !strings.Contains(err.Error(), c.err) {
			t.Errorf("%s: %q, %v; want an error saying %q", c.path, real, err, c.err)
		}
	}
	good := link(sticky, "roots", planA, 0)
	chain := link(top, "chain", "sticky/roots", 0)
	for _, p := range []string{good, chain, filepath.Join(top, "sticky", "..", "a.yaml")} {
		if real, err := checkTrusted("plan file", p); err != nil || real != planA {
			t.Errorf("%s: %q, %v; want %s", p, real, err, planA)
		}
	}
}

// The audit's reproduction: the plan file is a root-owned link in a
// sticky directory to a trusted plan; between two reloads it is replaced
// by a link another user owns, pointing at another plan. The reload is
// rejected and the plan in force stays.
func TestPlanSymlinkSwappedBetweenReloads(t *testing.T) {
	livetest.NeedRoot(t)
	_, planA, planB, sticky, _ := trustDirs(t)
	pf := filepath.Join(sticky, "plan.yaml")
	if err := os.Symlink(planA, pf); err != nil {
		t.Fatal(err)
	}
	root := genHost(t)
	ag, err := New(Options{FS: kernel.New(root), StateDir: stateDir(t), PlanFile: pf, Interval: 50 * time.Millisecond, NoLinkEvents: true, Log: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	runAgent(t, ag)
	rps := filepath.Join(root, "sys/class/net/eth0/queues/rx-0/rps_cpus")
	waitForT(t, func() bool { b, _ := os.ReadFile(rps); return strings.Contains(string(b), "8") })

	os.Remove(pf)
	if err := os.Symlink(planB, pf); err != nil {
		t.Fatal(err)
	}
	if err := os.Lchown(pf, nobodyUID, nobodyUID); err != nil {
		t.Fatal(err)
	}
	if err := ag.Reload(); err == nil || !strings.Contains(err.Error(), "owned by uid 65534") {
		t.Fatalf("reload of a plan behind a link nobody owns: %v", err)
	}
	time.Sleep(200 * time.Millisecond) // passes run; the old plan stays
	if b, _ := os.ReadFile(rps); !strings.Contains(string(b), "8") {
		t.Errorf("rps_cpus %q: the plan behind the swapped link was enforced", b)
	}
}

// A file that is not a plan at all (no version at its top; /etc/shadow
// behind a link, say) is refused without its content: at most its first
// bytes appear in the error the log and status show.
func TestNotAPlanNotEchoed(t *testing.T) {
	secret := "root:$6$saltsalt$SECRETHASHVALUE:19000:0:99999:7:::\nuser:SECRETTOO:1:2\n"
	for _, text := range []string{secret, "SECRETWORD-SECRETWORD\n", "- SECRET\n- SECRET\n", "{SECRET: [1, 2]}\n"} {
		pf := writePlan(t, text)
		ag := &Agent{o: Options{PlanFile: pf}}
		_, _, err := ag.loadPlan(nil)
		if err == nil || strings.Contains(err.Error(), "SECRET") || !strings.Contains(err.Error(), "not a plan") {
			t.Errorf("plan %q: %v; want an error saying it is not a plan, without the file's content", text, err)
		}
	}
}
