package main

import (
	"context"
	"debug/elf"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/irqpilot/irqpilot/internal/lab"
)

type labOptions struct {
	shape   string
	shell   bool
	list    bool
	binary  string
	timeout time.Duration
}

// newLabCmd: try irqpilot on a virtual server-shaped machine.
func newLabCmd() *cobra.Command {
	o := &labOptions{}
	c := &cobra.Command{
		Use:   "lab [--shape NAME] [--shell | -- COMMAND...]",
		Short: "Try irqpilot on a virtual server-shaped machine (QEMU, Debian's kernel)",
		Long: `lab boots a virtual machine of a chosen shape — CPUs in packages, cores and
SMT threads, NUMA nodes, a multi-queue virtio-net on a chosen node, an
e1000e, NVMe, multi-queue virtio-blk — with Debian's own kernel and drivers
and this irqpilot inside, runs a command there (or gives a shell) and powers
it off. Try every policy on a 32-CPU, 4-node server before touching a real
one: nothing on this machine changes but a cache of Debian's kernel package
and a network namespace that lives as long as the guest.

QEMU runs under software emulation where there is no KVM: right for what the
kernel shows and does, useless for speed. Needs root, qemu-system-x86,
busybox-static and apt (the kernel package is fetched once with apt-get
download into ` + lab.DefaultCache() + `).`,
		Example: `  irqpilot lab --list
  irqpilot lab --shape server -- irqpilot inventory
  irqpilot lab --shape server -- irqpilot plan --policy per-queue --device eth0
  irqpilot lab --shape small --shell`,
		RunE: func(cmd *cobra.Command, args []string) error {
			return o.run(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr(), args)
		},
	}
	f := c.Flags()
	f.StringVar(&o.shape, "shape", "small", "the machine: "+strings.Join(lab.ShapeNames(), ", "))
	f.BoolVar(&o.shell, "shell", false, "a shell on the guest's console instead of a command")
	f.BoolVar(&o.list, "list", false, "list the shapes and exit")
	f.StringVar(&o.binary, "guest-binary", "", "the irqpilot `FILE` to put into the guest (default: this one; it must be statically linked)")
	f.DurationVar(&o.timeout, "timeout", 15*time.Minute, "give up on the guest after this long, boot included")
	return c
}

func (o *labOptions) run(ctx context.Context, out, errw io.Writer, args []string) error {
	if o.list {
		tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "SHAPE\tCPUS\tNODES\tMACHINE")
		for _, n := range lab.ShapeNames() {
			s := lab.Shapes[n]
			fmt.Fprintf(tw, "%s\t%d\t%d\t%s\n", n, s.CPUs(), s.Nodes, s.Note)
		}
		return tw.Flush()
	}
	s, err := lab.Lookup(o.shape)
	if err != nil {
		return err
	}
	if !o.shell && len(args) == 0 {
		return fmt.Errorf("give a command to run in the guest after --, or --shell")
	}
	if o.shell && len(args) > 0 {
		return fmt.Errorf("--shell takes no command")
	}
	if o.timeout <= 0 {
		return fmt.Errorf("--timeout must be positive, got %s", o.timeout)
	}
	bin := o.binary
	if bin == "" {
		if bin, err = os.Executable(); err != nil {
			return err
		}
	}
	if err := checkStatic(bin); err != nil {
		return err
	}
	if os.Geteuid() != 0 {
		return fmt.Errorf("lab needs root: it creates a network namespace for the guest's NICs")
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	r, err := lab.Run(ctx, lab.Options{
		Shape: s, Shell: o.shell, Script: shellJoin(args),
		Irqpilot: bin, Timeout: o.timeout, Log: errw,
	})
	if err != nil {
		return err
	}
	if o.shell {
		return nil
	}
	fmt.Fprint(out, r.Output)
	fmt.Fprintf(errw, "lab: %s ran in %s (boot included); exit status %d\n", s.Name, r.Elapsed.Round(time.Second), r.ExitCode)
	if r.ExitCode != 0 {
		return &exitError{code: r.ExitCode}
	}
	return nil
}

// checkStatic refuses a dynamically linked binary: the guest has no C
// library to load it with.
func checkStatic(p string) error {
	f, err := elf.Open(p)
	if err != nil {
		return fmt.Errorf("guest binary %s: %w", p, err)
	}
	defer f.Close()
	for _, ph := range f.Progs {
		if ph.Type == elf.PT_INTERP {
			return fmt.Errorf("guest binary %s is dynamically linked; the guest has no C library: build with CGO_ENABLED=0 (make build does) or name one with --guest-binary", p)
		}
	}
	return nil
}

// shellJoin quotes args for the guest's shell.
func shellJoin(args []string) string {
	q := make([]string, len(args))
	for i, a := range args {
		q[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
	}
	return strings.Join(q, " ")
}
