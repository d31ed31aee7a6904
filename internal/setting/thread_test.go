package setting

import (
	"errors"
	"os/exec"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/irqpilot/irqpilot/internal/cpuset"
	"github.com/irqpilot/irqpilot/internal/kernel"
	"github.com/irqpilot/irqpilot/internal/livetest"
)

func TestThreadAffinityCheck(t *testing.T) {
	runCheck(t, threadAffinity{}, []checkCase{
		{"valid", Change{TID: 1234, Value: "0-3"}, ""},
		{"valid with start", Change{TID: 1234, TIDStart: 99, Value: "1"}, ""},
		{"max tid", Change{TID: 1 << 22, Value: "0"}, ""},
		{"tid 0", Change{TID: 0, Value: "0"}, "thread id 0 is not valid"},
		{"negative tid", Change{TID: -5, Value: "0"}, "thread id -5 is not valid"},
		{"tid past PID_MAX_LIMIT", Change{TID: 1<<22 + 1, Value: "0"}, "is not valid"},
		{"a path", Change{TID: 1234, Path: "proc/sys/kernel/core_pattern", Value: "0"}, "has no file"},
		{"empty cpulist", Change{TID: 1234, Value: ""}, "empty CPU list"},
		{"blank cpulist", Change{TID: 1234, Value: " "}, "empty CPU list"},
		{"bad cpulist", Change{TID: 1234, Value: "0-"}, "value"},
		{"mask", Change{TID: 1234, Value: "ff,ff"}, "value"},
		{"value past the cap", Change{TID: 1234, Value: longList}, "longer than"},
	})
	if got := (threadAffinity{}).Expected(&Change{Value: "0-3"}); got != "0-3" {
		t.Errorf("Expected = %q", got)
	}
	runSame(t, threadAffinity{}, []sameCase{
		{a: "0-3", b: "0,1,2,3\n", same: true},
		{a: "0-3", b: "1-3", same: false},
		{a: "0-3", b: "x", err: true},
	})
}

// TestThreadWrongStart: a change whose thread id now belongs to a thread
// started at another time is left alone by Read, Write and Restore, before
// anything else is tried (on a file tree the affinity calls themselves are
// unsupported, so any other error would mean the guard did not run).
func TestThreadWrongStart(t *testing.T) {
	fs := tree(t, map[string]string{"proc/500/stat": statLine(500, "worker (x)", 1234)})
	env := &Env{FS: fs}
	h := threadAffinity{}
	for _, c := range []Change{
		ThreadAffinity(500, 999, "pid 500", mustSet(t, "0"), ""),
		ThreadAffinity(501, 999, "pid 501 (gone)", mustSet(t, "0"), ""),
	} {
		c.Old = "0-3"
		_, err := h.Read(env, &c)
		errIs(t, c.Target+" Read", err, kernel.ErrNoSuchTask)
		errIs(t, c.Target+" Write", h.Write(env, &c, "1"), kernel.ErrNoSuchTask)
		errIs(t, c.Target+" Restore", h.Restore(env, &c), kernel.ErrNoSuchTask)
	}
	// The right start time passes the guard and reaches the (unsupported
	// on a file tree) affinity call; so does a journal without start times.
	for _, start := range []uint64{1234, 0} {
		c := ThreadAffinity(500, start, "pid 500", mustSet(t, "0"), "")
		_, err := h.Read(env, &c)
		errIs(t, "Read with start time", err, kernel.ErrUnsupported)
		errIs(t, "Write with start time", h.Write(env, &c, "1"), kernel.ErrUnsupported)
	}
	c := ThreadAffinity(500, 1234, "pid 500", mustSet(t, "0"), "")
	if err := h.Write(env, &c, "bogus"); err == nil || errors.Is(err, kernel.ErrUnsupported) {
		t.Errorf("Write of a bad value = %v, want it refused before anything", err)
	}
}

