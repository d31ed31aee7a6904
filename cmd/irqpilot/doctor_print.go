package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/irqpilot/irqpilot/internal/diagnose"
)

// printDoctor prints doctor's report as text.
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
	fmt.Fprintf(w, "  (%%spare: time a CPU can take before it is %.0f%% busy; fixes move work only onto CPUs with enough of it)\n", diagnose.HeadroomBusyMaxPct)
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
		writeProse(w, "  ", "  ", f.Summary)
		var evs []string
		for _, e := range f.Evidence {
			evs = append(evs, fmt.Sprintf("%s %s%s", e.Name, trimFloat(e.Value), unitSuffix(e.Unit)))
		}
		if len(evs) > 0 {
			writeProse(w, "  Evidence: ", "            ", strings.Join(evs, "; "))
		}
		writeProse(w, "  Why: ", "       ", f.Why)
		writeProse(w, "  Fix: ", "       ", f.Fix)
		if f.Remedy != nil && f.Remedy.Prediction != nil {
			writePrediction(w, f.Remedy.Prediction, "       ", true)
		}
		fmt.Fprintln(w)
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
