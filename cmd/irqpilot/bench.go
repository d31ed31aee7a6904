package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/irqpilot/irqpilot/internal/bench/stats"
	"github.com/irqpilot/irqpilot/internal/bench/workload"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/irqpilot/irqpilot/internal/bench"
	"github.com/irqpilot/irqpilot/internal/cpuset"
	"github.com/irqpilot/irqpilot/internal/report"
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
	var w workload.Workload
	var err error
	switch f.workload {
	case "memcached", "nginx", "udp":
		w, err = workload.NewNet(f.workload, f.net)
	case "mysql":
		w, err = workload.NewDB(workload.DBOptions{Testbed: f.net.Testbed, Connections: f.net.Connections, TableSize: f.tableSize})
	case "sockperf":
		w, err = workload.NewSockperf(workload.SockperfOptions{Testbed: f.net.Testbed, Mode: f.spMode, Rate: f.spRate})
	case "storage":
		w = &workload.StorageWorkload{Dir: f.fioDir, Engine: f.fioEngine, IODepth: f.ioDepth}
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
	return &bench.Runner{Workload: w, Configs: configs, Rounds: rounds, Duration: d, Warmup: f.warmup, Prime: f.prime, Configurator: p,
		StateDir: f.stateDir, Progress: func(format string, args ...any) {
			fmt.Fprintf(errOut, format+"\n", args...)
		}}, nil
}

// benchOptions are bench's flags.
type benchOptions struct {
	g        *globalFlags
	wf       workloadFlags
	configs  string
	rounds   int
	duration time.Duration
	output   string
	chart    string
	baseline string
	from     string
	aa       bool
	sweep    string
	// bench --predictions (bench_predictions.go).
	predictions bool
	markdown    string
	cost        string
	tolerance   float64
}

func newBenchCmd(g *globalFlags) *cobra.Command {
	o := &benchOptions{g: g}
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "A/B-measure configurations on a real workload, interleaved, with distribution-free intervals and tests",
		Long: fmt.Sprintf(`bench applies each configuration through the normal apply/revert path, runs the
workload, records throughput, latency and per-CPU load, and reverts. After one
unmeasured priming run (--prime), rounds are interleaved in a balanced order (a
Williams design: over every n rounds for n configurations, 2n when n is odd,
each configuration runs in every position and, inside the rounds, after every
other configuration equally often, so what one leaves behind does not bias
the same neighbour every round). It reports the median and its %.0f %%
distribution-free interval (order statistics) per configuration, the ratio to
the baseline (the median of each round's ratio to the baseline's run in that
round, with the order-statistic interval of those ratios) and a verdict from a
sign test of the per-round ratios at %.0f %%. A verdict needs %d rounds or more:
with fewer, even rounds that all agree are not evidence at %.0f %% (3 of 3 is
p = 0.25), and the ratio is marked "indicative". Warnings name configurations
measured on a saturated CPU (under %.0f %% idle) or with the load generator on
the server's CPUs, and a run without an A/A twin (--aa adds one). --from
FILE re-reads a saved report (with --baseline, against another of its
configurations; "#TAG" names the configuration with that tag). The machine is
restored exactly at the end (checked: every IRQ affinity and queue steering
value).

Configurations: default, irqbalance, dedicated-core, per-queue, colocate,
rps-spread, auto, and spec:app=CPUS,client=CPUS,rps=CPUS|off,napi=CPUS,flows=N,irq=N:CPUS.
NAME#TAG measures NAME under its own label: --configs default,default#aa is an
A/A run, the noise floor every other ratio is read against.
NAME/busypoll=US and NAME/epollbusy=US (udp workload) measure NAME with the
sink busy polling its socket or its epoll instance: --configs
default,latency,latency/epollbusy=50 compares the NAPI settings with and
without an application that opts in.

--predictions checks the cost model instead: with the workload running, each
policy (--configs, default every policy) gets one row per round: a window of
--duration is measured, the policy's plan is made from it with its
prediction (scoped to the device under test), applied, the moved IRQs are
waited for, the same window is measured again and the prediction is judged
by the code 'apply --verify' runs (per CPU error; confirmed, missed, worse or
inconclusive); then the change is reverted. --markdown FILE writes the error
table into FILE's generated section (docs/benchmarks.md); --from A.json,B.json
prints saved campaigns again.`, 100*stats.Confidence, 100*(1-stats.Confidence), stats.MinRuns, 100*stats.Confidence, bench.SaturatedIdlePct),
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return o.run(cmd.OutOrStdout(), cmd.ErrOrStderr(), cmd.Flags().Changed)
		},
	}
	o.wf.add(cmd.Flags())
	cmd.Flags().StringVar(&o.configs, "configs", "default,irqbalance,rps-spread", "comma-separated configurations (spec: configurations use + between CPUs; A&B measures two together, e.g. spec:app=1&napi:threaded=1)")
	cmd.Flags().IntVar(&o.rounds, "rounds", stats.MinRuns, fmt.Sprintf("measurements per configuration (fewer than %d: no verdict at %.0f %% confidence)", stats.MinRuns, 100*stats.Confidence))
	cmd.Flags().DurationVar(&o.duration, "duration", 10*time.Second, "length of one measurement")
	cmd.Flags().StringVarP(&o.output, "output", "o", "", "write the JSON report to this file")
	cmd.Flags().StringVar(&o.chart, "chart", "", "write a chart (.png or .svg): throughput with intervals and per-CPU %soft")
	cmd.Flags().StringVar(&o.baseline, "baseline", "", "configuration the others are compared with (default: the first)")
	cmd.Flags().BoolVar(&o.aa, "aa", false, "also measure an A/A twin: a second copy of the baseline (NAME#aa), whose ratio to the baseline is this run's noise floor")
	cmd.Flags().StringVar(&o.sweep, "sweep", "", "run the whole bench once per value, e.g. connections=1,4,16,64 (the load generator's concurrency), and draw the curve (--chart): the figure of merit against the value, one line per configuration, with intervals")
	cmd.Flags().StringVar(&o.from, "from", "", "measure nothing: read a saved JSON report (-o) and print it again, summarised with this version's statistics (with --predictions: reports, comma-separated)")
	cmd.Flags().BoolVar(&o.predictions, "predictions", false, "check the cost model instead of comparing configurations: for each policy of --configs (default: every policy), measure the running workload for --duration, make the policy's plan from that measurement with its prediction, apply it, measure again and judge the prediction as 'apply --verify' does (per CPU error, verdict), then revert")
	cmd.Flags().StringVar(&o.markdown, "markdown", "", "with --predictions: write the error table into this Markdown `FILE`, between its generated section's markers (appended when it has none)")
	cmd.Flags().Float64Var(&o.tolerance, "tolerance", predictionsTolerance, "with --predictions: verify's tolerance in `POINTS` (as apply --verify's)")
	addCostFlag(cmd, &o.cost)
	return cmd
}

