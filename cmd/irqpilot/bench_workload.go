package main

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/irqpilot/irqpilot/internal/bench/workload"

	"github.com/spf13/pflag"

	"github.com/irqpilot/irqpilot/internal/bench"
	"github.com/irqpilot/irqpilot/internal/cpuset"
	"github.com/irqpilot/irqpilot/internal/kernel"
)

// workloadFlags are shared by bench and tune.
type workloadFlags struct {
	workload   string
	warmup     time.Duration
	prime      time.Duration
	net        workload.NetOptions
	clientCPUs string
	appCPUs    string
	command    string
	pattern    string
	unit       string
	fioDir     string
	fioEngine  string
	ioDepth    int
	stateDir   string
	tableSize  int
	spMode     string
	spRate     int
}

func (f *workloadFlags) add(fs *pflag.FlagSet) {
	fs.StringVar(&f.workload, "workload", "", "memcached, nginx, udp (a one-way UDP flood into a sink through a single-queue veth, the shape of the RPS/RFS single-queue NIC write-up), mysql (MariaDB and sysbench oltp_point_select, 100 % primary-key reads), sockperf (UDP latency, lower is better), storage or command (required)")
	fs.IntVar(&f.net.Testbed.Queues, "queues", 1, "veth rx/tx queues (memcached, nginx)")
	fs.BoolVar(&f.net.Testbed.GRO, "gro", false, "GRO on the veth pair (NAPI receive)")
	fs.BoolVar(&f.net.Testbed.Threaded, "threaded-napi", false, "threaded NAPI on the server veth (implies --gro)")
	fs.IntVar(&f.net.Threads, "threads", 2, "memcached threads / nginx workers / udp sink reading threads")
	fs.IntVar(&f.net.ClientThreads, "client-threads", 0, "memcaslap/wrk threads (0: memcaslap one more than the online CPUs, wrk 2)")
	fs.IntVar(&f.net.Connections, "connections", 0, "memcaslap concurrency / wrk connections (0: 16 per client thread) / sysbench threads, one connection each (mysql; 0: 16)")
	fs.IntVar(&f.tableSize, "table-size", workload.DefaultTableSize, "mysql: rows of sysbench's table (all in the buffer pool at the default)")
	fs.StringVar(&f.spMode, "sockperf-mode", workload.SockperfPingPong, "sockperf: ping-pong (one message in flight) or under-load (a fixed --rate)")
	fs.IntVar(&f.spRate, "rate", workload.DefaultSockperfRate, "sockperf under-load: messages per second")
	fs.IntVar(&f.net.BusyPoll.SocketUsecs, "busy-poll", 0, "udp: the sink busy-polls its socket this many µs (SO_BUSY_POLL, SO_PREFER_BUSY_POLL) in configurations without /busypoll= (0: blocking reads)")
	fs.IntVar(&f.net.BusyPoll.EpollUsecs, "epoll-busy-poll", 0, "udp: the sink waits in epoll with busy polling for this many µs (what IRQ suspension needs) in configurations without /epollbusy= (0: off)")
	fs.StringVar(&f.clientCPUs, "client-cpus", "", "pin the load generator to these CPUs in every configuration (part of the scenario: never tuned)")
	fs.StringVar(&f.appCPUs, "app-cpus", "", "pin the application to these CPUs in every configuration that does not place it")
	fs.StringVar(&f.command, "command", "", "command workload: the command line (split on spaces)")
	fs.StringVar(&f.pattern, "pattern", "", "command workload: regular expression whose first group is the figure of merit")
	fs.StringVar(&f.unit, "unit", "ops/s", "command workload: unit of the figure of merit")
	fs.StringVar(&f.fioDir, "fio-dir", "/var/tmp", "storage workload: directory for the test file (on the disk under test)")
	fs.StringVar(&f.fioEngine, "ioengine", "libaio", "storage workload: fio ioengine, libaio or psync (one read at a time)")
	fs.IntVar(&f.ioDepth, "iodepth", 16, "storage workload: libaio queue depth (psync is always 1)")
	fs.StringVar(&f.stateDir, "state-dir", "", "apply journals (default /var/lib/irqpilot/bench)")
	fs.DurationVar(&f.warmup, "warmup", time.Second, "run the workload this long, unmeasured, before each measurement")
	fs.DurationVar(&f.prime, "prime", 5*time.Second, "run the workload this long, unmeasured, once before the first round (a fresh server and fresh memory are slower at first; 0: no priming)")
}

// runner checks the workload flags and builds the runner; progress goes to
// errOut.
func (f *workloadFlags) runner(configs []string, rounds int, d time.Duration, errOut io.Writer) (*bench.Runner, error) {
	// bench measures and changes this machine; its testbeds are made here.
	live := kernel.New("/")
	net := f.net
	net.Testbed.FS = live
	var w workload.Workload
	var err error
	switch f.workload {
	case "memcached", "nginx", "udp":
		w, err = workload.NewNet(f.workload, net)
	case "mysql":
		w, err = workload.NewDB(workload.DBOptions{Testbed: net.Testbed, Connections: net.Connections, TableSize: f.tableSize})
	case "sockperf":
		w, err = workload.NewSockperf(workload.SockperfOptions{Testbed: net.Testbed, Mode: f.spMode, Rate: f.spRate})
	case "storage":
		w = &workload.StorageWorkload{Dir: f.fioDir, Engine: f.fioEngine, IODepth: f.ioDepth, FS: live}
	case "command":
		w = &workload.CommandWorkload{Argv: strings.Fields(f.command), Pattern: f.pattern, Unit: f.unit}
	case "":
		err = fmt.Errorf("--workload is required (memcached, nginx, udp, mysql, sockperf, storage, command)")
	default:
		err = fmt.Errorf("--workload %q: want memcached, nginx, udp, mysql, sockperf, storage or command", f.workload)
	}
	if err != nil {
		return nil, err
	}
	var p bench.Pinned
	p.Inner = bench.Configs{}
	if f.clientCPUs != "" {
		if p.Client, err = cpuset.Parse(f.clientCPUs); err != nil {
			return nil, fmt.Errorf("--client-cpus: %w", err)
		}
	}
	if f.appCPUs != "" {
		if p.App, err = cpuset.Parse(f.appCPUs); err != nil {
			return nil, fmt.Errorf("--app-cpus: %w", err)
		}
	}
	if rounds < 1 {
		return nil, fmt.Errorf("--rounds %d: need at least 1", rounds)
	}
	if d < time.Second {
		return nil, fmt.Errorf("--duration %s: need at least 1s", d)
	}
	return &bench.Runner{FS: live, Workload: w, Configs: configs, Rounds: rounds, Duration: d, Warmup: f.warmup, Prime: f.prime, Configurator: p,
		StateDir: f.stateDir, Progress: func(format string, args ...any) {
			fmt.Fprintf(errOut, format+"\n", args...)
		}}, nil
}
