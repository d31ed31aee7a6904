package main

import (
	"slices"
	"testing"
	"time"

	"github.com/irqpilot/irqpilot/internal/agent"
	"github.com/irqpilot/irqpilot/internal/apply"
	"github.com/irqpilot/irqpilot/internal/kernel"
	"github.com/irqpilot/irqpilot/internal/verify"
)

// flagsOf lists the flags the flagErrors in err name, in order, through
// wrapping and errors.Join.
func flagsOf(err error) []string {
	if err == nil {
		return nil
	}
	if fe, ok := err.(*flagError); ok {
		return []string{fe.flag}
	}
	var out []string
	switch u := err.(type) {
	case interface{ Unwrap() []error }:
		for _, e := range u.Unwrap() {
			out = append(out, flagsOf(e)...)
		}
	case interface{ Unwrap() error }:
		out = flagsOf(u.Unwrap())
	}
	return out
}

// live and captured are file systems for validate to judge --root by;
// kernel.New reads nothing.
var (
	liveFS     = input{fs: kernel.New("/")}
	capturedFS = input{fs: kernel.New("/nonexistent-capture")}
)

func validAgent() *agentOptions {
	return &agentOptions{g: &globalFlags{root: "/"}, stateDir: apply.DefaultStateDir, planFile: "plan.yaml", interval: time.Second,
		logFormat: "text", logLevel: "info", pingPongLimit: 1, keepJournals: 1,
		adaptOpts: agent.AdaptOptions{Persist: 1, Window: 1, MaxPerHour: 1}}
}

func validPlan(fs input) *planOptions {
	return &planOptions{g: &globalFlags{}, input: fs, policy: "dedicated-core", cpusPerIRQCore: 8, cost: costAuto}
}

func validApply() *applyOptions {
	return &applyOptions{g: &globalFlags{root: "/"}, verify: verifyFlags{tolerance: verify.DefaultTolerance}}
}

func validBench() *benchOptions { return &benchOptions{g: &globalFlags{}} }

func validLab() *labOptions {
	return &labOptions{g: &globalFlags{}, shape: "small", timeout: time.Minute, args: []string{"true"}}
}

func validReport() *reportOptions {
	o := &reportOptions{output: "r.html", width: 10, maxAnswerMiB: 64}
	o.prom.QueryTimeout = time.Second
	return o
}

func validNVMe() *coalesceNVMeOptions {
	return &coalesceNVMeOptions{g: &globalFlags{}, aggTime: 1, thresh: 4, epoch: time.Second, count: 5}
}

func validDoctor(fs input, after string) *doctorOptions {
	return &doctorOptions{g: &globalFlags{}, input: fs, duration: time.Second, after: after, cost: costAuto}
}

func validRecord(fs input) *recordOptions {
	return &recordOptions{g: &globalFlags{}, input: fs, interval: time.Second, cost: costAuto}
}

func validTop(fs input) *topOptions {
	return &topOptions{g: &globalFlags{}, input: fs, interval: time.Second, cost: costAuto}
}

func validSim() *simCoalesceOptions { return &simCoalesceOptions{g: &globalFlags{}, cifThresh: 4} }

func validVerify() *verifyOptions {
	return &verifyOptions{g: &globalFlags{}, flags: verifyFlags{window: time.Second, tolerance: verify.DefaultTolerance}}
}

