// Package workload is what bench measures: servers and their load
// generators in a testbed (memcached with memcaslap, nginx with wrk,
// MariaDB with sysbench, sockperf, and the udp sink and flood that this
// program runs itself in helper mode), fio on a disk and any command, each
// with the parser of its load generator's output into a Result. A workload
// starts processes by design; where they run is the Placement a
// configuration gives each run.
package workload

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/irqpilot/irqpilot/internal/bench/testbed"
	"github.com/irqpilot/irqpilot/internal/cpuset"
	"github.com/irqpilot/irqpilot/internal/kernel"
	"github.com/irqpilot/irqpilot/internal/load"
	"github.com/irqpilot/irqpilot/internal/program"
)

// Workload is a server (or none) and a load generator.
type Workload interface {
	Name() string
	// Prepare starts what the workload serves from and says what may be
	// placed.
	Prepare() (AppInfo, error)
	// Run drives load for d, with the placement's client and application
	// CPUs.
	Run(ctx context.Context, d time.Duration, s Placement) (Result, error)
	// Close removes everything Prepare made.
	Close() error
}

// Placement is what one configuration says about the processes a workload
// starts for a run: bench's Setup (the kernel settings besides) gives it.
type Placement struct {
	// Config names the configuration (for errors).
	Config string
	// AppCPUs places an application started per run (fio, a command);
	// empty: free. A server started by Prepare is placed by the
	// configuration's thread affinities instead.
	AppCPUs cpuset.Set
	// ClientCPUs places the load generator (empty: free).
	ClientCPUs cpuset.Set
	// BusyPoll, when set, is how the udp workload's sink waits in this
	// configuration (NetOptions.BusyPoll otherwise).
	BusyPoll *BusyPoll
	// Programs starts the load generator and the application: the
	// machine's (kernel.FS.Programs); nil is program.Exec.
	Programs program.Runner
}

// programs is s.Programs, program.Exec when unset.
func (s Placement) programs() program.Runner {
	if s.Programs == nil {
		return program.Exec{}
	}
	return s.Programs
}

// AppInfo is what a configuration may place besides IRQs and queues.
type AppInfo struct {
	// PIDs are the server processes (all threads of each are pinned).
	PIDs []int `json:"pids,omitempty"`
	// Device is the server-side network device of the testbed ("" for
	// storage and commands).
	Device string `json:"device,omitempty"`
	// NSRoot is a root directory whose sys/ shows Device (the testbed's
	// namespace view); changes whose Path is below sys/class/net/Device are
	// applied there.
	NSRoot string `json:"-"`
	// NetNS is the nsfs file of Device's network namespace
	// (/run/netns/NAME): its NAPI instances are read and set with netlink
	// sockets opened there.
	NetNS string `json:"-"`
	// NAPIThreads are the PIDs of Device's threaded-NAPI kernel threads.
	NAPIThreads []int `json:"napi_threads,omitempty"`
	// FS is the machine the application runs on (set by bench's
	// Runner.Start to Runner.FS).
	FS *kernel.FS `json:"-"`
	// Disk is the block device the storage workload reads ("" otherwise);
	// its IRQs are the only IRQs a storage configuration may place.
	Disk string `json:"disk,omitempty"`
	// ClientFixed: the scenario pins the load generator (--client-cpus), so
	// tune and the exhaustive search do not vary the client's CPUs.
	ClientFixed bool `json:"client_fixed,omitempty"`
	// BaselineLoad is the per-CPU irq+softirq share measured in the latest
	// "default" run, given to the policies (auto weighs it the way
	// `plan --sample` does on a live machine); nil before the first one.
	BaselineLoad *load.Load `json:"-"`
}

// NetOptions shape the network workloads' testbed and load.
type NetOptions struct {
	Testbed testbed.Options
	// Threads is memcached's threads / nginx's workers (default 2).
	Threads int
	// ClientThreads and Connections drive memcaslap/wrk. Zero: the
	// workload's default (clientDefaults).
	ClientThreads, Connections int
	// BusyPoll is how the udp sink waits for datagrams in configurations
	// that do not say (Setup.BusyPoll); zero: blocking reads.
	BusyPoll BusyPoll
}

func (o *NetOptions) defaults(kind string, cpus int) {
	if o.Threads <= 0 {
		o.Threads = 2
	}
	if o.ClientThreads <= 0 {
		o.ClientThreads = clientThreads(kind, cpus)
	}
	if o.Connections <= 0 {
		o.Connections = connsPerClientThread * o.ClientThreads
	}
	if o.Testbed.Queues <= 0 {
		o.Testbed.Queues = 1
	}
}

// connsPerClientThread is each load generator thread's share of the
// connections when --connections is not given.
const connsPerClientThread = 16

