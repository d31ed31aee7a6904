package load

import (
	"errors"
	iofs "io/fs"
	"sort"
	"time"

	"github.com/irqpilot/irqpilot/internal/kernel"
)

// TaskTimes is one thread's CPU time and last CPU, from
// /proc/PID/task/TID/stat. Read only when Sampler.Tasks is set (doctor
// needs it; a 1 s `top` does not).
type TaskTimes struct {
	PID    int           `json:"pid"`
	TID    int           `json:"tid"`
	Comm   string        `json:"comm"`
	UTime  time.Duration `json:"utime_ns"` // in user mode
	STime  time.Duration `json:"stime_ns"` // in kernel mode
	CPU    int           `json:"cpu"`      // field 39 "processor": the CPU it last ran on
	Kernel bool          `json:"kernel"`   // a kernel thread (PF_KTHREAD)
}

// TaskLoad is a thread's CPU use over an interval.
type TaskLoad struct {
	PID    int     `json:"pid"`
	TID    int     `json:"tid"`
	Comm   string  `json:"comm"`
	CPU    int     `json:"cpu"`  // CPU it last ran on (at the end of the interval)
	Busy   float64 `json:"busy"` // percent of one CPU (user + system)
	Kernel bool    `json:"kernel"`
}

// readTasks reads every thread's stat below fs. Threads that exit while
// being read are skipped.
func readTasks(fs *kernel.FS) ([]TaskTimes, error) {
	pids, err := fs.PIDs()
	if err != nil {
		return nil, err
	}
	return readTasksOf(fs, pids)
}

// readTasksOf reads the threads of the processes named; processes gone
// meanwhile are left out.
func readTasksOf(fs *kernel.FS, pids []int) ([]TaskTimes, error) {
	var out []TaskTimes
	for _, pid := range pids {
		tids, err := fs.Tasks(pid)
		if err != nil {
			continue
		}
		for _, tid := range tids {
			st, err := fs.TaskStat(pid, tid)
			if errors.As(err, new(*iofs.PathError)) {
				continue // exited
			}
			if err != nil {
				return nil, err
			}
			out = append(out, TaskTimes{PID: pid, TID: st.TID, Comm: st.Comm, UTime: st.UTime, STime: st.STime,
				CPU: st.CPU, Kernel: st.KernelThread()})
		}
	}
	return out, nil
}

// MinTaskBusy is the smallest CPU use (percent of one CPU) for which a
// thread is listed in Load.Tasks.
const MinTaskBusy = 1.0

// taskRates lists threads present in both samples that used at least
// MinTaskBusy percent of a CPU, busiest first.
func taskRates(l *Load, prev, cur []TaskTimes, sec float64) {
	type key struct{ pid, tid int }
	before := make(map[key]*TaskTimes, len(prev))
	for i := range prev {
		before[key{prev[i].PID, prev[i].TID}] = &prev[i]
	}
	for i := range cur {
		c := &cur[i]
		p, ok := before[key{c.PID, c.TID}]
		if !ok || c.UTime+c.STime < p.UTime+p.STime {
			continue // new thread, or TID reused by another thread
		}
		busy := (c.UTime + c.STime - p.UTime - p.STime).Seconds() / sec * 100
		// A thread runs on one CPU at a time. Its ticks are read a little
		// after the sample's clock (thousands of stat files), and counted in
		// whole ticks, so a busy thread can read above 100 % of one CPU over
		// a short interval: that is measurement skew, not use.
		busy = min(busy, 100)
		if busy >= MinTaskBusy {
			l.Tasks = append(l.Tasks, TaskLoad{PID: c.PID, TID: c.TID, Comm: c.Comm, CPU: c.CPU, Busy: busy, Kernel: c.Kernel})
		}
	}
	sort.Slice(l.Tasks, func(i, j int) bool { return l.Tasks[i].Busy > l.Tasks[j].Busy })
}
