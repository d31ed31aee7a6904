package kernel

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/irqpilot/irqpilot/internal/livetest/liveroot"
	"golang.org/x/sys/unix"
)

// statLine is a /proc/PID/stat line as the kernel prints it (52 fields
// since 3.5), with the given comm and starttime (field 22).
func statLine(pid int, comm string, start uint64) string {
	f := make([]string, 52)
	for i := range f {
		f[i] = "0"
	}
	f[0], f[1], f[2], f[21] = strconv.Itoa(pid), "("+comm+")", "S", strconv.FormatUint(start, 10)
	return strings.Join(f, " ") + "\n"
}

func TestProcessesFakeTree(t *testing.T) {
	root := tree(t, map[string]string{
		"proc/1/comm":         "init\n",
		"proc/1/stat":         statLine(1, "init", 2),
		"proc/4242/comm":      "irqbalance\n",
		"proc/4242/stat":      statLine(4242, "irqbalance", 123456789),
		"proc/4242/environ":   "PATH=/bin\x00IRQBALANCE_BANNED_CPULIST=2-3\x00\x00",
		"proc/4242/status":    "Name:\tirqbalance\nTgid:\t4242\nPid:\t4242\n",
		"proc/4243/status":    "Name:\tworker\nTgid:\t4242\nPid:\t4243\n",
		"proc/300/comm":       "a) (b c\n", // comm with the characters that trip naive parsers
		"proc/300/stat":       statLine(300, "a) (b c", 77),
		"proc/77/comm":        "bash\n",                // no stat: start time unknown
		"proc/88/stat":        statLine(88, "gone", 5), // no comm: left out
		"proc/net/dev":        "",
		"proc/interrupts":     "",
		"proc/0/comm":         "swapper\n", // not a PID the kernel lists; skipped
		"proc/self/comm":      "x\n",
		"proc/sys/kernel/foo": "",
	})
	fs := New(root)
	fs.StartRecording()
	got, err := fs.Processes()
	if err != nil {
		t.Fatal(err)
	}
	want := []Process{{1, "init", 2}, {77, "bash", 0}, {300, "a) (b c", 77}, {4242, "irqbalance", 123456789}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("Processes = %+v, want %+v", got, want)
	}
	env, err := fs.Environ(4242)
	if err != nil || strings.Join(env, "|") != "PATH=/bin|IRQBALANCE_BANNED_CPULIST=2-3" {
		t.Errorf("Environ = %q, %v", env, err)
	}
	if _, err := fs.Environ(1); !errors.Is(err, os.ErrNotExist) || !strings.Contains(err.Error(), "/proc/1/environ") || strings.Contains(err.Error(), root) {
		t.Errorf("Environ of a process without environ: %v (want the kernel path, not the tree's)", err)
	}
	if tg, err := fs.Tgid(4243); err != nil || tg != 4242 {
		t.Errorf("Tgid(4243) = %d, %v", tg, err)
	}
	if _, err := fs.Tgid(9); !errors.Is(err, ErrNoSuchTask) {
		t.Errorf("Tgid of a missing thread: %v", err)
	}
	// The process table and environments never reach a capture.
	if r := fs.Recorded(); len(r) != 0 {
		t.Errorf("process reads were recorded: %v", r)
	}
	if c := fs.RecordedErrors(); len(c) != 0 {
		t.Errorf("process read errors were recorded: %v", c)
	}

	// A malformed stat is an error naming the file.
	bad := tree(t, map[string]string{"proc/5/comm": "x\n", "proc/5/stat": "5 (x) S 1 2\n"})
	if _, err := New(bad).Processes(); err == nil || !strings.Contains(err.Error(), "/proc/5/stat") {
		t.Errorf("short stat: %v", err)
	}
	// No /proc at all.
	if _, err := New(t.TempDir()).Processes(); !errors.Is(err, os.ErrNotExist) || !strings.Contains(err.Error(), "open /proc") {
		t.Errorf("no /proc: %v", err)
	}
}

