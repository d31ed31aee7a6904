package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/irqpilot/irqpilot/internal/diagnose"
	"github.com/irqpilot/irqpilot/internal/host"
	"github.com/irqpilot/irqpilot/internal/kernel"
	"github.com/irqpilot/irqpilot/internal/load"
	"github.com/irqpilot/irqpilot/internal/setting"
)

// doctorOptions are doctor's flags.
type doctorOptions struct {
	g *globalFlags
	input
	duration     time.Duration
	showProgress bool
	after        string
	probeManaged bool
	cost         string
}

func newDoctorCmd(g *globalFlags) *cobra.Command {
	o := &doctorOptions{g: g}
	cmd := &cobra.Command{
		Use:   "doctor",
		Short: "Sample the machine and explain where interrupt handling holds it back",
		Long: `doctor takes two samples of the interrupt and CPU-time counters --duration
apart, and explains what it finds: each finding with an id, a severity
(info, warning, critical), the CPUs involved, the evidence numbers, why it
matters and its fix.

A fix that moves work (threads, IRQs, RPS, NAPI threads) is a plan, made
by the same code and cost model as 'irqpilot plan', with its prediction
per CPU; the commands shown are that plan's, and 'irqpilot plan --remedy
REF' writes it for 'irqpilot apply --verify'. It moves work only onto CPUs
with measured spare time (the %spare column: what a CPU can take before it
is 80% busy); where no CPU has it, the fix says what would help instead.
It moves a process only when that process serves the traffic (it owns a
listening socket the traffic arrives on, in any network namespace), never
a load generator beside it.

On captured state, doctor needs two samples: --root DIR (or --snapshot FILE)
is the first and --after DIR|FILE.tar.gz the second; the interval is the
difference of the two captures' /proc/uptime. The host model is read from
the second.

Exit status: 0 no finding of severity warning or worse, 1 such findings,
2 error.`,
		Args: cobra.NoArgs,
		RunE: runE(o),
	}
	f := cmd.Flags()
	f.DurationVar(&o.duration, "duration", 10*time.Second, "time between the two samples on the live machine")
	f.BoolVar(&o.showProgress, "progress", false, "show progress on stderr even when it is not a terminal")
	f.StringVar(&o.after, "after", "", "second sample for --root/--snapshot: a `DIR` or snapshot FILE.tar.gz captured later")
	addProbeManagedFlag(cmd, &o.probeManaged)
	addCostFlag(cmd, &o.cost)
	return cmd
}

// doctorReport is the JSON document (docs/json.md, "doctor --json").
type doctorReport struct {
	Hostname string          `json:"hostname,omitempty"`
	Interval float64         `json:"interval_seconds"`
	Findings []doctorFinding `json:"findings"`
	CPUs     []load.CPULoad  `json:"cpus"`
	Resets   []load.Reset    `json:"resets,omitempty"`
	Notes    []string        `json:"notes,omitempty"`
	// CostSource: "bpf" (interrupt time measured) or "counts" (estimated).
	CostSource string `json:"cost_source"`
	// Headroom is each CPU's measured spare time: the measurement every
	// remedy that moves work onto a CPU rests on.
	Headroom []diagnose.Headroom `json:"headroom"`
	// Consumers are the processes serving network traffic (live only);
	// only they are ever moved by a remedy.
	Consumers []kernel.SocketOwner `json:"consumers,omitempty"`
}

// complete opens the machine (--root, --snapshot: the first sample).
func (o *doctorOptions) complete(*cobra.Command, []string) error { return o.open(o.g) }

func (o *doctorOptions) validate() error {
	if o.fs.IsLive() {
		if o.after != "" {
			return flagErrorf("--after", "--after is for captured state (--root/--snapshot); on the live machine doctor samples twice, --duration apart")
		}
		if o.duration <= 0 {
			return flagErrorf("--duration", "--duration %v: must be positive", o.duration)
		}
	} else if o.after == "" {
		return flagErrorf("--after", "doctor on captured state needs two samples: give the later capture with --after DIR|FILE.tar.gz")
	}
	return validCost(o.cost, o.fs.IsLive())
}

func (o *doctorOptions) run(_ context.Context, out, errOut io.Writer) error {
	rep, err := o.diagnose(newProgress(errOut, o.showProgress))
	if err != nil {
		return err
	}
	if o.g.json {
		if err := writeJSON(out, rep); err != nil {
			return err
		}
	} else {
		printDoctor(out, rep)
	}
	return doctorExit(rep)
}

