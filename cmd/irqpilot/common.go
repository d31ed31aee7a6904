package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/irqpilot/irqpilot/internal/apply"
	"github.com/irqpilot/irqpilot/internal/host"
	"github.com/irqpilot/irqpilot/internal/kernel"
)

// verb is a command's options, run the way kubectl runs its commands
// (Complete, Validate, Run): the options hold the flags and what they
// resolve to; run does the work, printing to out and errOut.
type verb interface {
	run(ctx context.Context, out, errOut io.Writer) error
}

// completer is a verb with inputs to fill in before it is validated: its
// positional arguments, defaults that depend on other flags, the kernel
// file system it reads.
type completer interface {
	complete(cmd *cobra.Command, args []string) error
}

// validator is a verb whose options can be refused as given: validate
// checks their combination, reads and writes nothing, and names the flag.
type validator interface {
	validate() error
}

// cleaner is a verb that holds something complete opened (an unpacked
// snapshot) until the command ends, whether it ran or was refused.
type cleaner interface {
	cleanup()
}

// runE is the RunE of every verb: complete, validate, run.
func runE(o verb) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		if c, ok := o.(cleaner); ok {
			defer c.cleanup()
		}
		if c, ok := o.(completer); ok {
			if err := c.complete(cmd, args); err != nil {
				return err
			}
		}
		if v, ok := o.(validator); ok {
			if err := v.validate(); err != nil {
				return err
			}
		}
		ctx := cmd.Context()
		if ctx == nil {
			ctx = context.Background()
		}
		return o.run(ctx, cmd.OutOrStdout(), cmd.ErrOrStderr())
	}
}

// flagError is an option refused by validate: flag names it ("--interval",
// "-o") and err says why, in the words the command always used.
type flagError struct {
	flag string
	err  error
}

func (e *flagError) Error() string { return e.err.Error() }
func (e *flagError) Unwrap() error { return e.err }

// flagErrorf is a flagError for flag with a formatted message.
func flagErrorf(flag, format string, args ...any) error {
	return &flagError{flag: flag, err: fmt.Errorf(format, args...)}
}

// input is the kernel file system a verb reads (--root or --snapshot),
// opened by complete and closed when the command ends.
type input struct {
	fs   *kernel.FS
	done func()
}

// open opens the file system g selects.
func (in *input) open(g *globalFlags) error {
	fs, done, err := g.openFS()
	if err != nil {
		return err
	}
	in.fs, in.done = fs, done
	return nil
}

func (in *input) cleanup() {
	if in.done != nil {
		in.done()
		in.done = nil
	}
}

// openFS returns the kernel file system selected by --root/--snapshot and a
// cleanup function to call when done.
func (g *globalFlags) openFS() (*kernel.FS, func(), error) {
	if g.snapshot != "" {
		return openSnapshot(g.snapshot)
	}
	if _, err := os.Stat(g.root); err != nil {
		return nil, nil, fmt.Errorf("--root %s: %w", g.root, err)
	}
	return kernel.New(g.root), func() {}, nil
}

// openSnapshot unpacks a snapshot and tells, on stderr, what unpacking it
// left out or changed (kernel.FS.SnapshotWarnings).
func openSnapshot(file string) (*kernel.FS, func(), error) {
	fs, done, err := kernel.OpenSnapshot(file)
	if err != nil {
		return nil, nil, err
	}
	for _, w := range fs.SnapshotWarnings() {
		fmt.Fprintf(os.Stderr, "warning: snapshot %s: %s\n", file, w)
	}
	return fs, done, nil
}

// sourceName says which machine the verb read, for text output.
func (g *globalFlags) sourceName() string {
	switch {
	case g.snapshot != "":
		return "snapshot " + g.snapshot
	case g.root != "" && g.root != "/":
		return "root " + g.root
	}
	return "live"
}

// addProbeManagedFlag adds --probe-managed (inventory, plan, doctor,
// capture), bound to dst.
func addProbeManagedFlag(c *cobra.Command, dst *bool) {
	c.Flags().BoolVar(dst, "probe-managed", false,
		"write each IRQ's current affinity back to /proc/irq/N/smp_affinity_list to find kernel-managed IRQs (root; "+
			"default: write nothing, read debugfs and apply's record in "+apply.DefaultStateDir+", else managed is unknown)")
}