func (o *benchOptions) run(out, errOut io.Writer, changed func(string) bool) error {
	if o.predictions {
		if o.sweep != "" || o.aa || o.chart != "" || o.baseline != "" {
			return &exitError{code: 2, err: fmt.Errorf("--predictions checks the model: --sweep, --aa, --chart and --baseline compare configurations")}
		}
		if !changed("rounds") {
			o.rounds = 1 // one verified change per policy
		}
		return o.runPredictions(out, errOut, changed("configs"))
	}
	if o.markdown != "" {
		return &exitError{code: 2, err: fmt.Errorf("--markdown writes --predictions' table")}
	}
	if o.from != "" && o.sweep != "" {
		return &exitError{code: 2, err: fmt.Errorf("--sweep measures; --from measures nothing")}
	}
	if o.from != "" {
		if o.aa {
			return &exitError{code: 2, err: fmt.Errorf("--aa measures a twin; --from measures nothing")}
		}
		b, err := os.ReadFile(o.from)
		if err != nil {
			return &exitError{code: 2, err: err}
		}
		rep, err := bench.ReadReport(b, o.baseline)
		if err != nil {
			return &exitError{code: 2, err: fmt.Errorf("%s: %w", o.from, err)}
		}
		return o.writeReport(out, rep)
	}
	if o.sweep != "" {
		return o.runSweep(out, errOut)
	}
	configs, err := o.configList()
	if err != nil {
		return err
	}
	r, err := o.wf.runner(configs, o.rounds, o.duration, errOut)
	if err != nil {
		return &exitError{code: 2, err: err}
	}
	ctx, stop := signalContext()
	defer stop()
	rep, err := bench.Bench(ctx, r, o.baseline)
	if rep != nil {
		if werr := o.writeReport(out, rep); werr != nil {
			err = joinErr(err, werr)
		}
		if !rep.Restored && len(rep.Diff) > 0 {
			err = joinErr(err, fmt.Errorf("machine not restored: %d values differ", len(rep.Diff)))
		}
	}
	return err
}