// Each verb's validate accepts its defaults and refuses each bad option,
// naming the flag.
func TestValidate(t *testing.T) {
	tests := []struct {
		name string
		o    validator
		want []string // the flags refused; none: accepted
	}{
		{"top ok", validTop(liveFS), nil},
		{"top ok captured", validTop(capturedFS), nil},
		{"top interval", func() validator { o := validTop(liveFS); o.interval = 0; return o }(), []string{"--interval"}},
		{"top cost", func() validator { o := validTop(liveFS); o.cost = "guess"; return o }(), []string{"--cost"}},
		{"top bpf on capture", func() validator { o := validTop(capturedFS); o.cost = costBPF; return o }(), []string{"--cost"}},
		{"top bpf live", func() validator { o := validTop(liveFS); o.cost = costBPF; return o }(), nil},

		{"sim ok", validSim(), nil},
		{"sim bursty", func() validator { o := validSim(); o.bursty = true; return o }(), []string{"--bursty"}},
		{"sim bursty open loop", func() validator { o := validSim(); o.bursty, o.openRate = true, 1000; return o }(), nil},
		{"sim cif threshold", func() validator { o := validSim(); o.cifThresh = 0; return o }(), []string{"--vic-cif-threshold"}},
		{"sim charts open loop", func() validator { o := validSim(); o.out, o.openRate = "charts", 1000; return o }(), []string{"-o"}},

		{"testbed up ok", &testbedUpOptions{server: "none"}, nil},
		{"testbed up nginx", &testbedUpOptions{server: "nginx"}, nil},
		{"testbed up server", &testbedUpOptions{server: "apache"}, []string{"--server"}},

		{"nvme ok", validNVMe(), nil},
		{"nvme aggregation 0", func() validator { o := validNVMe(); o.aggTime = 0; return o }(), []string{"--aggregation-time"}},
		{"nvme aggregation 256", func() validator { o := validNVMe(); o.aggTime = 256; return o }(), []string{"--aggregation-time"}},
		{"nvme cif threshold", func() validator { o := validNVMe(); o.thresh = 0; return o }(), []string{"--cif-threshold"}},
		{"nvme epoch", func() validator { o := validNVMe(); o.epoch = 0; return o }(), []string{"--epoch"}},
		{"nvme count", func() validator { o := validNVMe(); o.count = -1; return o }(), []string{"--count"}},

		{"persist ok", &persistOptions{}, nil},
		{"persist print-unit ok", &persistOptions{printUnit: "boot", binary: "/usr/bin/irqpilot"}, nil},
		{"persist print-unit relative binary", &persistOptions{printUnit: "agent", binary: "irqpilot"}, []string{"--binary"}},
		{"persist print-unit unknown", &persistOptions{printUnit: "timer", binary: "/usr/bin/irqpilot"}, []string{"--print-unit"}},

		{"apply ok", validApply(), nil},
		{"apply snapshot", func() validator { o := validApply(); o.g.snapshot = "s.tar.gz"; return o }(), []string{"--snapshot"}},
		{"apply dry-run snapshot", func() validator { o := validApply(); o.g.snapshot = "s.tar.gz"; o.dryRun = true; return o }(), nil},
		{"apply revert-if", func() validator { o := validApply(); o.verify.revertIf = "better"; return o }(), []string{"--revert-if"}},
		{"apply tolerance", func() validator { o := validApply(); o.verify.tolerance = 0; return o }(), []string{"--tolerance"}},
		{"apply verify negative", func() validator { o := validApply(); o.verify.window = -time.Second; return o }(), []string{"--verify"}},
		{"apply verify dry-run", func() validator { o := validApply(); o.verify.window, o.dryRun = time.Second, true; return o }(), []string{"--verify"}},
		{"apply revert-if without verify", func() validator { o := validApply(); o.verify.revertIf = "worse"; return o }(), []string{"--revert-if"}},
		{"apply verify revert-if", func() validator {
			o := validApply()
			o.verify.window, o.verify.revertIf = time.Second, "missed"
			return o
		}(), nil},

		{"report ok", validReport(), nil},
		{"report format", func() validator { o := validReport(); o.output = "r.pdf"; return o }(), []string{"-o"}},
		{"report width", func() validator { o := validReport(); o.width = 3; return o }(), []string{"--width"}},
		{"report max-answer without prometheus", func() validator { o := validReport(); o.maxAnswerMiB = 0; return o }(), nil},
		{"report max-answer", func() validator { o := validReport(); o.prom.URL, o.maxAnswerMiB = "http://p:9090", 0; return o }(), []string{"--max-answer"}},
		{"report query-timeout", func() validator {
			o := validReport()
			o.prom.URL, o.prom.QueryTimeout = "http://p:9090", 0
			return o
		}(), []string{"--query-timeout"}},

		{"capture ok", &captureOptions{output: "c.tar.gz"}, nil},
		{"capture output", &captureOptions{}, []string{"-o"}},

		{"tune ok", &tuneOptions{auto: true, search: "auto"}, nil},
		{"tune exhaustive", &tuneOptions{search: "exhaustive", objective: "p99"}, nil},
		{"tune auto", &tuneOptions{search: "auto"}, []string{"--auto"}},
		{"tune objective", &tuneOptions{auto: true, search: "auto", objective: "speed"}, []string{"--objective"}},

		{"lab ok", validLab(), nil},
		{"lab list", &labOptions{list: true}, nil},
		{"lab shell", func() validator { o := validLab(); o.args, o.shell = nil, true; return o }(), nil},
		{"lab shape", func() validator { o := validLab(); o.shape = "huge"; return o }(), []string{"--shape"}},
		{"lab no command", func() validator { o := validLab(); o.args = nil; return o }(), []string{"--shell"}},
		{"lab shell and command", func() validator { o := validLab(); o.shell = true; return o }(), []string{"--shell"}},
		{"lab timeout", func() validator { o := validLab(); o.timeout = 0; return o }(), []string{"--timeout"}},
		{"lab fleet ok", &labOptions{fleet: 2}, nil},
		{"lab fleet 0", &labOptions{fleet: 0, dir: "/tmp/fleet"}, []string{"--fleet"}},
		{"lab fleet command", &labOptions{fleet: 2, args: []string{"true"}}, []string{"--fleet"}},

		{"doctor ok", validDoctor(liveFS, ""), nil},
		{"doctor captured ok", validDoctor(capturedFS, "later.tar.gz"), nil},
		{"doctor after live", validDoctor(liveFS, "later.tar.gz"), []string{"--after"}},
		{"doctor duration", func() validator { o := validDoctor(liveFS, ""); o.duration = 0; return o }(), []string{"--duration"}},
		{"doctor captured without after", validDoctor(capturedFS, ""), []string{"--after"}},
		{"doctor bpf on capture", func() validator { o := validDoctor(capturedFS, "later"); o.cost = costBPF; return o }(), []string{"--cost"}},

		{"bench ok", validBench(), nil},
		{"bench predictions ok", &benchOptions{predictions: true, markdown: "b.md"}, nil},
		{"bench predictions sweep", &benchOptions{predictions: true, sweep: "connections=1,2"}, []string{"--sweep"}},
		{"bench predictions aa", &benchOptions{predictions: true, aa: true}, []string{"--aa"}},
		{"bench predictions chart", &benchOptions{predictions: true, chart: "c.png"}, []string{"--chart"}},
		{"bench predictions baseline", &benchOptions{predictions: true, baseline: "default"}, []string{"--baseline"}},
		{"bench markdown", &benchOptions{markdown: "b.md"}, []string{"--markdown"}},
		{"bench from sweep", &benchOptions{from: "r.json", sweep: "connections=1,2"}, []string{"--sweep"}},
		{"bench from aa", &benchOptions{from: "r.json", aa: true}, []string{"--aa"}},

		{"verify ok", validVerify(), nil},
		{"verify tolerance", func() validator { o := validVerify(); o.flags.tolerance = 101; return o }(), []string{"--tolerance"}},
		{"verify duration", func() validator { o := validVerify(); o.flags.window = 0; return o }(), []string{"--duration"}},

		{"revert ok", &revertOptions{g: &globalFlags{}}, nil},
		{"revert snapshot", &revertOptions{g: &globalFlags{snapshot: "s.tar.gz"}}, []string{"--snapshot"}},

		{"record ok", validRecord(liveFS), nil},
		{"record interval", func() validator { o := validRecord(liveFS); o.interval = 0; return o }(), []string{"--interval"}},
		{"record duration", func() validator { o := validRecord(liveFS); o.duration = -time.Second; return o }(), []string{"--duration"}},
		{"record bpf on capture", func() validator { o := validRecord(capturedFS); o.cost = costBPF; return o }(), []string{"--cost"}},

		{"agent ok", validAgent(), nil},
		{"agent snapshot", func() validator { o := validAgent(); o.g.snapshot = "s.tar.gz"; return o }(), []string{"--snapshot"}},
		{"verify snapshot", func() validator { o := validVerify(); o.g.snapshot = "s.tar.gz"; return o }(), []string{"--snapshot"}},
		{"agent state-dir", func() validator { o := validAgent(); o.stateDir = " "; return o }(), []string{"--state-dir"}},
		{"agent keep-journals", func() validator { o := validAgent(); o.keepJournals = 0; return o }(), []string{"--keep-journals"}},
		{"agent pingpong-limit", func() validator { o := validAgent(); o.pingPongLimit = -1; return o }(), []string{"--pingpong-limit"}},
		{"agent pingpong-window", func() validator { o := validAgent(); o.pingPongWindow = -time.Second; return o }(), []string{"--pingpong-window"}},
		{"agent adapt counts", func() validator {
			o := validAgent()
			o.adaptOpts.Persist, o.adaptOpts.Window, o.adaptOpts.MaxPerHour = 0, 0, 0
			return o
		}(), []string{"--adapt-persist", "--adapt-window", "--adapt-budget"}},
		{"agent adapt-dwell", func() validator { o := validAgent(); o.adaptOpts.MinDwell = -time.Minute; return o }(), []string{"--adapt-dwell"}},
		{"agent default route with device", func() validator {
			o := validAgent()
			o.planFile, o.policy, o.withDefaultRt, o.devices = "", "per-queue", true, []string{"eth1"}
			return o
		}(), []string{"--include-default-route"}},
		{"agent machine-wide with plan", func() validator { o := validAgent(); o.machineWide = true; return o }(), []string{"--machine-wide"}},
		{"agent device with plan", func() validator { o := validAgent(); o.deviceGiven, o.devices = true, []string{"eth1"}; return o }(), []string{"--device"}},
		{"agent app with plan", func() validator { o := validAgent(); o.app = "comm:nginx"; return o }(), []string{"--app"}},
		{"agent adapt-only flag", func() validator { o := validAgent(); o.adaptOnlyGiven = []string{"--adapt-dwell"}; return o }(), []string{"--adapt-dwell"}},
		{"agent adapt-only flag with adapt", func() validator {
			o := validAgent()
			o.adapt, o.adaptOnlyGiven = true, []string{"--adapt-dwell"}
			return o
		}(), nil},
		{"agent empty device", func() validator {
			o := validAgent()
			o.planFile, o.policy, o.deviceGiven = "", "per-queue", true
			return o
		}(), []string{"--device"}},
		{"agent bad device", func() validator {
			o := validAgent()
			o.planFile, o.policy, o.deviceGiven, o.devices = "", "per-queue", true, []string{"a/b"}
			return o
		}(), []string{"--device"}},
		{"agent metric query", func() validator {
			o := validAgent()
			o.adapt, o.adaptOpts.MetricQuery = true, "file:///etc/shadow"
			return o
		}(), []string{"--adapt-metric-query"}},
		{"agent log-level", func() validator { o := validAgent(); o.logLevel = "loud"; return o }(), []string{"--log-level"}},
		{"agent log-format", func() validator { o := validAgent(); o.logFormat = "xml"; return o }(), []string{"--log-format"}},
		{"agent interval", func() validator { o := validAgent(); o.interval = time.Millisecond; return o }(), []string{"--interval"}},

		{"plan ok", validPlan(liveFS), nil},
		{"plan remedy and policy", func() validator { o := validPlan(liveFS); o.remedy, o.policyGiven = "x", true; return o }(), []string{"--remedy"}},
		{"plan cost", func() validator { o := validPlan(liveFS); o.cost = "guess"; return o }(), []string{"--cost"}},
		{"plan sample on capture", func() validator { o := validPlan(capturedFS); o.sample = time.Second; return o }(), []string{"--sample"}},
		{"plan after on capture", func() validator { o := validPlan(capturedFS); o.after = "later"; return o }(), nil},
		{"plan after live", func() validator { o := validPlan(liveFS); o.after = "later"; return o }(), []string{"--after"}},
		{"plan sample and after live", func() validator { o := validPlan(liveFS); o.sample, o.after = time.Second, "later"; return o }(), nil},
		{"plan policy", func() validator { o := validPlan(liveFS); o.policy = "magic"; return o }(), []string{"--policy"}},
		{"plan housekeeping", func() validator { o := validPlan(liveFS); o.housekeeping = "x"; return o }(), []string{"--housekeeping"}},
		{"plan app-cpus", func() validator { o := validPlan(liveFS); o.appCPUs = "3-1"; return o }(), []string{"--app-cpus"}},
		{"plan app", func() validator { o := validPlan(liveFS); o.app = "exe:foo"; return o }(), []string{"--app"}},
		{"plan irq-cores", func() validator { o := validPlan(liveFS); o.irqCores = -1; return o }(), []string{"--irq-cores"}},
		{"plan cpus-per-irq-core", func() validator { o := validPlan(liveFS); o.cpusPerIRQCore = 0; return o }(), []string{"--cpus-per-irq-core"}},
		{"plan sock-flow-entries", func() validator { o := validPlan(liveFS); o.sockFlowEntries = -1; return o }(), []string{"--sock-flow-entries"}},
		{"plan irqbalance", func() validator { o := validPlan(liveFS); o.irqbalance = "pause"; return o }(), []string{"--irqbalance"}},
		{"plan default route with device", func() validator {
			o := validPlan(liveFS)
			o.withDefaultRt, o.devices = true, []string{"eth1"}
			return o
		}(), []string{"--include-default-route"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.o.validate()
			if got := flagsOf(err); !slices.Equal(got, tc.want) {
				t.Errorf("validate() = %v, naming %q; want %q", err, got, tc.want)
			}
			if err != nil && len(flagsOf(err)) == 0 {
				t.Errorf("validate() = %v, an error that names no flag", err)
			}
		})
	}
}

