package load_test

import (
	"math"
	"path/filepath"
	"testing"
	"time"

	"github.com/irqpilot/irqpilot/internal/load"
	"github.com/irqpilot/irqpilot/internal/load/loadtest"
)

// A thread uses at most one CPU: skewed tick reads over a short interval
// never show more than 100 %.
func TestTaskBusyAtMostOneCPU(t *testing.T) {
	c := loadtest.Craft(2).CPU(0, 50, 10, 0, 35, 5)
	c.A.Tasks = []load.TaskTimes{{PID: 7, TID: 7, Comm: "spin", UTime: time.Second, CPU: 0}}
	c.B.Tasks = []load.TaskTimes{{PID: 7, TID: 7, Comm: "spin", UTime: 2350 * time.Millisecond, CPU: 0}} // 135 ticks in 1 s
	l := c.Load(t)
	if len(l.Tasks) != 1 || l.Tasks[0].Busy != 100 {
		t.Errorf("tasks %+v, want spin at 100%%", l.Tasks)
	}
}

// One tick of user and system time in a 1 s interval is exactly
// MinTaskBusy: the thread is listed, with no float noise below the bar.
func TestTaskBusyOneTickIsListed(t *testing.T) {
	c := loadtest.Craft(2).CPU(0, 50, 10, 0, 35, 5)
	c.A.Tasks = []load.TaskTimes{{PID: 7, TID: 8, Comm: "w", UTime: 5 * time.Second, STime: 70 * time.Millisecond, CPU: 1}}
	c.B.Tasks = []load.TaskTimes{{PID: 7, TID: 8, Comm: "w", UTime: 5 * time.Second, STime: 80 * time.Millisecond, CPU: 1}}
	l := c.Load(t)
	if len(l.Tasks) != 1 || l.Tasks[0].Busy != load.MinTaskBusy {
		t.Errorf("tasks %+v, want w at %v %%", l.Tasks, load.MinTaskBusy)
	}
}

// The real capture's threads, read through kernel.TaskStat: memcaslap's
// thread 25562 printed utime 60 and stime 552 ticks in a/, 69 and 621 in
// b/, whose uptimes are 584.15 and 586.26 s: 0.78 s of CPU in 2.11 s.
func TestTaskBusyRealCapture(t *testing.T) {
	l := loadtest.TasksPair(t, filepath.Join("testdata", "memcached-saturated"))
	for _, tl := range l.Tasks {
		if tl.TID != 25562 {
			continue
		}
		if want := 100 * 0.78 / 2.11; math.Abs(tl.Busy-want) > 1e-9 || tl.PID != 25560 || tl.CPU != 0 || tl.Kernel {
			t.Errorf("thread 25562: %+v, want busy %v %% on CPU 0", tl, want)
		}
		return
	}
	t.Errorf("thread 25562 not listed: %+v", l.Tasks)
}

// /proc/stat's times are whole ticks: a counter one tick lower in the
// second sample is a reset, quoted in ticks; a time that only reads
// differently as a float (0.1+0.2 against 0.3) is not.
func TestStatResetInTicks(t *testing.T) {
	c := loadtest.Craft(2)
	c.A.CPUs[0].IOWait, c.B.CPUs[0].IOWait = 12.34, 12.33
	noisy := 0.1
	noisy += 0.2 // 0.30000000000000004 (a constant 0.1+0.2 would be exact)
	c.A.CPUs[1].IOWait, c.B.CPUs[1].IOWait = noisy, 0.3
	l := c.Load(t)
	if len(l.Resets) != 1 {
		t.Fatalf("resets %+v, want one", l.Resets)
	}
	if r := l.Resets[0]; r.Source != "stat" || r.Counter != "iowait" || r.CPU != 0 || r.Prev != 1234 || r.Cur != 1233 {
		t.Errorf("reset %+v, want cpu0 iowait 1234 -> 1233 ticks", r)
	}
}