// child starts `sleep 30`, killed by its PID when the test ends.
func child(t *testing.T) int {
	t.Helper()
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Skipf("cannot start sleep: %v", err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	return cmd.Process.Pid
}

func TestThreadAffinityLive(t *testing.T) {
	livetest.NeedRoot(t) // sets the affinity of a child process
	live := kernel.New("/")
	env := &Env{FS: live}
	h := threadAffinity{}
	pid := child(t)
	orig, err := live.ThreadAffinity(pid)
	if err != nil {
		t.Skipf("sched_getaffinity: %v", err)
	}
	if orig.Len() < 2 {
		t.Skipf("child may run on %s only; need two CPUs", orig)
	}
	target := cpuset.Of(orig.Min())

	changes, err := PinProcess(live, pid, "sleep", target, "test")
	if err != nil {
		t.Fatal(err)
	}
	if len(changes) != 1 {
		t.Fatalf("PinProcess(sleep) = %d changes, want 1 (one thread)", len(changes))
	}
	c := changes[0]
	start, err := live.TaskStart(pid)
	if err != nil {
		t.Fatal(err)
	}
	if c.TID != pid || c.TIDStart != start || start == 0 || c.Value != target.String() || c.Kind != KindThreadAffinity {
		t.Fatalf("PinProcess change = %+v, want tid %d start %d value %s", c, pid, start, target)
	}
	if err := Check(&c); err != nil {
		t.Fatalf("PinProcess's change refused: %v", err)
	}

	readThenWrite(t, h, env, &c, orig.String())
	if got, err := h.Read(env, &c); err != nil || got != target.String() {
		t.Errorf("Read after Write = %q, %v; want %s", got, err, target)
	}
	if err := h.Restore(env, &c); err != nil {
		t.Fatal(err)
	}
	if got, _ := live.ThreadAffinity(pid); !got.Equal(orig) {
		t.Errorf("affinity after Restore = %s, want %s", got, orig)
	}

	// A journal entry whose start time is not this thread's: a different
	// process that reused the id. Nothing may touch it (issue 15 item 5).
	if err := live.SetThreadAffinity(pid, target); err != nil {
		t.Fatal(err)
	}
	forged := c
	forged.TIDStart = start + 1
	forged.Value, forged.Old = orig.String(), orig.String()
	_, err = h.Read(env, &forged)
	errIs(t, "Read of a reused id", err, kernel.ErrNoSuchTask)
	errIs(t, "Write to a reused id", h.Write(env, &forged, orig.String()), kernel.ErrNoSuchTask)
	errIs(t, "Restore of a reused id", h.Restore(env, &forged), kernel.ErrNoSuchTask)
	if got, _ := live.ThreadAffinity(pid); !got.Equal(target) {
		t.Errorf("a forged change moved thread %d to %s (it was on %s)", pid, got, target)
	}
}

func TestPinProcessGone(t *testing.T) {
	_, err := PinProcess(tree(t, nil), 4242, "ghost", cpuset.Of(0), "")
	errIs(t, "PinProcess of a missing process", err, kernel.ErrNoSuchTask)
	if err != nil && !strings.Contains(err.Error(), "ghost (pid 4242)") {
		t.Errorf("error %q does not name the process", err)
	}
}

func TestPinProcessTree(t *testing.T) {
	fs := tree(t, map[string]string{
		"proc/100/task/100/stat": "",
		"proc/100/task/101/stat": "",
		"proc/100/task/102/stat": "", // exits before its start time is read
		"proc/100/stat":          statLine(100, "memcached", 5000),
		"proc/101/stat":          statLine(101, "memcached", 5001),
	})
	changes, err := PinProcess(fs, 100, "memcached", cpuset.Of(2, 3), "why")
	if err != nil {
		t.Fatal(err)
	}
	want := []Change{
		ThreadAffinity(100, 5000, "memcached pid 100 thread 100", cpuset.Of(2, 3), "why"),
		ThreadAffinity(101, 5001, "memcached pid 100 thread 101", cpuset.Of(2, 3), "why"),
	}
	if d := cmp.Diff(want, changes); d != "" {
		t.Errorf("PinProcess (-want +got):\n%s", d)
	}
}

func TestAppKind(t *testing.T) {
	h := app{}
	runCheck(t, h, []checkCase{
		{"valid", Change{App: &AppSelector{Comm: "nginx"}, Value: "2-3"}, ""},
		{"no selector", Change{Value: "2-3"}, "no process selector"},
		{"bad value", Change{App: &AppSelector{PID: 1}, Value: "two"}, "two"},
	})
	c := Change{Kind: KindApp, Target: "nginx", App: &AppSelector{Comm: "nginx"}, Value: "1"}
	env := &Env{FS: tree(t, nil)}
	if _, err := h.Read(env, &c); !errors.Is(err, errExpandFirst) {
		t.Errorf("Read = %v, want expand-first", err)
	}
	if err := h.Write(env, &c, "1"); !errors.Is(err, errExpandFirst) {
		t.Errorf("Write = %v, want expand-first", err)
	}
	if err := h.Restore(env, &c); !errors.Is(err, errExpandFirst) {
		t.Errorf("Restore = %v, want expand-first", err)
	}
	if got := h.Key(&c); got != "app:nginx" {
		t.Errorf("Key = %q", got)
	}
}

func TestSelectProcesses(t *testing.T) {
	fs := tree(t, map[string]string{
		"proc/10/comm": "nginx\n",
		"proc/11/comm": "nginx\n",
		"proc/12/comm": "redis-server\n",
		"proc/self":    "",
		"sys/fs/cgroup/system.slice/nginx.service/cgroup.procs": "10\n11\n",
		"sys/fs/cgroup/user.slice/job.scope/cgroup.procs":       "12\n",
		"sys/fs/cgroup/batch/cgroup.procs":                      "11\n",
	})
	for _, tc := range []struct {
		sel  AppSelector
		want []int
	}{
		{AppSelector{PID: 12}, []int{12}},
		{AppSelector{PID: 13}, nil},
		{AppSelector{Comm: "nginx"}, []int{10, 11}},
		{AppSelector{Comm: "nginx "}, nil},
		{AppSelector{Comm: "postgres"}, nil},
		{AppSelector{Unit: "nginx.service"}, []int{10, 11}},
		{AppSelector{Unit: "job.scope"}, []int{12}},
		{AppSelector{Unit: "none.service"}, nil},
		{AppSelector{Cgroup: "batch"}, []int{11}},
		{AppSelector{Cgroup: "/batch/"}, []int{11}},
		{AppSelector{Cgroup: "missing"}, nil},
	} {
		got, err := SelectProcesses(fs, &tc.sel)
		if d := cmp.Diff(tc.want, got); err != nil || d != "" {
			t.Errorf("SelectProcesses(%+v): %v (-want +got):\n%s", tc.sel, err, d)
		}
	}
	if _, err := SelectProcesses(fs, &AppSelector{}); err == nil {
		t.Error("an empty selector selected something")
	}
}