// diagnose measures the machine, reads its host model and diagnoses it;
// pr shows the live measurement's progress.
func (o *doctorOptions) diagnose(pr *progress) (*doctorReport, error) {
	m, last, closeLast, err := o.measure(pr)
	if err != nil {
		return nil, err
	}
	defer closeLast()
	h, err := readHost(last, o.probeManaged)
	if err != nil {
		return nil, err
	}
	netns := ""
	if ns, err := last.CurrentNetNS(); err == nil && !ns.Initial {
		netns = ns.String() // remedies fit this namespace, as plan's do
	}
	return doctorFor(h, m, netns), nil
}

// doctorExit is doctor's exit status: 1 for a finding of severity warning
// or worse.
func doctorExit(rep *doctorReport) error {
	worst := diagnose.Severity("")
	for _, f := range rep.Findings {
		if worst == "" || !worst.AtLeast(f.Severity) {
			worst = f.Severity
		}
	}
	if worst.AtLeast(diagnose.Warning) {
		return &exitError{code: 1}
	}
	return nil
}

// measure measures: the live machine --duration apart, or between the
// --root/--snapshot tree and --after. last is the file system the host
// model is read from; closeLast closes it when it is --after's.
func (o *doctorOptions) measure(pr *progress) (m *measurement, last *kernel.FS, closeLast func(), err error) {
	first := o.fs
	if first.IsLive() {
		defer pr.done()
		m, err := measureSpec{Duration: o.duration, Cost: o.cost, Tasks: true, Wait: func(d time.Duration) {
			pr.wait(d, "doctor: sampling interrupt and CPU counters, second sample in")
			pr.show("doctor: reading the second sample and the host model…")
		}}.live(first)
		return m, first, func() {}, err
	}
	second, closeSecond, err := openAfter(o.after)
	if err != nil {
		return nil, nil, nil, err
	}
	if m, err = measureCaptured(first, second, o.cost, true); err != nil {
		closeSecond()
		return nil, nil, nil, err
	}
	return m, second, closeSecond, nil
}

// doctorFor diagnoses the measurement on host h and gives each finding
// its remedy.
func doctorFor(h *host.Host, m *measurement, netns string) *doctorReport {
	l := m.Load
	rep := &doctorReport{Hostname: h.Hostname, Interval: l.Interval.Seconds(), Findings: []doctorFinding{}, CPUs: l.CPUs, Resets: l.Resets, Consumers: l.Consumers}
	for _, f := range diagnose.Diagnose(h, l) {
		rep.Findings = append(rep.Findings, withRemedy(h, l, f, netns))
	}
	for _, f := range rep.Findings {
		if f.ID != diagnose.IDAppOnIRQCPU && f.ID != diagnose.IDInterruptBound {
			continue
		}
		switch {
		case m.OwnersErr != nil:
			rep.Notes = append(rep.Notes, fmt.Sprintf("which processes consume the traffic is unknown (%v): no fix moves an application", m.OwnersErr))
		case !m.OwnersRead:
			rep.Notes = append(rep.Notes, "which processes consume the traffic is read only on the live machine: no fix moves an application")
		}
		break
	}
	for _, c := range l.CPUs {
		rep.Headroom = append(rep.Headroom, diagnose.HeadroomOf(l, c.ID))
	}
	var notes []string
	for _, u := range m.Unavailable {
		notes = append(notes, "unavailable: "+u)
	}
	for _, f := range h.MissingFeatures() {
		notes = append(notes, strings.TrimPrefix(f.Where(), "this ")+" cannot: "+setting.MissingText(f)+"; plans leave it out")
	}
	rep.Notes = append(notes, rep.Notes...)
	if len(l.Absent) > 0 {
		rep.Notes = append(rep.Notes, fmt.Sprintf("CPUs %v were online in only one sample; they are left out", l.Absent))
	}
	rep.CostSource = l.CostSource
	if m.CostNote != "" {
		rep.Notes = append(rep.Notes, m.CostNote)
	}
	return rep
}

func openAfter(arg string) (*kernel.FS, func(), error) {
	if strings.HasSuffix(arg, ".tar.gz") || strings.HasSuffix(arg, ".tgz") {
		return openSnapshot(arg)
	}
	fi, err := os.Stat(arg)
	if err != nil {
		return nil, nil, fmt.Errorf("--after %s: %w", arg, err)
	}
	if !fi.IsDir() {
		return nil, nil, fmt.Errorf("--after %s: neither a directory nor a .tar.gz snapshot", arg)
	}
	return kernel.New(arg), func() {}, nil
}
