// Command irqpilot finds where a server's interrupt handling holds it back
// and fixes it, safely and measurably. One file per verb; each registers
// itself with rootCmd in init().
package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/irqpilot/irqpilot/internal/kernel"
)

// globalFlags are the flags every verb takes.
type globalFlags struct {
	root     string
	snapshot string
	json     bool
}

// global holds the parsed global flags.
var global globalFlags

// exactArgs is cobra.ExactArgs with a message that says what is missing.
func exactArgs(n int, what string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) != n {
			return fmt.Errorf("%s needs %s (got %d arguments)\nusage: %s", cmd.Name(), what, len(args), cmd.UseLine())
		}
		return nil
	}
}

var rootCmd = &cobra.Command{
	Use:   "irqpilot",
	Short: "Find and fix interrupt bottlenecks on Linux servers",
	Long: `irqpilot observes per-CPU interrupt and softirq load, diagnoses where
interrupt handling holds a server back, plans placements and steering from
proven policies, applies them transactionally with a journal, and measures
whether they help.`,
	SilenceUsage:  true,
	SilenceErrors: true,
}

func init() {
	pf := rootCmd.PersistentFlags()
	pf.StringVar(&global.root, "root", "/", "read the kernel files below `DIR` instead of /")
	pf.StringVar(&global.snapshot, "snapshot", "", "read a captured snapshot `FILE.tar.gz` (from 'irqpilot capture') instead of the live machine")
	pf.BoolVar(&global.json, "json", false, "print JSON for programs instead of text for people")
	rootCmd.MarkFlagsMutuallyExclusive("root", "snapshot")
}

// openFS returns the kernel file system selected by --root/--snapshot and a
// cleanup function to call when done.
func openFS() (*kernel.FS, func(), error) {
	if global.snapshot != "" {
		return kernel.OpenSnapshot(global.snapshot)
	}
	if _, err := os.Stat(global.root); err != nil {
		return nil, nil, fmt.Errorf("--root %s: %w", global.root, err)
	}
	return kernel.New(global.root), func() {}, nil
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
	err := rootCmd.Execute()
	if err == nil {
		return
	}
	var ee *exitError
	if errors.As(err, &ee) {
		if ee.err != nil {
			fmt.Fprintln(os.Stderr, "irqpilot:", ee.err)
		}
		os.Exit(ee.code)
	}
	fmt.Fprintln(os.Stderr, "irqpilot:", err)
	os.Exit(2)
}