func TestParseStatStartTime(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want uint64
		err  string
	}{
		{statLine(1, "systemd", 1), 1, ""},
		{statLine(9, "kworker/0:1-events", 1<<40), 1 << 40, ""},
		{statLine(9, ") ) )", 3), 3, ""},
		{statLine(9, "a b c d e f g h i j k l m n o p q r s t u v w", 4), 4, ""}, // spaces shift naive field counts
		{"12 (x) S 1 2 3", 0, "4 fields after comm, want at least 20"},
		{"12 x S", 0, "no (comm)"},
		{strings.Replace(statLine(1, "x", 5), " 5 ", " -5 ", 1), 0, `field 22 (starttime) "-5" is not a number`},
	} {
		got, err := parseStatStartTime([]byte(tc.in))
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%q: %v, want error %q", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%q: %d, %v, want %d", tc.in, got, err, tc.want)
		}
	}
}

func TestParseTaskStat(t *testing.T) {
	line := "4242 (my (odd) app) S 1 4242 4242 0 -1 4194560 100 0 0 0 1234 567 0 0 20 0 4 0 900 1000000 200 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 3 0 0 0 0 0\n"
	tt, err := parseTaskStat([]byte(line))
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(TaskStat{TID: 4242, Comm: "my (odd) app", State: "S", PPID: 1, Flags: 4194560, UTime: 12340 * time.Millisecond, STime: 5670 * time.Millisecond, CPU: 3}, tt); d != "" || tt.KernelThread() {
		t.Errorf("(-want +got):\n%s", d)
	}
	k, err := parseTaskStat([]byte("12 (ksoftirqd/1) S 2 0 0 0 -1 69238848 0 0 0 0 0 31 0 0 20 0 1 0 10 0 0 18446744073709551615 0 0 0 0 0 0 0 2147483647 0 0 0 0 17 1 0 0 0 0 0"))
	if err != nil || !k.KernelThread() || k.CPU != 1 || k.STime != 310*time.Millisecond || k.PPID != 2 {
		t.Fatalf("kthread %+v %v", k, err)
	}
	// This test process's own main thread, read live through FS.
	pid := os.Getpid()
	self, err := New("/").TaskStat(pid, pid)
	if err != nil {
		t.Skip(err)
	}
	if self.TID != pid || self.KernelThread() {
		t.Errorf("self %+v", self)
	}
	// The process's state is its main thread's, which may sleep while
	// this goroutine runs on another thread: any one-letter state.
	if ps, err := New("/").ProcStat(pid); err != nil || ps.PPID != os.Getppid() || len(ps.State) != 1 || !strings.Contains("RSDTtIZXPWK", ps.State) {
		t.Errorf("ProcStat(self) = %+v, %v; want parent %d and a state", ps, err, os.Getppid())
	}
	for _, bad := range []string{"", "12 ksoftirqd S", "x (a) S 1", "12 (a) S 1 2 3"} {
		if _, err := parseTaskStat([]byte(bad)); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// The live machine: this test process is listed with its comm and a start
// time that agrees with /proc/self/stat, and its threads map to it.
func TestProcessesLive(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("no /proc")
	}
	fs := New("/")
	fs.StartRecording()
	procs, err := fs.Processes()
	if err != nil {
		t.Fatal(err)
	}
	self, _ := os.ReadFile("/proc/self/stat")
	start, err := parseStatStartTime(self)
	if err != nil {
		t.Fatal(err)
	}
	comm, _ := os.ReadFile("/proc/self/comm")
	found := false
	for _, p := range procs {
		if p.PID == os.Getpid() {
			found = true
			if p.Comm != strings.TrimSpace(string(comm)) || p.StartTime != start || start == 0 {
				t.Errorf("self: %+v, want comm %q start %d", p, comm, start)
			}
		}
	}
	if !found {
		t.Errorf("pid %d not among %d processes", os.Getpid(), len(procs))
	}
	if tg, err := fs.Tgid(unix.Gettid()); err != nil || tg != os.Getpid() {
		t.Errorf("Tgid(gettid) = %d, %v; want %d", tg, err, os.Getpid())
	}
	if r := fs.Recorded(); len(r) != 0 {
		t.Errorf("live process scan recorded %d paths", len(r))
	}
}

func TestSignal(t *testing.T) {
	snap := New(t.TempDir())
	if err := snap.Signal(1, syscall.SIGTERM); !errors.Is(err, ErrUnsupported) {
		t.Errorf("signal on a snapshot: %v", err)
	}
	live := New("/")
	for _, pid := range []int{0, -1, -1234} {
		if err := live.Signal(pid, 0); err == nil || !strings.Contains(err.Error(), "not a single process") {
			t.Errorf("Signal(%d): %v", pid, err)
		}
	}
	// A PID above pid_max cannot exist.
	if s, err := os.ReadFile("/proc/sys/kernel/pid_max"); err == nil {
		max, _ := strconv.Atoi(strings.TrimSpace(string(s)))
		if err := live.Signal(max+1, 0); !errors.Is(err, ErrNoSuchTask) {
			t.Errorf("Signal(pid_max+1): %v", err)
		}
	}
	// A child of this test, by its PID.
	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Skip(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	if err := live.Signal(cmd.Process.Pid, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	err := cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGTERM {
		t.Errorf("child ended with %v, want SIGTERM", err)
	}
}

// Daemon names root's own daemon, never a look-alike: an unprivileged
// user's program called "irqbalance" is not it (irqpilot would stop and
// signal it), the same program run by root is.
func TestDaemonNotALookAlike(t *testing.T) {
	liveroot.Need(t) // runs a process as nobody
	dir, err := os.MkdirTemp("", "irqpilot-daemon-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		t.Skip("no sleep(1)")
	}
	data, err := os.ReadFile(sleep)
	if err != nil {
		t.Fatal(err)
	}
	fake := filepath.Join(dir, "irqbalance")
	if err := os.WriteFile(fake, data, 0o755); err != nil {
		t.Fatal(err)
	}
	// A copy anyone may write (so anyone could have put any program there).
	wdir := filepath.Join(dir, "w")
	if err := os.Mkdir(wdir, 0o755); err != nil {
		t.Fatal(err)
	}
	writable := filepath.Join(wdir, "irqbalance")
	if err := os.WriteFile(writable, data, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(writable, 0o777); err != nil {
		t.Fatal(err)
	}
	startAs := func(prog string, uid uint32) int {
		cmd := exec.Command(prog, "60")
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: uid}}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		return cmd.Process.Pid
	}
	start := func(uid uint32) int { return startAs(fake, uid) }
	f := New("/")
	// Root running a world-writable copy, started first (the lower PID):
	// not the daemon, and it hides nothing started after it.
	rootWritable := startAs(writable, 0)
	waitComm(t, rootWritable, "irqbalance")
	if p, ok := f.Daemon("irqbalance"); ok && p.PID == rootWritable {
		t.Errorf("Daemon took root's world-writable copy (pid %d) for irqbalance", rootWritable)
	}
	nobody := start(65534)
	waitComm(t, nobody, "irqbalance")
	if p, ok := f.Daemon("irqbalance"); ok && p.PID == nobody {
		t.Errorf("Daemon took nobody's look-alike (pid %d) for irqbalance", nobody)
	}
	root := start(0)
	waitComm(t, root, "irqbalance")
	p, ok := f.Daemon("irqbalance")
	if !ok || p.PID == nobody || p.PID == rootWritable {
		t.Errorf("Daemon = %+v, %v; want root's irqbalance (pid %d, or a real daemon's lower PID)", p, ok, root)
	}
	// Below another root the comm alone decides (nothing is signalled there).
	tree := t.TempDir()
	for pid, comm := range map[string]string{"7": "irqbalance\n", "3": "sshd\n"} {
		if err := os.MkdirAll(filepath.Join(tree, "proc", pid), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(tree, "proc", pid, "comm"), []byte(comm), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if p, ok := New(tree).Daemon("irqbalance"); !ok || p.PID != 7 {
		t.Errorf("tree: Daemon = %+v, %v; want pid 7", p, ok)
	}
}

// waitComm waits until pid has exec'd into a program with that comm.
func waitComm(t *testing.T, pid int, comm string) {
	t.Helper()
	for i := 0; i < 500; i++ {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
		if err == nil && strings.TrimSpace(string(b)) == comm {
			return
		}
		unix.Nanosleep(&unix.Timespec{Nsec: 10e6}, nil)
	}
	t.Fatalf("pid %d never became %q", pid, comm)
}