// stateDirFlag adds --state-dir (apply, revert, history, persist).
func stateDirFlag(cmd *cobra.Command, dst *string) {
	cmd.Flags().StringVar(dst, "state-dir", apply.DefaultStateDir, "`DIR` for journals and the lock (must be root's and private: see docs/safety.md)")
}

// existingStateDir refuses a --state-dir given on the command line that does
// not exist, for the verbs that only read one (revert, history, verify): a
// typo must not read as "nothing to revert", and must not create the
// directory either. The default directory may be missing on a machine where
// nothing was applied yet; those verbs then say there is nothing.
func existingStateDir(cmd *cobra.Command, dir string) error {
	if !cmd.Flags().Changed("state-dir") {
		return nil
	}
	st, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("--state-dir %s: no such directory (nothing was ever applied with it; check the path)", dir)
	case err != nil:
		return fmt.Errorf("--state-dir %s: %w", dir, err)
	case !st.IsDir():
		return fmt.Errorf("--state-dir %s: not a directory", dir)
	}
	return nil
}

// readHost builds the model for the read-only commands: it writes nothing
// unless probe (--probe-managed) is set.
func readHost(fs *kernel.FS, probe bool) (*host.Host, error) {
	return readHostWith(fs, probe, apply.DefaultStateDir)
}

// readHostWith builds the model. With probe, on the live machine as root,
// kernel-managed IRQs are found by writing each IRQ's own affinity back (the
// kernel refuses the write for managed ones), under the machine-wide write
// lock. Otherwise the managed state comes, without writing, from debugfs,
// from apply's record in stateDir or from a capture, or is unknown.
func readHostWith(fs *kernel.FS, probe bool, stateDir string) (*host.Host, error) {
	return host.Read(fs, host.Options{ProbeManaged: probe && fs.IsLive() && os.Geteuid() == 0, StateDir: stateDir})
}

// writeJSON prints v indented, the form of most --json documents.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// writeJSONLine prints v on one line (plan -o, bench, tune, testbed).
func writeJSONLine(w io.Writer, v any) error {
	return json.NewEncoder(w).Encode(v)
}

// stopSignals end a run that owns machine state (changes, a test bed, the
// lab's namespace and guests) the way Ctrl-C does. SIGHUP is among them: a
// lost terminal must not kill such a run and leave its state behind —
// unless the run was started ignoring it (nohup): listening for a signal
// the process ignores would undo nohup.
var stopSignals = func() []os.Signal {
	sigs := []os.Signal{os.Interrupt, syscall.SIGTERM}
	if !signal.Ignored(syscall.SIGHUP) {
		sigs = append(sigs, syscall.SIGHUP)
	}
	return sigs
}()

// signalContext is cancelled on Ctrl-C, SIGTERM or SIGHUP, so runs stop,
// every change is reverted and the test bed removed.
func signalContext() (context.Context, func()) {
	return signal.NotifyContext(context.Background(), stopSignals...)
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func joinErr(a, b error) error {
	switch {
	case a == nil:
		return b
	case b == nil:
		return a
	}
	return fmt.Errorf("%w; %w", a, b)
}

// nameList is a list flag of interface names: each value is split at
// commas, nothing else. pflag's StringSlice reads a value as CSV, which
// refused a name with a double quote (the kernel allows one: a name is any
// bytes but '/', ':' and white space) with a CSV parse error.
type nameList struct {
	names   *[]string
	changed bool
}

func newNameList(p *[]string) *nameList { return &nameList{names: p} }

func (l *nameList) Set(v string) error {
	if !l.changed {
		*l.names = nil
		l.changed = true
	}
	*l.names = append(*l.names, strings.Split(v, ",")...) // an empty name is refused by the command, naming the flag
	return nil
}

func (l *nameList) Type() string { return "strings" }

func (l *nameList) String() string { return strings.Join(*l.names, ",") }

// Append and Replace make it a pflag.SliceValue, as StringSlice is.
func (l *nameList) Append(v string) error { return l.Set(v) }

func (l *nameList) Replace(v []string) error {
	*l.names = append([]string(nil), v...)
	return nil
}

func (l *nameList) GetSlice() []string { return *l.names }
