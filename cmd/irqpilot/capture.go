package main

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/irqpilot/irqpilot/internal/capture"
	"github.com/irqpilot/irqpilot/internal/host"
	"github.com/irqpilot/irqpilot/internal/kernel"
	"github.com/irqpilot/irqpilot/internal/load"
	"github.com/irqpilot/irqpilot/internal/outfile"
)

// captureOptions are capture's flags.
type captureOptions struct {
	g *globalFlags
	input
	output       string
	redact       bool
	probeManaged bool
}

// captureResultJSON is `capture --json` (docs/json.md): the archive
// written, what was left out, and the model the capture was made from.
type captureResultJSON struct {
	Output string `json:"output"`
	*capture.Result
	Host *host.Host `json:"host"`
}

func newCaptureCmd(g *globalFlags) *cobra.Command {
	o := &captureOptions{g: g}
	cmd := &cobra.Command{
		Use:   "capture -o FILE.tar.gz",
		Short: "Archive exactly the kernel files irqpilot reads, for --snapshot elsewhere",
		Long: `capture runs the same reads as 'inventory' and one load sample, recording
every file read, directory listed and symlink followed, and writes them to a
.tar.gz. 'irqpilot --snapshot FILE <command>' then works on that machine's
state anywhere.

The archive holds nothing else: only paths below /proc and /sys plus
/etc/default/irqbalance and /etc/sysconfig/irqbalance; never a process's
command line; a process environment only as its IRQBALANCE_* variables.
Facts learned without a file (ethtool settings, which IRQs the kernel
manages) are stored under irqpilot/ in the archive. With --json, prints what
was archived and the model the capture was made from.`,
		Args: cobra.NoArgs,
		RunE: runE(o),
	}
	cmd.Flags().StringVarP(&o.output, "output", "o", "", "write the snapshot to `FILE.tar.gz` (- for standard output)")
	addProbeManagedFlag(cmd, &o.probeManaged)
	cmd.Flags().BoolVar(&o.redact, "redact", false, "keep only the kernel command-line parameters irqpilot reads (isolcpus=, nohz_full=, irqaffinity=, …), not the whole /proc/cmdline")
	return cmd
}

// complete opens the machine to capture.
func (o *captureOptions) complete(*cobra.Command, []string) error { return o.open(o.g) }

func (o *captureOptions) validate() error {
	if o.output == "" {
		return flagErrorf("-o", "capture: -o FILE.tar.gz is required")
	}
	return nil
}

// run captures; the summary goes to out, or to errOut when the archive
// does (-o -).
func (o *captureOptions) run(_ context.Context, out, errOut io.Writer) error {
	if o.output == "-" {
		out = errOut
	}
	h, res, err := captureTo(o.fs, o.output, o.probeManaged, capture.Options{RedactCmdline: o.redact})
	if err != nil {
		return err
	}
	return o.render(out, h, res)
}

// render prints what was archived (with --json, and the model).
func (o *captureOptions) render(out io.Writer, h *host.Host, res *capture.Result) error {
	if o.g.json {
		return writeJSON(out, captureResultJSON{o.output, res, h})
	}
	fmt.Fprintf(out, "wrote %s: %d files (%d bytes of content), %d directories, %d symlinks; %d IRQs, %d NICs, %d block devices\n",
		o.output, res.Files, res.Bytes, res.Dirs, res.Symlinks, len(h.IRQs), len(h.NICs), len(h.Block))
	for _, r := range res.Refused {
		fmt.Fprintf(out, "  not archived: %s: %s\n", r.Path, r.Reason)
	}
	return nil
}

// captureTo reads the host with recording on and writes the archive to
// output through outfile (a regular file whole or not at all; a device or
// pipe written through).
func captureTo(fs *kernel.FS, output string, probe bool, copts capture.Options) (*host.Host, *capture.Result, error) {
	fs.StartRecording()
	h, err := readHost(fs, probe)
	if err != nil {
		fs.StopRecording()
		return nil, nil, err
	}
	// One load sample, so that observe/doctor work on the snapshot too: every
	// counter file it reads goes through fs and is archived. Its failure
	// (say, a test tree without /proc/stat) only leaves files out.
	_, _ = load.NewSampler(fs).Sample()
	// A snapshot's interval clock is its /proc/uptime (load.ClockUptime),
	// which the sampler reads only below a root other than "/".
	_, _ = fs.Uptime()
	fs.StopRecording()

	if output == "-" {
		res, err := capture.WriteWith(os.Stdout, fs, copts)
		return h, res, err
	}
	f, err := outfile.Create(output)
	if err != nil {
		return nil, nil, fmt.Errorf("capture: %w", err)
	}
	res, err := capture.WriteWith(f, fs, copts)
	if err != nil {
		f.Abort()
		return nil, nil, fmt.Errorf("capture %s: %w", output, err)
	}
	if err := f.Close(); err != nil {
		return nil, nil, fmt.Errorf("capture: %w", err)
	}
	return h, res, nil
}
