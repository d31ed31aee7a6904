package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/irqpilot/irqpilot/internal/kernel"
	"github.com/irqpilot/irqpilot/internal/load"
)

// doctorOptions are doctor's flags.
type doctorOptions struct {
	g            *globalFlags
	duration     time.Duration
	showProgress bool
	progress     *progress
	after        string
	probeManaged bool
	cost         string
	costNote     string // what interrupt cost was used, set by samples
	// owners are the socket owners read with the second live sample
	// (ownersRead), to tell the traffic's consumer from a load generator.
	owners     []kernel.SocketOwner
	ownersRead bool
	ownersErr  error
}

func newDoctorCmd(g *globalFlags) *cobra.Command {
	o := &doctorOptions{g: g}
	cmd := &cobra.Command{
		Use:   "doctor",
		Short: "Sample the machine and explain where interrupt handling holds it back",
		Long: `doctor takes two samples of the interrupt and CPU-time counters --duration
apart, and explains what it finds: each finding with an id, a severity
(info, warning, critical), the CPUs involved, the evidence numbers, why it
matters and the policy or command that fixes it.

A fix moves work (threads, IRQs, RPS) only onto CPUs with measured spare
time (the %spare column: what a CPU can take before it is 80% busy) and
prints the prediction; where no CPU has it, the fix says what would help
instead. It moves a process only when that process serves the traffic (it
owns a listening socket the traffic arrives on, in any network namespace),
never a load generator beside it.

On captured state, doctor needs two samples: --root DIR (or --snapshot FILE)
is the first and --after DIR|FILE.tar.gz the second; the interval is the
difference of the two captures' /proc/uptime. The host model is read from
the second.

Exit status: 0 no finding of severity warning or worse, 1 such findings,
2 error.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o.progress = newProgress(cmd.ErrOrStderr(), o.showProgress)
			return o.run(cmd.OutOrStdout())
		},
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
	Hostname string         `json:"hostname,omitempty"`
	Interval float64        `json:"interval_seconds"`
	Findings []load.Finding `json:"findings"`
	CPUs     []load.CPULoad `json:"cpus"`
	Resets   []load.Reset   `json:"resets,omitempty"`
	Notes    []string       `json:"notes,omitempty"`
	// CostSource: "bpf" (interrupt time measured) or "counts" (estimated).
	CostSource string `json:"cost_source"`
	// Headroom is each CPU's measured spare time: the measurement every
	// fix that moves work onto a CPU rests on.
	Headroom []load.Headroom `json:"headroom"`
	// Consumers are the processes serving network traffic (live only);
	// only they are ever moved by a fix.
	Consumers []kernel.SocketOwner `json:"consumers,omitempty"`
}

func (o *doctorOptions) run(out io.Writer) error {
	first, closeFirst, err := o.g.openFS()
	if err != nil {
		return err
	}
	defer closeFirst()
	prev, cur, last, closeLast, err := o.samples(first)
	if err != nil {
		return err
	}
	defer closeLast()
	rep, err := o.diagnose(prev, cur, last)
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
	if load.Worst(rep.Findings).AtLeast(load.Warning) {
		return &exitError{code: 1}
	}
	return nil
}

// samples takes the two samples: of the live machine --duration apart, or
// of the --root/--snapshot tree and of --after. last is the file system the
// host model is read from; closeLast closes it when it is --after's.
func (o *doctorOptions) samples(first *kernel.FS) (prev, cur *load.Sample, last *kernel.FS, closeLast func(), err error) {
	closeLast = func() {}
	if first.IsLive() {
		if o.after != "" {
			return nil, nil, nil, nil, fmt.Errorf("--after is for captured state (--root/--snapshot); on the live machine doctor samples twice, --duration apart")
		}
		if o.duration <= 0 {
			return nil, nil, nil, nil, fmt.Errorf("--duration %v: must be positive", o.duration)
		}
		reader, stopCost, note, err := startCost(o.cost, first)
		if err != nil {
			return nil, nil, nil, nil, err
		}
		defer stopCost()
		o.costNote = note
		s := load.NewSampler(first)
		s.Tasks = true
		s.Cost = reader
		if prev, err = s.Sample(); err != nil {
			return nil, nil, nil, nil, err
		}
		o.progress.wait(o.duration, "doctor: sampling interrupt and CPU counters, second sample in")
		o.progress.show("doctor: reading the second sample and the host model…")
		defer o.progress.done()
		if cur, err = s.Sample(); err != nil {
			return nil, nil, nil, nil, err
		}
		// Who reads the traffic: processes serving listening sockets, in
		// every network namespace (read-only netlink dumps).
		o.owners, o.ownersErr = first.SocketOwners()
		o.ownersRead = o.ownersErr == nil
		return prev, cur, first, closeLast, nil
	}
	if o.after == "" {
		return nil, nil, nil, nil, fmt.Errorf("doctor on captured state needs two samples: give the later capture with --after DIR|FILE.tar.gz")
	}
	if _, _, o.costNote, err = startCost(o.cost, first); err != nil {
		return nil, nil, nil, nil, err
	}
	second, closeSecond, err := openAfter(o.after)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	smp := make([]*load.Sample, 2)
	for i, fs := range []*kernel.FS{first, second} {
		s := load.NewSampler(fs)
		s.Tasks = true
		if smp[i], err = s.Sample(); err != nil {
			closeSecond()
			return nil, nil, nil, nil, err
		}
	}
	return smp[0], smp[1], second, closeSecond, nil
}

// diagnose turns the two samples into the report, reading the host model
// from last.
func (o *doctorOptions) diagnose(prev, cur *load.Sample, last *kernel.FS) (*doctorReport, error) {
	l, err := load.Rates(prev, cur)
	if err != nil {
		return nil, err
	}
	h, err := readHost(last, o.probeManaged)
	if err != nil {
		return nil, err
	}
	var notes []string
	if o.ownersRead {
		l.SetConsumers(o.owners)
	}
	rep := &doctorReport{Hostname: h.Hostname, Interval: l.Interval.Seconds(), Findings: nonNil(load.Diagnose(h, l)), CPUs: l.CPUs, Resets: l.Resets, Consumers: l.Consumers}
	for _, f := range rep.Findings {
		if f.ID != load.IDAppOnIRQCPU && f.ID != load.IDInterruptBound {
			continue
		}
		switch {
		case o.ownersErr != nil:
			notes = append(notes, fmt.Sprintf("which processes consume the traffic is unknown (%v): no fix moves an application", o.ownersErr))
		case !o.ownersRead:
			notes = append(notes, "which processes consume the traffic is read only on the live machine: no fix moves an application")
		}
		break
	}
	for _, c := range l.CPUs {
		rep.Headroom = append(rep.Headroom, l.Headroom(c.ID))
	}
	for _, u := range append(prev.Unavailable, cur.Unavailable...) {
		rep.Notes = append(rep.Notes, "unavailable: "+u)
	}
	rep.Notes = append(rep.Notes, notes...)
	if len(l.Absent) > 0 {
		rep.Notes = append(rep.Notes, fmt.Sprintf("CPUs %v were online in only one sample; they are left out", l.Absent))
	}
	rep.CostSource = l.CostSource
	if o.costNote != "" {
		if l.CostSource != load.CostBPF && o.costNote == costMeasuredNote {
			o.costNote = "interrupt cost: estimated from counts (the eBPF maps could not be read in both samples)"
		}
		rep.Notes = append(rep.Notes, o.costNote)
	}
	return rep, nil
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

func printDoctor(w io.Writer, r *doctorReport) {
	name := r.Hostname
	if name == "" {
		name = "this host"
	}
	fmt.Fprintf(w, "irqpilot doctor: %s, %d CPUs sampled over %.1f s\n\n", name, len(r.CPUs), r.Interval)
	fmt.Fprintf(w, "  CPU    %%usr   %%sys   %%irq  %%soft  %%idle   NET_RX/s  IRQs/s  %%spare\n")
	for i, c := range r.CPUs {
		spare := "     -"
		if i < len(r.Headroom) && r.Headroom[i].Measured {
			spare = fmt.Sprintf("%6.1f", r.Headroom[i].Spare)
		}
		fmt.Fprintf(w, "  %-4d %6.1f %6.1f %6.1f %6.1f %6.1f %10.0f %7.0f  %s\n",
			c.ID, c.User+c.Nice, c.System, c.IRQ, c.SoftIRQ, c.Idle, c.NetRx, c.Interrupts, spare)
	}
	fmt.Fprintf(w, "  (%%spare: time a CPU can take before it is %.0f%% busy; fixes move work only onto CPUs with enough of it)\n", load.HeadroomBusyMaxPct)
	fmt.Fprintln(w)
	if len(r.Findings) == 0 {
		fmt.Fprintln(w, "No findings: interrupt handling does not hold this machine back in this interval.")
	}
	for _, f := range r.Findings {
		cpus := ""
		if len(f.CPUs) > 0 {
			cpus = " (CPU " + strings.Trim(strings.Join(strings.Fields(fmt.Sprint(f.CPUs)), ","), "[]") + ")"
		}
		fmt.Fprintf(w, "%s  %s%s\n", strings.ToUpper(string(f.Severity)), f.ID, cpus)
		fmt.Fprintf(w, "  %s\n", f.Summary)
		var evs []string
		for _, e := range f.Evidence {
			evs = append(evs, fmt.Sprintf("%s %s%s", e.Name, trimFloat(e.Value), unitSuffix(e.Unit)))
		}
		if len(evs) > 0 {
			fmt.Fprintf(w, "  Evidence: %s\n", strings.Join(evs, "; "))
		}
		fmt.Fprintf(w, "  Why: %s\n", f.Why)
		fmt.Fprintf(w, "  Fix: %s\n\n", f.Fix)
	}
	for _, n := range r.Notes {
		fmt.Fprintf(w, "Note: %s\n", n)
	}
}

func trimFloat(v float64) string {
	s := fmt.Sprintf("%.2f", v)
	s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	return s
}

func unitSuffix(u string) string {
	switch u {
	case "", "node", "pid":
		return ""
	case "%", "/s":
		return u
	}
	return " " + u
}
