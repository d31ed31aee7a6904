package workload

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
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
	TB   *testbed.Testbed
	srv  testbed.Proc
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
	return AppInfo{PIDs: []int{w.srv.PID}, Device: tb.ServerDev, NSRoot: tb.Root(), NetNS: tb.NetNSPath(), NAPIThreads: tb.NAPIThreads()}, nil
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
	argv := []string{"ip", "netns", "exec", w.TB.ClientNS, "sockperf", w.Opts.Mode, "-i", testbed.ServerAddr,
		"-p", strconv.Itoa(sockperfPort), "-t", secs}
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

// Close stops the server (by PID) and removes the testbed.
func (w *SockperfWorkload) Close() error {
	if w.TB == nil {
		return nil
	}
	err := w.TB.Down()
	w.TB = nil
	return err
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

// SockperfStats is one sockperf client run.
type SockperfStats struct {
	Result
	// Observations is how many latencies the percentiles are taken from.
	Observations int
	// TotalSent is every message the client sent, warm-up included: what
	// the server handled while it was measured.
	TotalSent int64
	Dropped   int64
}

var (
	ansiEscape       = regexp.MustCompile(`\x1b\[[0-9;]*m`)
	sockperfValid    = regexp.MustCompile(`\[Valid Duration\] RunTime=([0-9.]+) sec; SentMessages=(\d+); ReceivedMessages=(\d+)`)
	sockperfTotal    = regexp.MustCompile(`\[Total Run\] RunTime=[0-9.]+ sec; Warm up time=\d+ msec; SentMessages=(\d+);`)
	sockperfObs      = regexp.MustCompile(`Total (\d+) observations`)
	sockperfPct      = regexp.MustCompile(`(?m)---> percentile ([0-9.]+) =\s+([0-9.]+)`)
	sockperfDropped  = regexp.MustCompile(`# dropped messages = (\d+)`)
	sockperfMinCount = 100 // the fewest observations with a p99 that is not the largest one
)

// ParseSockperf reads the client's output of sockperf 3 (ping-pong or
// under-load): the latency percentiles it prints (in µs, half the round
// trip, as sockperf reports latency; exact order statistics of its
// observations), the message rate over its valid duration, and the
// messages sent. The p99.9 is left out (0) below 1000 observations, where
// it would be the largest observation, and a run with fewer than 100
// observations is refused: its p99 would be too.
func ParseSockperf(out []byte) (SockperfStats, error) {
	out = ansiEscape.ReplaceAll(out, nil)
	st := SockperfStats{Result: Result{Unit: "µs", Objective: "p99 latency", LowerIsBetter: true}}
	v := sockperfValid.FindSubmatch(out)
	if v == nil {
		return st, fmt.Errorf("sockperf output has no '[Valid Duration] RunTime=… SentMessages=…' line (did it run to the end?)")
	}
	secs, _ := strconv.ParseFloat(string(v[1]), 64)
	sent, _ := strconv.ParseFloat(string(v[2]), 64)
	if secs > 0 {
		st.Rate = sent / secs
	}
	if t := sockperfTotal.FindSubmatch(out); t != nil {
		st.TotalSent, _ = strconv.ParseInt(string(t[1]), 10, 64)
	}
	if dr := sockperfDropped.FindSubmatch(out); dr != nil {
		st.Dropped, _ = strconv.ParseInt(string(dr[1]), 10, 64)
	}
	o := sockperfObs.FindSubmatch(out)
	if o == nil {
		return st, fmt.Errorf("sockperf output has no 'Total N observations' line")
	}
	st.Observations, _ = strconv.Atoi(string(o[1]))
	if st.Observations < sockperfMinCount {
		return st, fmt.Errorf("sockperf: %d latency observations, fewer than the %d a p99 needs (a longer --duration or a higher --rate)", st.Observations, sockperfMinCount)
	}
	for _, m := range sockperfPct.FindAllSubmatch(out, -1) {
		val, err := strconv.ParseFloat(string(m[2]), 64)
		if err != nil {
			continue
		}
		switch string(m[1]) {
		case "50.000":
			st.LatencyP50 = val
		case "99.000":
			st.LatencyP99 = val
		case "99.900":
			if st.Observations >= 1000 {
				st.LatencyP999 = val
			}
		}
	}
	if st.LatencyP99 <= 0 || st.LatencyP50 <= 0 {
		return st, fmt.Errorf("sockperf output has no 50.000 and 99.000 percentiles")
	}
	st.Throughput = st.LatencyP99
	return st, nil
}
