package workload

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/irqpilot/irqpilot/internal/bench/testbed"
)

// sockperfPort is where the sockperf server listens (UDP), on
// testbed.ServerAddr only.
const sockperfPort = 11111

// Sockperf modes.
const (
	SockperfPingPong  = "ping-pong"
	SockperfUnderLoad = "under-load"
)

// DefaultSockperfRate is under-load's messages per second when --rate is
// not given.
const DefaultSockperfRate = 10000

// sockperfReplyEvery is under-load's --reply-every: the server answers one
// message in this many, and each answer is one latency observation. With
// sockperf's default (100) a 3 s run at 10 000 msg/s has some 250
// observations, too few for a p99.9; with 10 it has some 2 500.
const sockperfReplyEvery = 10

// SockperfOptions shape the sockperf workload.
type SockperfOptions struct {
	Testbed testbed.Options
	// Mode is SockperfPingPong (one message in flight: the round trip
	// alone) or SockperfUnderLoad (a fixed rate, Rate messages per second).
	Mode string
	Rate int
}

// SockperfWorkload is a sockperf server (UDP) in the testbed's server
// namespace and sockperf ping-pong or under-load from the client
// namespace. Its objective is latency, lower is better: a run's figure of
// merit is the p99 (Result.LowerIsBetter), with p50 and p99.9 beside it,
// the message rate reached and the server's CPU time per message.
type SockperfWorkload struct {
	Opts SockperfOptions
	served
}

// NewSockperf returns the sockperf workload.
func NewSockperf(o SockperfOptions) (*SockperfWorkload, error) {
	switch o.Mode {
	case "":
		o.Mode = SockperfPingPong
	case SockperfPingPong, SockperfUnderLoad:
	default:
		return nil, fmt.Errorf("sockperf mode %q: want %s or %s", o.Mode, SockperfPingPong, SockperfUnderLoad)
	}
	if o.Rate <= 0 {
		o.Rate = DefaultSockperfRate
	}
	if o.Testbed.Queues <= 0 {
		o.Testbed.Queues = 1
	}
	if _, err := exec.LookPath("sockperf"); err != nil {
		return nil, fmt.Errorf("sockperf workload needs sockperf (Debian package sockperf): %w", err)
	}
	return &SockperfWorkload{Opts: o}, nil
}

// Name implements Workload.
func (w *SockperfWorkload) Name() string { return "sockperf" }

// Server is the running sockperf server (zero before Prepare).
func (w *SockperfWorkload) Server() testbed.Proc { return w.srv }

// LowerIsBetter: the workload's objective is a latency.
func (w *SockperfWorkload) LowerIsBetter() bool { return true }

// Prepare brings the testbed up and starts the server.
func (w *SockperfWorkload) Prepare() (AppInfo, error) {
	tb, err := testbed.Up(w.Opts.Testbed)
	if err != nil {
		return AppInfo{}, err
	}
	w.TB = tb
	w.srv, err = tb.StartProgram("sockperf", "sockperf", 0, "sockperf", "server", "-i", testbed.ServerAddr, "-p", strconv.Itoa(sockperfPort))
	if err == nil {
		err = w.waitUDP(10 * time.Second)
	}
	if err != nil {
		_ = tb.Down()
		w.TB = nil
		return AppInfo{}, fmt.Errorf("sockperf workload: %w", err)
	}
	return w.app([]int{w.srv.PID}), nil
}

// waitUDP waits until the server's UDP socket is bound (in the server
// namespace's socket table): a message sent before would be lost.
func (w *SockperfWorkload) waitUDP(timeout time.Duration) error {
	if err := w.TB.WaitBound(sockperfPort, timeout); err != nil {
		b, _ := os.ReadFile(filepath.Join(w.TB.Dir, "sockperf.log"))
		return fmt.Errorf("sockperf server: %w: %s", err, Tail(b, 300))
	}
	return nil
}

// Run implements Workload: the client for d, and the server's CPU time
// over it (the sum over its threads of /proc/PID/task/TID/schedstat's
// time on CPU, in ns; the kernel's accounting at nanosecond resolution,
// where /proc/PID/stat's utime and stime count 10 ms ticks).
func (w *SockperfWorkload) Run(ctx context.Context, d time.Duration, s Placement) (Result, error) {
	secs := strconv.Itoa(max(1, int(d.Round(time.Second)/time.Second)))
	argv := w.client("sockperf", w.Opts.Mode, "-i", testbed.ServerAddr,
		"-p", strconv.Itoa(sockperfPort), "-t", secs)
	if w.Opts.Mode == SockperfUnderLoad {
		argv = append(argv, "--mps="+strconv.Itoa(w.Opts.Rate), "--reply-every="+strconv.Itoa(sockperfReplyEvery))
	}
	cpu0, err0 := procCPUNanos(w.srv.PID)
	out, err := runPinned(ctx, d, s.ClientCPUs, argv)
	cpu1, err1 := procCPUNanos(w.srv.PID)
	if err != nil {
		return Result{}, err
	}
	st, err := ParseSockperf(out)
	if err != nil {
		return Result{}, err
	}
	if err0 == nil && err1 == nil && st.TotalSent > 0 && cpu1 >= cpu0 {
		st.ServerCPUPerOp = float64(cpu1-cpu0) / 1e3 / float64(st.TotalSent)
	}
	return st.Result, nil
}

// procCPUNanos sums the time on CPU of every thread of pid
// (/proc/PID/task/*/schedstat, first field, ns).
func procCPUNanos(pid int) (uint64, error) {
	tasks, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/schedstat", pid))
	if err != nil || len(tasks) == 0 {
		return 0, fmt.Errorf("pid %d: no threads readable", pid)
	}
	var sum uint64
	for _, t := range tasks {
		b, err := os.ReadFile(t)
		if err != nil {
			continue // a thread that ended
		}
		f := strings.Fields(string(b))
		if len(f) == 0 {
			continue
		}
		v, err := strconv.ParseUint(f[0], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("%s: %q", t, f[0])
		}
		sum += v
	}
	return sum, nil
}