func splitConfigs(s string) []string {
	var out []string
	cur := ""
	// spec:…,… and napi:…,… contain commas: a part continues one only
	// when it is one of its KEY=VALUE fields; anything else ("latency/busypoll=50",
	// "spec:…", "default") starts the next configuration. In a combination
	// ("spec:…&napi:…") the last of its parts is the one continued.
	parts := strings.Split(s, ",")
	for _, p := range parts {
		key, _, _ := strings.Cut(strings.TrimSpace(p), "=")
		last := cur[strings.LastIndex(cur, bench.CombineSep)+1:]
		if cur != "" && (strings.HasPrefix(last, "spec:") && slices.Contains(bench.SpecFields, key) ||
			strings.HasPrefix(last, "napi:") && slices.Contains(bench.KnobFields, key)) {
			cur += "," + p
			continue
		}
		if cur != "" {
			out = append(out, cur)
		}
		cur = strings.TrimSpace(p)
	}
	if cur != "" {
		out = append(out, cur)
	}
	return out
}

// writeReport writes the report to --output and --chart, and prints it.
func (o *benchOptions) writeReport(w io.Writer, rep *bench.Report) error {
	if out := o.output; out != "" {
		b, err := json.MarshalIndent(rep, "", "  ")
		if err != nil {
			return err
		}
		if err := os.WriteFile(out, b, 0o644); err != nil {
			return err
		}
	}
	if o.chart != "" && len(rep.Summary) > 0 {
		if err := report.BenchChart(rep, o.chart); err != nil {
			return fmt.Errorf("chart: %w", err)
		}
	}
	if o.g.json {
		return writeJSONLine(w, rep)
	}
	return rep.WriteTable(w)
}

// runSweep runs the bench once per value of --sweep and writes the sweep
// (JSON to --output, the curve to --chart, the tables to out).
func (o *benchOptions) runSweep(out, errOut io.Writer) error {
	param, values, err := bench.ParseSweep(o.sweep)
	if err != nil {
		return &exitError{code: 2, err: fmt.Errorf("--sweep: %w", err)}
	}
	configs, err := o.configList()
	if err != nil {
		return err
	}
	mk := func(v int) (*bench.Runner, error) {
		wf := o.wf
		switch param {
		case "connections":
			wf.net.Connections = v
		}
		return wf.runner(configs, o.rounds, o.duration, errOut)
	}
	for _, v := range values { // every value's flags checked before anything starts
		if _, err := mk(v); err != nil {
			return &exitError{code: 2, err: fmt.Errorf("--sweep %s=%d: %w", param, v, err)}
		}
	}
	ctx, stop := signalContext()
	defer stop()
	sw, err := bench.RunSweep(ctx, param, values, o.baseline, mk, func(format string, args ...any) {
		fmt.Fprintf(errOut, format+"\n", args...)
	})
	if sw != nil && len(sw.Points) > 0 {
		if werr := o.writeSweep(out, sw); werr != nil {
			err = joinErr(err, werr)
		}
		for _, p := range sw.Points {
			if !p.Report.Restored && len(p.Report.Diff) > 0 {
				err = joinErr(err, fmt.Errorf("%s=%d: machine not restored: %d values differ", param, p.Value, len(p.Report.Diff)))
			}
		}
	}
	return err
}

func (o *benchOptions) writeSweep(w io.Writer, sw *bench.Sweep) error {
	if o.output != "" {
		b, err := json.MarshalIndent(sw, "", "  ")
		if err != nil {
			return err
		}
		if err := os.WriteFile(o.output, b, 0o644); err != nil {
			return err
		}
	}
	if o.chart != "" {
		if err := report.SweepChart(sw, o.chart); err != nil {
			return fmt.Errorf("chart: %w", err)
		}
	}
	if o.g.json {
		return writeJSONLine(w, sw)
	}
	return sw.WriteTable(w)
}

// configList is --configs with --baseline resolved to one of them and,
// with --aa, the baseline's A/A twin added. It runs before anything
// starts: a --baseline typo would otherwise measure every run and compare
// none.
func (o *benchOptions) configList() ([]string, error) {
	configs := splitConfigs(o.configs)
	if o.baseline != "" {
		b, err := bench.FindConfig(configs, o.baseline)
		if err != nil {
			return nil, &exitError{code: 2, err: fmt.Errorf("--baseline: %w", err)}
		}
		o.baseline = b
	}
	if o.aa {
		configs = bench.WithTwin(configs, o.baseline)
	}
	return configs, nil
}
