package main

import (
	"context"
	"debug/elf"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/irqpilot/irqpilot/internal/kernel"
	"github.com/irqpilot/irqpilot/internal/lab"
)

type labOptions struct {
	g       *globalFlags
	shape   string
	kernel  string
	shell   bool
	list    bool
	binary  string
	timeout time.Duration
	fleet   int
	dir     string
	args    []string // the command to run in the guest
}

// newLabCmd: try irqpilot on a virtual server-shaped machine.
func newLabCmd(g *globalFlags) *cobra.Command {
	o := &labOptions{g: g}
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
  irqpilot lab --shape small --shell
  irqpilot lab --fleet 4 --fleet-dir /tmp/fleet    # until Ctrl-C; prints how to reach the guests`,
		RunE: runE(o),
	}
	f := c.Flags()
	f.StringVar(&o.kernel, "kernel", lab.DefaultKernel, "the Debian kernel the guest boots, by version: "+strings.Join(lab.KernelVersions(), ", "))
	f.StringVar(&o.shape, "shape", "small", "the machine: "+strings.Join(lab.ShapeNames(), ", "))
	f.BoolVar(&o.shell, "shell", false, "a shell on the guest's console instead of a command")
	f.BoolVar(&o.list, "list", false, "list the shapes and exit")
	f.StringVar(&o.binary, "guest-binary", "", "the irqpilot `FILE` to put into the guest (default: this one; it must be statically linked)")
	f.DurationVar(&o.timeout, "timeout", 15*time.Minute, "give up on the guest after this long, boot included")
	f.IntVar(&o.fleet, "fleet", 0, "start `N` Debian guests with systemd and an SSH server on a bridge in a namespace of their own, keep them up until interrupted (no irqpilot in them: roll it out, e.g. with deploy/ansible)")
	f.StringVar(&o.dir, "fleet-dir", "", "with --fleet: the `DIR` for the SSH key, known_hosts and Ansible inventory (default: a new directory under $TMPDIR)")
	return c
}

// complete takes the guest's command and, unless --guest-binary names
// one, this binary for the guest.
func (o *labOptions) complete(_ *cobra.Command, args []string) error {
	o.args = args
	if o.binary == "" && !o.list && o.fleet == 0 && o.dir == "" {
		var err error
		if o.binary, err = os.Executable(); err != nil {
			return err
		}
	}
	return nil
}

func (o *labOptions) validate() error {
	switch {
	case o.list:
		return nil
	case o.fleet != 0 || o.dir != "":
		if o.fleet < 1 {
			return flagErrorf("--fleet", "--fleet needs a number of guests, at least 1 (got %d)", o.fleet)
		}
		if o.shell || len(o.args) > 0 {
			return flagErrorf("--fleet", "--fleet takes neither --shell nor a command: reach the guests over SSH")
		}
		return nil
	}
	if _, err := lab.Lookup(o.shape); err != nil {
		return &flagError{flag: "--shape", err: err}
	}
	if !o.shell && len(o.args) == 0 {
		return flagErrorf("--shell", "give a command to run in the guest after --, or --shell")
	}
	if o.shell && len(o.args) > 0 {
		return flagErrorf("--shell", "--shell takes no command")
	}
	if o.timeout <= 0 {
		return flagErrorf("--timeout", "--timeout must be positive, got %s", o.timeout)
	}
	return nil
}

func (o *labOptions) run(ctx context.Context, out, errw io.Writer) error {
	if o.list {
		return renderShapes(out, o.g != nil && o.g.json)
	}
	if o.fleet != 0 || o.dir != "" {
		return o.runFleet(ctx, out, errw)
	}
	s, err := lab.Lookup(o.shape)
	if err != nil {
		return err
	}
	bin := o.binary
	if err := checkStatic(bin); err != nil {
		return err
	}
	if os.Geteuid() != 0 {
		return fmt.Errorf("lab needs root: it creates a network namespace for the guest's NICs")
	}
	ctx, stop := signal.NotifyContext(ctx, stopSignals...)
	defer stop()
	r, err := lab.Run(ctx, lab.Options{
		FS:    kernel.New("/"),
		Shape: s, Shell: o.shell, Script: shellJoin(o.args),
		Irqpilot: bin, Timeout: o.timeout, Log: errw, Kernel: o.kernel,
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

// renderShapes lists the shapes (lab --list), as a table or JSON.
func renderShapes(out io.Writer, asJSON bool) error {
	if asJSON {
		return writeJSON(out, labShapesJSON())
	}
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SHAPE\tCPUS\tNODES\tMACHINE")
	for _, n := range lab.ShapeNames() {
		s := lab.Shapes[n]
		fmt.Fprintf(tw, "%s\t%d\t%d\t%s\n", n, s.CPUs(), s.Nodes, s.Note)
	}
	return tw.Flush()
}

// labShapeJSON is one shape of `lab --list --json` (docs/json.md).
type labShapeJSON struct {
	Name    string `json:"name"`
	CPUs    int    `json:"cpus"`
	Sockets int    `json:"packages"`
	Cores   int    `json:"cores_per_package"`
	Threads int    `json:"threads_per_core"`
	Nodes   int    `json:"nodes"`
	NICs    []struct {
		Model  string `json:"model"`
		Queues int    `json:"queues"`
		Node   int    `json:"node"`
	} `json:"nics"`
	NVMe      bool   `json:"nvme"`
	BlkQueues int    `json:"virtio_blk_queues"`
	Note      string `json:"note"`
}

func labShapesJSON() []labShapeJSON {
	out := []labShapeJSON{}
	for _, n := range lab.ShapeNames() {
		s := lab.Shapes[n]
		j := labShapeJSON{Name: n, CPUs: s.CPUs(), Sockets: s.Sockets, Cores: s.Cores, Threads: s.Threads, Nodes: s.Nodes,
			NVMe: s.NVMe, BlkQueues: s.BlkQueues, Note: s.Note}
		for _, nic := range s.NICs {
			j.NICs = append(j.NICs, struct {
				Model  string `json:"model"`
				Queues int    `json:"queues"`
				Node   int    `json:"node"`
			}{nic.Model, max(1, nic.Queues), nic.Node})
		}
		out = append(out, j)
	}
	return out
}