// clientThreads is the load generator's default thread count.
//
// memcaslap runs one more thread than the machine has CPUs. With as many
// threads as CPUs (the old default: 2 on 2 CPUs), the scheduler settles the
// two memcached workers and the two memcaslap threads into one of a few
// arrangements at the start of a run and keeps it; runs then differ by which
// arrangement they drew, not by configuration. Measured on this project's
// 2-vCPU machine, ten 3 s runs each, the same memcached: -T 2 -c 32 gave
// 70.7–120.0 k ops/s; -T 3 -c 48 76.2–82.8 k and 79.4–82.1 k; -T 5 -c 80
// 75.6–77.3 k; -T 6 -c 96 73.9–76.7 k (docs/benchmarks.md, "harness
// precision"). With a thread left over, the load balancer keeps moving
// threads, and every run averages over the arrangements.
//
// wrk keeps 2 threads: nginx's A/A was already within ±2 % with them
// (eight 3 s runs 43.6–45.1 k req/s).
func clientThreads(kind string, cpus int) int {
	if kind == "memcached" && cpus > 0 {
		return cpus + 1
	}
	return 2
}

// memcaslapWindow is memcaslap's --win_size, the keys each connection
// cycles through (memcaslap wants a unit: "1k" is 1024). With its default (10 k) one 3 s run wrote more than the
// server's memory, so the server evicted, and a run's throughput depended on
// what earlier runs had left in the cache: runs drifted from 90 k to 70 k
// ops/s and back as the hit rate changed. With a small window and a server
// that never fills during a bench (see testbed.StartMemcached), every run
// finds the same cache: all its keys fresh, nothing evicted.
const memcaslapWindow = "1k"

// NetWorkload is memcached+memcaslap, nginx+wrk or the UDP sink and flood
// (see udp.go) in a testbed.
type NetWorkload struct {
	Kind string // "memcached", "nginx" or "udp"
	Opts NetOptions
	served
}

// NewNet returns the memcached or nginx workload.
func NewNet(kind string, o NetOptions) (*NetWorkload, error) {
	if kind != "memcached" && kind != "nginx" && kind != "udp" {
		return nil, fmt.Errorf("network workload %q: want memcached, nginx or udp", kind)
	}
	o.defaults(kind, machineCPUs(o.Testbed.FS))
	if err := o.BusyPoll.Check(); err != nil {
		return nil, err
	}
	if kind != "udp" && !o.BusyPoll.IsZero() {
		return nil, fmt.Errorf("busy polling is an option of the udp workload's sink; %s is not changed", kind)
	}
	if o.Connections%o.ClientThreads != 0 {
		return nil, fmt.Errorf("%d connections do not divide over %d client threads", o.Connections, o.ClientThreads)
	}
	return &NetWorkload{Kind: kind, Opts: o}, nil
}

// Name implements Workload.
func (w *NetWorkload) Name() string { return w.Kind }

// BusyPolls: the workload's server can busy-poll (Setup.BusyPoll): the udp
// sink.
func (w *NetWorkload) BusyPolls() bool { return w.Kind == "udp" }

// Prepare brings the testbed up and starts the server.
func (w *NetWorkload) Prepare() (AppInfo, error) {
	tb, err := testbed.Up(w.Opts.Testbed)
	if err != nil {
		return AppInfo{}, err
	}
	w.TB = tb
	switch w.Kind {
	case "memcached":
		w.srv, err = tb.StartMemcached(w.Opts.Threads)
	case "nginx":
		w.srv, err = tb.StartNginx(w.Opts.Threads)
	default:
		var argv []string
		if argv, err = helperCommand("udp-sink", "-addr", testbed.ServerAddr, "-threads", strconv.Itoa(w.Opts.Threads)); err == nil {
			w.srv, err = tb.StartProgram("udp-sink", filepath.Base(argv[2]), udpCtlPort, argv...)
		}
	}
	if err != nil {
		_ = tb.Down()
		w.TB = nil
		return AppInfo{}, err
	}
	pids := append([]int{w.srv.PID}, testbed.Children(w.Opts.Testbed.FS, w.srv.PID)...)
	return w.app(pids), nil
}

// Window marks when a workload's measured traffic starts and stops, for a
// load sample that covers the traffic alone. Either may be nil.
type Window struct {
	On, Off func()
}

// Windowed workloads report their traffic's window (see Window).
type Windowed interface {
	RunWindow(ctx context.Context, d time.Duration, s Placement, win Window) (Result, error)
}

// Run implements Workload.
func (w *NetWorkload) Run(ctx context.Context, d time.Duration, s Placement) (Result, error) {
	return w.RunWindow(ctx, d, s, Window{})
}