// runE runs complete and validate only where a verb has them: a method of
// another signature would be skipped without a word, so each verb's steps
// are listed here.
func TestVerbSteps(t *testing.T) {
	for _, tc := range []struct {
		o                  verb
		complete, validate bool
	}{
		{&agentOptions{}, true, true},
		{&applyOptions{}, true, true},
		{&benchOptions{}, true, true},
		{&captureOptions{}, true, true},
		{&coalesceNVMeOptions{}, true, true},
		{&coalesceShowOptions{}, true, false},
		{&doctorOptions{}, true, true},
		{&historyOptions{}, true, false},
		{&inventoryOptions{}, true, false},
		{&labOptions{}, true, true},
		{&persistOptions{}, true, true},
		{&planOptions{}, true, true},
		{&recordOptions{}, true, true},
		{&reportOptions{}, true, true},
		{&revertOptions{}, true, true},
		{&simCoalesceOptions{}, true, true},
		{&statusOptions{}, true, false},
		{&testbedDownOptions{}, true, false},
		{&testbedStatusOptions{}, true, false},
		{&testbedUpOptions{}, true, true},
		{&topOptions{}, true, true},
		{&tuneOptions{}, false, true},
		{&verifyOptions{}, true, true},
	} {
		_, c := tc.o.(completer)
		_, v := tc.o.(validator)
		if c != tc.complete || v != tc.validate {
			t.Errorf("%T: complete %v, validate %v; want %v, %v", tc.o, c, v, tc.complete, tc.validate)
		}
	}
}
