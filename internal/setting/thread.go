package setting

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/irqpilot/irqpilot/internal/cpuset"
	"github.com/irqpilot/irqpilot/internal/kernel"
)

// threadAffinity: one thread's allowed CPUs (sched_setaffinity). A thread is
// identified by its id and start time, so that revert never re-pins a
// different thread that reused the id.
type threadAffinity struct{}

func (threadAffinity) Kind() Kind                     { return KindThreadAffinity }
func (threadAffinity) Key(c *Change) string           { return fmt.Sprintf("tid:%d", c.TID) }
func (threadAffinity) Same(a, b string) (bool, error) { return sameCPUList(a, b) }
func (threadAffinity) Expected(c *Change) string      { return c.Value }
func (threadAffinity) Scope(c *Change) Scope          { return Scope{IRQ: -1, TID: c.TID} }

func (threadAffinity) Check(c *Change) error {
	if c.TID <= 0 || c.TID > 1<<22 { // PID_MAX_LIMIT
		return fmt.Errorf("%s: thread id %d is not valid", c.Target, c.TID)
	}
	if c.Path != "" {
		return fmt.Errorf("%s: a thread-affinity change has no file (path %q)", c.Target, c.Path)
	}
	if len(c.Value) > MaxCPUListLen {
		return fmt.Errorf("%s: value %.20q…: CPU list longer than %d bytes", c.Target, c.Value, MaxCPUListLen)
	}
	s, err := cpuset.Parse(strings.TrimSpace(c.Value))
	if err != nil {
		return fmt.Errorf("%s: value %q: %w", c.Target, c.Value, err)
	}
	if s.IsEmpty() {
		return fmt.Errorf("%s: an empty CPU list is not a valid thread affinity", c.Target)
	}
	return nil
}

// same reports whether tid is still the thread that was journaled.
func sameThread(env *Env, c *Change) error {
	if c.TIDStart == 0 {
		return nil // journals from before start times were recorded
	}
	start, err := env.FS.TaskStart(c.TID)
	if err != nil {
		return err
	}
	if start != c.TIDStart {
		return fmt.Errorf("thread %d: %w (the id now belongs to a thread started at tick %d, not %d; left alone)", c.TID, kernel.ErrNoSuchTask, start, c.TIDStart)
	}
	return nil
}

func (threadAffinity) Read(env *Env, c *Change) (string, error) {
	if err := sameThread(env, c); err != nil {
		return "", err
	}
	s, err := env.FS.ThreadAffinity(c.TID)
	return s.String(), err
}

func (threadAffinity) Write(env *Env, c *Change, value string) error {
	s, err := cpuset.Parse(value)
	if err != nil {
		return err
	}
	if err := sameThread(env, c); err != nil {
		return err
	}
	return env.FS.SetThreadAffinity(c.TID, s)
}

func (t threadAffinity) Restore(env *Env, c *Change) error { return t.Write(env, c, c.Old) }

// PinProcess returns one thread-affinity change per thread of pid. Threads
// come and go while we look, so /proc/PID/task is listed until two listings
// agree (at most a few rounds); a thread that exits before its write is
// skipped at apply time, and one created after it inherits the affinity of
// the thread that created it — which is why apply writes threads in order.
func PinProcess(fs *kernel.FS, pid int, name string, cpus cpuset.Set, reason string) ([]Change, error) {
	var tids []int
	for round := 0; round < 10; round++ {
		next, err := fs.Tasks(pid)
		if err != nil {
			return nil, fmt.Errorf("%s (pid %d): %w", name, pid, err)
		}
		if slices.Equal(tids, next) {
			break
		}
		tids = next
	}
	changes := make([]Change, 0, len(tids))
	for _, tid := range tids {
		start, err := fs.TaskStart(tid)
		if errors.Is(err, kernel.ErrNoSuchTask) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("%s (pid %d) thread %d: %w", name, pid, tid, err)
		}
		changes = append(changes, ThreadAffinity(tid, start, fmt.Sprintf("%s pid %d thread %d", name, pid, tid), cpus, reason))
	}
	return changes, nil
}

// ThreadAffinity is the change that places thread tid (started at start,
// 0 if unknown) on cpus.
func ThreadAffinity(tid int, start uint64, target string, cpus cpuset.Set, reason string) Change {
	return Change{Kind: KindThreadAffinity, Target: target, TID: tid, TIDStart: start, Value: cpus.String(), Reason: reason}
}

// app: the plan-level placement of every thread of the selected processes;
// Expand turns it into thread-affinity changes. It is never written itself.
type app struct{}

func (app) Kind() Kind                     { return KindApp }
func (app) Key(c *Change) string           { return "app:" + c.Target }
func (app) Same(a, b string) (bool, error) { return sameCPUList(a, b) }
func (app) Expected(c *Change) string      { return c.Value }
func (app) Scope(c *Change) Scope          { return Scope{IRQ: -1} }

func (app) Check(c *Change) error {
	if c.App == nil {
		return fmt.Errorf("%s: no process selector", c.Target)
	}
	if _, err := sameCPUList(c.Value, c.Value); err != nil {
		return fmt.Errorf("%s: value %.40q: %w", c.Target, c.Value, err)
	}
	return nil
}

var errExpandFirst = errors.New("an application placement is applied thread by thread (expand it first)")

func (app) Read(*Env, *Change) (string, error) { return "", errExpandFirst }
func (app) Write(*Env, *Change, string) error  { return errExpandFirst }
func (app) Restore(*Env, *Change) error        { return errExpandFirst }

// SelectProcesses finds the PIDs a selector names; none is not an error.
func SelectProcesses(fs *kernel.FS, a *AppSelector) ([]int, error) {
	switch {
	case a.PID != 0:
		if _, err := fs.Comm(a.PID); err != nil {
			return nil, nil // not running: reported as skipped
		}
		return []int{a.PID}, nil
	case a.Comm != "":
		pids, err := fs.PIDs()
		if err != nil {
			return nil, err
		}
		var out []int
		for _, p := range pids {
			if c, err := fs.Comm(p); err == nil && c == a.Comm {
				out = append(out, p)
			}
		}
		return out, nil
	case a.Unit != "":
		for _, slice := range []string{"system.slice", "user.slice", ""} {
			pids, err := fs.CgroupProcs(strings.TrimPrefix(slice+"/"+a.Unit, "/"))
			if err == nil {
				return pids, nil
			}
		}
		return nil, nil
	case a.Cgroup != "":
		pids, err := fs.CgroupProcs(a.Cgroup)
		if err != nil {
			return nil, nil
		}
		return pids, nil
	}
	return nil, fmt.Errorf("no process selector")
}

// CheckRecorded: a journaled thread entry with a valid old CPU list.
func (t threadAffinity) CheckRecorded(c *Change) error {
	if err := t.Check(c); err != nil {
		return err
	}
	if c.Old != "" {
		if s, err := cpuset.Parse(strings.TrimSpace(c.Old)); err != nil || s.IsEmpty() {
			return fmt.Errorf("%s: old value %q is not a CPU list", c.Target, short(c.Old))
		}
	}
	return nil
}

// CheckRecorded: apply never journals an application placement (it is
// expanded into threads first), so a journal holding one is forged.
func (app) CheckRecorded(c *Change) error {
	return fmt.Errorf("%s: an app-affinity entry is never journaled (threads are)", c.Target)
}