// RunWindow is Run that reports the udp flood's window (memcaslap and wrk
// start in milliseconds and print no marks).
func (w *NetWorkload) RunWindow(ctx context.Context, d time.Duration, s Placement, win Window) (Result, error) {
	secs := strconv.Itoa(int(d.Round(time.Second) / time.Second))
	if secs == "0" {
		secs = "1"
	}
	var argv []string
	var parse func([]byte) (Result, error)
	bp := w.Opts.BusyPoll
	if s.BusyPoll != nil {
		bp = *s.BusyPoll
	}
	if w.Kind != "udp" && !bp.IsZero() {
		return Result{}, fmt.Errorf("%s: busy polling is an option of the udp workload's sink only", s.Config)
	}
	switch w.Kind {
	case "udp":
		var err error
		if argv, err = helperCommand("udp-send", "-addr", testbed.ServerAddr, "-d", d.String(),
			"-busy-poll", strconv.Itoa(bp.SocketUsecs), "-epoll-busy-poll", strconv.Itoa(bp.EpollUsecs)); err != nil {
			return Result{}, err
		}
		parse = ParseUDP
	case "memcached":
		argv = []string{"memcaslap", "-s", testbed.ServerAddr + ":11211", "-T", strconv.Itoa(w.Opts.ClientThreads),
			"-c", strconv.Itoa(w.Opts.Connections), "-t", secs + "s", "-S", secs + "s", "--win_size=" + memcaslapWindow}
		parse = ParseMemcaslap
	default:
		argv = []string{"wrk", "-t", strconv.Itoa(w.Opts.ClientThreads), "-c", strconv.Itoa(w.Opts.Connections),
			"-d", secs + "s", "--latency", "http://" + testbed.ServerAddr + "/"}
		parse = ParseWrk
	}
	marks := map[string]func(){udpTrafficOn: win.On, udpTrafficOff: win.Off}
	out, err := runMarked(ctx, s, d, s.ClientCPUs, w.client(argv...), marks)
	if err != nil {
		return Result{}, err
	}
	return parse(out)
}

// served is the part of a workload whose server runs in a testbed: the
// testbed and the server's process.
type served struct {
	TB  *testbed.Testbed
	srv testbed.Proc
}

// Close stops the server (by PID) and removes the testbed.
func (w *served) Close() error {
	if w.TB == nil {
		return nil
	}
	err := w.TB.Down()
	w.TB = nil
	return err
}

// app is what a configuration may place: the server's processes pids and
// the testbed's server device.
func (w *served) app(pids []int) AppInfo {
	tb := w.TB
	return AppInfo{PIDs: pids, Device: tb.ServerDev, NSRoot: tb.Root(), NetNS: tb.NetNSPath(), NAPIThreads: tb.NAPIThreads()}
}

// client is argv run in the testbed's client namespace (where the load
// generators run; ip netns exec starts it there).
func (w *served) client(argv ...string) []string {
	return append([]string{"ip", "netns", "exec", w.TB.ClientNS}, argv...)
}

// runPinned runs argv under taskset (when cpus is not empty) with a
// deadline of d plus a margin, and returns its standard output and error.
func runPinned(ctx context.Context, s Placement, d time.Duration, cpus cpuset.Set, argv []string) ([]byte, error) {
	return runMarked(ctx, s, d, cpus, argv, nil)
}

// runMarked is runPinned that calls marks[line] when the program writes
// that line to standard error (its output still holds the line). The
// callbacks run before runMarked returns.
func runMarked(ctx context.Context, s Placement, d time.Duration, cpus cpuset.Set, argv []string, marks map[string]func()) ([]byte, error) {
	if !cpus.IsEmpty() {
		argv = append([]string{"taskset", "-c", cpus.String()}, argv...)
	}
	ctx, cancel := context.WithTimeout(ctx, d+30*time.Second)
	defer cancel()
	cmd := s.programs().Command(ctx, argv[0], argv[1:]...)
	var buf syncBuffer
	cmd.Stdout = &buf
	cmd.Stderr = &buf
	if len(marks) > 0 {
		cmd.Stderr = &markWriter{out: &buf, marks: marks}
	}
	err := cmd.Run()
	out := buf.b.Bytes()
	if err != nil {
		return out, program.Failed(argv, err, out)
	}
	return out, nil
}

// syncBuffer is a bytes.Buffer for two copying goroutines (os/exec uses
// one per stream when Stdout and Stderr differ).
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// markWriter copies to out and calls marks[line] for each whole line
// written that is a key of marks. os/exec runs Write on one goroutine and
// waits for it before Run returns.
type markWriter struct {
	out     io.Writer
	marks   map[string]func()
	partial []byte
}

func (m *markWriter) Write(p []byte) (int, error) {
	m.partial = append(m.partial, p...)
	for {
		i := bytes.IndexByte(m.partial, '\n')
		if i < 0 {
			break
		}
		if fn := m.marks[string(m.partial[:i])]; fn != nil {
			fn()
		}
		m.partial = m.partial[i+1:]
	}
	if len(m.partial) > 4096 { // a long line is no mark
		m.partial = m.partial[:0]
	}
	return m.out.Write(p)
}

// machineCPUs counts the online CPUs of fs's machine (the load
// generator's default size); 0 when unreadable or fs is nil (Up then
// refuses the testbed).
func machineCPUs(fs *kernel.FS) int {
	if fs == nil {
		return 0
	}
	s, err := fs.OnlineCPUs()
	if err != nil {
		return 0
	}
	return s.Len()
}
