package testbed

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/irqpilot/irqpilot/internal/kernel"
	"github.com/irqpilot/irqpilot/internal/livetest"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

func needRoot(t *testing.T) { livetest.NeedRoot(t, "ip", "memcached", "nginx") }

// live is the machine the tests' testbeds are made on.
var live = kernel.New("/")

// rootLinks names the devices of this process's network namespace.
func rootLinks(t *testing.T) []string {
	t.Helper()
	links, err := netlink.LinkList()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, l := range links {
		out = append(out, l.Attrs().Name)
	}
	sort.Strings(out)
	return out
}

// TestMain doubles as the helper process of TestKilledHarness: with
// IRQP_TESTBED_HELPER set it brings a testbed up, says READY and waits to be
// killed.
func TestMain(m *testing.M) {
	if dir := os.Getenv("IRQP_TESTBED_HELPER"); dir != "" {
		tb, err := Up(Options{FS: live, Queues: 2, Threaded: true, StateDir: dir})
		if err != nil {
			fmt.Println("ERR", err)
			os.Exit(1)
		}
		if _, err := tb.StartMemcached(2); err != nil {
			fmt.Println("ERR", err)
			os.Exit(1)
		}
		if _, err := tb.StartNginx(2); err != nil {
			fmt.Println("ERR", err)
			os.Exit(1)
		}
		fmt.Println("READY", tb.ID)
		time.Sleep(time.Minute)
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// leftovers lists what of tb still exists: namespaces, live recorded
// processes (and nginx workers), NAPI threads, the temp dir, the state file.
func leftovers(tb *Testbed, workers []int) []string {
	var out []string
	for _, ns := range []string{tb.ServerNS, tb.ClientNS} {
		if nsExists(ns) {
			out = append(out, "namespace "+ns)
		}
	}
	for _, p := range tb.Procs {
		if p.alive(live) {
			out = append(out, fmt.Sprintf("%s pid %d", p.Role, p.PID))
		}
	}
	for _, w := range workers {
		if c, err := readComm(live, w); err == nil && c == "nginx" {
			out = append(out, fmt.Sprintf("nginx worker %d", w))
		}
	}
	if n := tb.NAPIThreads(); len(n) > 0 {
		out = append(out, fmt.Sprintf("napi threads %v", n))
	}
	if _, err := os.Stat(tb.Dir); err == nil {
		out = append(out, "dir "+tb.Dir)
	}
	if _, err := os.Stat(tb.StatePath()); err == nil {
		out = append(out, "state "+tb.StatePath())
	}
	return out
}

func TestUpDown(t *testing.T) {
	needRoot(t)
	dir := t.TempDir()
	linksBefore := rootLinks(t)
	tb, err := Up(Options{FS: live, Queues: 2, Threaded: true, StateDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tb.Down() })
	if _, err := tb.StartMemcached(2); err != nil {
		t.Fatal(err)
	}
	ng, err := tb.StartNginx(2)
	if err != nil {
		t.Fatal(err)
	}
	// The master forks its workers after it listens: give them a moment.
	workers := Children(live, ng.PID)
	for deadline := time.Now().Add(5 * time.Second); len(workers) < 2 && time.Now().Before(deadline); workers = Children(live, ng.PID) {
		time.Sleep(20 * time.Millisecond)
	}
	if len(workers) != 2 {
		t.Errorf("nginx workers %v, want 2", workers)
	}
	// The server device is visible through the holder's view, with 2 queues.
	qs, err := filepath.Glob(filepath.Join(tb.Root(), "sys/class/net", tb.ServerDev, "queues/rx-*"))
	if err != nil || len(qs) != 2 {
		t.Errorf("rx queues of %s: %v %v, want 2", tb.ServerDev, qs, err)
	}
	if b, err := os.ReadFile(filepath.Join(tb.Root(), "sys/class/net", tb.ServerDev, "threaded")); err != nil || strings.TrimSpace(string(b)) != "1" {
		t.Errorf("threaded = %q %v, want 1", b, err)
	}
	if n := tb.NAPIThreads(); len(n) != 2 {
		t.Errorf("napi threads %v, want one per queue (2)", n)
	}
	// The client reaches the server inside the namespaces.
	out, err := exec.Command("ip", "netns", "exec", tb.ClientNS, "sh", "-c", "printf 'stats\\r\\nquit\\r\\n' | timeout 5 bash -c 'exec 3<>/dev/tcp/"+ServerAddr+"/11211; cat >&3; cat <&3'").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "STAT pid") {
		t.Errorf("memcached stats from the client namespace: %v: %.200s", err, out)
	}
	// Nothing was created in the root namespace (another test's device
	// may come or go meanwhile: only ours would be named like the testbed's).
	for _, l := range rootLinks(t) {
		if l == tb.ServerDev || l == tb.ClientDev {
			t.Errorf("testbed device %s in the root namespace (before: %v)", l, linksBefore)
		}
	}
	// The servers run in the server namespace, found by its inode.
	if pids := kernel.NetnsPIDs(tb.ServerNS); !slices.Contains(pids, ng.PID) || (len(workers) > 0 && !slices.Contains(pids, workers[0])) {
		t.Errorf("processes in %s: %v, want nginx %d and its workers %v among them", tb.ServerNS, pids, ng.PID, workers)
	}
	if ok, err := listening(tb.ServerNS, unix.IPPROTO_UDP, ServerAddr, 11211); err != nil || ok {
		t.Errorf("udp socket on %s:11211 (memcached -U 0 opens none): %v %v", ServerAddr, ok, err)
	}
	if ok, err := listening(tb.ClientNS, unix.IPPROTO_TCP, ServerAddr, 80); err != nil || ok {
		t.Errorf("nginx listening in the client namespace: %v %v", ok, err)
	}
	l, _ := List(live, dir)
	if len(l) != 1 || l[0].ID != tb.ID || l[0].Stale() {
		t.Errorf("List = %+v, want our live testbed", l)
	}
	if err := tb.Down(); err != nil {
		t.Fatal(err)
	}
	if left := leftovers(tb, workers); len(left) > 0 {
		t.Errorf("left behind after Down: %v", left)
	}
	if err := tb.Down(); err != nil {
		t.Errorf("second Down: %v", err)
	}
}

func TestKilledHarness(t *testing.T) {
	needRoot(t)
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "IRQP_TESTBED_HELPER="+dir)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, _ := bufio.NewReader(stdout).ReadString('\n')
	if !strings.HasPrefix(line, "READY ") {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		t.Fatalf("helper: %q", line)
	}
	id := strings.TrimSpace(strings.TrimPrefix(line, "READY "))
	tb, err := Load(live, dir, id)
	if err != nil {
		t.Fatal(err)
	}
	var workers []int
	for _, p := range tb.Procs {
		if p.Role == "nginx" {
			workers = Children(live, p.PID)
		}
	}
	if tb.Stale() {
		t.Error("testbed stale while its owner runs")
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	// The servers survive the harness…
	if left := leftovers(tb, workers); len(left) < 4 {
		t.Fatalf("expected the killed harness to leave its testbed behind, found only %v", left)
	}
	t.Cleanup(func() { _ = tb.Down() })
	if !tb.Stale() {
		t.Fatal("testbed of a killed owner not stale")
	}
	// …and the next Up cleans them before making its own.
	tb2, err := Up(Options{FS: live, Queues: 1, StateDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if left := leftovers(tb, workers); len(left) > 0 {
		t.Errorf("stale testbed not cleaned by the next Up: %v", left)
	}
	if err := tb2.Down(); err != nil {
		t.Fatal(err)
	}
	if left := leftovers(tb2, nil); len(left) > 0 {
		t.Errorf("left behind: %v", left)
	}
	if ns := Namespaces(); len(ns) > 0 {
		// Another irqpilot might run concurrently; only ours matter.
		for _, n := range ns {
			if strings.HasPrefix(n, tb.ID) || strings.HasPrefix(n, tb2.ID) {
				t.Errorf("namespace %s remains", n)
			}
		}
	}
}

func TestStaleDetectsRecycledOwner(t *testing.T) {
	tb := &Testbed{Owner: os.Getpid(), fs: live}
	st, err := startTime(live, os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	tb.OwnerStartTime = st
	if tb.Stale() {
		t.Error("own process reported stale")
	}
	tb.OwnerStartTime = st + 1 // the PID now belongs to another process
	if !tb.Stale() {
		t.Error("recycled owner PID not detected")
	}
	tb.Owner = 0
	if tb.Stale() {
		t.Error("detached testbed reported stale")
	}
}
