// Command irqpilot finds where a server's interrupt handling holds it back
// and fixes it, safely and measurably. One file per verb: newXCmd builds the
// verb, binding its flags into an options struct that runE runs as kubectl
// runs its commands: complete fills in what the flags and arguments imply
// (and opens the machine), validate refuses a bad combination naming the
// flag, run makes the library calls and hands the result to a renderer;
// newRootCmd assembles the tree. No flag lives in a package variable.
package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/irqpilot/irqpilot/internal/bench/workload"
	"github.com/irqpilot/irqpilot/internal/kernel"

	"github.com/spf13/cobra"
)

// globalFlags are the flags every verb takes.
type globalFlags struct {
	root     string
	snapshot string
	json     bool
}

// newRootCmd builds the command tree with a fresh set of flags.
func newRootCmd() *cobra.Command {
	g := &globalFlags{}
	root := &cobra.Command{
		Use:   "irqpilot",
		Short: "Find and fix interrupt bottlenecks on Linux servers",
		Long: `irqpilot observes per-CPU interrupt and softirq load, diagnoses where
interrupt handling holds a server back, plans placements and steering from
proven policies, applies them transactionally with a journal, and measures
whether they help.

The plan file's format is irqpilot-plan(5).

Exit status 65, for every command: the input was refused for one of its
limits (a --snapshot archive, a file in it or in a --root tree too large
to read), naming the limit; nothing is left behind. Each command's own
statuses are in its --help (2 is an error, and also what the Go runtime
exits with when the program dies).

Documentation: the docs/ directory of the source (installed by the package
in /usr/share/doc/irqpilot/), also at
https://github.com/irqpilot/irqpilot/tree/main/docs.`,
		Version:       versionString(),
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetVersionTemplate("irqpilot {{.Version}}\n")
	pf := root.PersistentFlags()
	pf.StringVar(&g.root, "root", "/", "read the kernel files below `DIR` instead of /")
	pf.StringVar(&g.snapshot, "snapshot", "", "read a captured snapshot `FILE.tar.gz` (from 'irqpilot capture') instead of the live machine")
	pf.BoolVar(&g.json, "json", false, "print JSON for programs instead of text for people")
	root.MarkFlagsMutuallyExclusive("root", "snapshot")

	root.AddCommand(
		// observe
		newInventoryCmd(g), newCaptureCmd(g), newTopCmd(g), newDoctorCmd(g), newRecordCmd(g), newReportCmd(),
		// plan and change
		newPlanCmd(g), newApplyCmd(g), newRevertCmd(g), newVerifyCmd(g), newHistoryCmd(g), newPersistCmd(),
		// keep tuned
		newAgentCmd(g), newStatusCmd(g),
		// measure
		newBenchCmd(g), newTuneCmd(g), newTestbedCmd(g),
		// coalescing
		newSimCmd(g), newCoalesceCmd(g),
		// try on a virtual server
		newLabCmd(g),
	)
	root.AddCommand(newManCmd(root))
	setExamples(root)
	return root
}

// exitError carries a specific exit status (doctor: 1 = findings).
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string {
	if e.err == nil {
		return fmt.Sprintf("exit status %d", e.code)
	}
	return e.err.Error()
}

func main() {
	// The udp workload's sink and sender are this binary started again
	// (see workload.RunHelper): run the helper instead of the command line.
	if mode := os.Getenv(workload.HelperEnv); mode != "" {
		os.Exit(workload.RunHelper(mode, os.Args[1:], os.Stdout, os.Stderr))
	}
	limitHeapToAddressSpace()
	err := newRootCmd().Execute()
	if err == nil {
		return
	}
	var ee *exitError
	if errors.Is(err, kernel.ErrOverLimit) && (!errors.As(err, &ee) || ee.code == 2) {
		// A refusal for a limit is not a crash (Go's runtime exits 2).
		fmt.Fprintln(os.Stderr, "irqpilot:", err)
		os.Exit(kernel.ExitOverLimit)
	}
	if errors.As(err, &ee) {
		if ee.err != nil {
			fmt.Fprintln(os.Stderr, "irqpilot:", ee.err)
		}
		os.Exit(ee.code)
	}
	fmt.Fprintln(os.Stderr, "irqpilot:", err)
	os.Exit(2)
}
