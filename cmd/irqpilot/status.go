package main

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/irqpilot/irqpilot/internal/agent"
	"github.com/irqpilot/irqpilot/internal/setting"
)

type statusOptions struct {
	g        *globalFlags
	stateDir string
	socket   string
}

func newStatusCmd(g *globalFlags) *cobra.Command {
	o := &statusOptions{g: g}
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Show what the running agent enforces, recent repairs and adaptations, and current findings",
		Long: `status asks the running 'irqpilot agent' over its root-only unix socket
(STATE-DIR/agent.sock, mode 0600) and prints what it enforces, what it froze
or waits for, its recent drift repairs and adaptations, and the current
findings. Exit status 2 when no agent answers.`,
		Args: cobra.NoArgs,
		RunE: runE(o),
	}
	stateDirFlag(cmd, &o.stateDir)
	cmd.Flags().StringVar(&o.socket, "socket", "", "the agent's status socket `PATH` (default STATE-DIR/"+agent.SocketName+")")
	return cmd
}

// complete defaults --socket to the one in --state-dir.
func (o *statusOptions) complete(*cobra.Command, []string) error {
	if o.socket == "" {
		o.socket = filepath.Join(o.stateDir, agent.SocketName)
	}
	return nil
}

func (o *statusOptions) run(ctx context.Context, out, _ io.Writer) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	st, err := agent.Query(ctx, o.socket)
	if err != nil {
		return &exitError{code: 2, err: err}
	}
	if o.g.json {
		return writeJSON(out, st)
	}
	printStatus(out, st)
	return nil
}

func printStatus(out io.Writer, st *agent.Status) {
	fmt.Fprintf(out, "agent pid %d, up since %s, enforcing %s every %s (adapt %v); %d passes, last %s\n",
		st.PID, st.Started.Format(time.RFC3339), st.Plan, st.Interval, st.Adapt, st.Passes, st.LastPass.Format(time.RFC3339))
	if st.PassRunning {
		fmt.Fprintln(out, "a pass is running: this is the status the last pass left")
	}
	if st.LastError != "" {
		fmt.Fprintf(out, "last pass failed: %s\n", st.LastError)
	}
	if r := st.LastReload; r != nil && r.Rejected {
		fmt.Fprintf(out, "plan reload at %s REJECTED; the previous plan stays in force: %s\n", r.Time.Format(time.RFC3339), r.Error)
	}
	fmt.Fprintf(out, "\nenforced (%d):\n", len(st.Enforced))
	tw := tabwriter.NewWriter(out, 2, 4, 2, ' ', 0)
	for _, e := range st.Enforced {
		k := setting.Kind(e.Setting)
		line := fmt.Sprintf("  %s\t%s\t%s", e.Setting, e.Target, orDash(setting.Display(k, e.Value)))
		if e.Note != "" {
			line += "\t(" + e.Note + ")"
		}
		fmt.Fprintln(tw, line)
	}
	tw.Flush()
	for _, f := range st.Frozen {
		fmt.Fprintf(out, "FROZEN %s %s since %s: %s", f.Setting, f.Target, f.Since.Format(time.RFC3339), f.Reason)
		if f.Culprit != "" {
			fmt.Fprintf(out, " (%s)", f.Culprit)
		}
		fmt.Fprintln(out)
	}
	for _, w := range st.Waiting {
		fmt.Fprintf(out, "waiting for %s\n", w)
	}
	fmt.Fprintf(out, "\nrecent repairs (%d):\n", len(st.Repairs))
	for _, r := range st.Repairs {
		k := setting.Kind(r.Setting)
		fmt.Fprintf(out, "  %s %s %s: %s → %s → %s", r.Time.Format(time.RFC3339), r.Setting, r.Target,
			orDash(setting.Display(k, r.Old)), orDash(setting.Display(k, r.Drifted)), orDash(setting.Display(k, r.Restored)))
		if r.Culprit != "" {
			fmt.Fprintf(out, " (%s)", r.Culprit)
		}
		fmt.Fprintln(out)
	}
	fmt.Fprintf(out, "\nadaptations (%d):\n", len(st.Adaptations))
	for _, a := range st.Adaptations {
		fmt.Fprintf(out, "  %s %s: %s (%s) %s\n", a.Time.Format(time.RFC3339), a.Finding, a.Result, a.Policy, a.Reason)
		if a.Verification != nil {
			fmt.Fprintf(out, "    %s\n", a.Verification.Line())
		}
	}
	fmt.Fprintf(out, "\nfindings (%d):\n", len(st.Findings))
	for _, f := range st.Findings {
		fmt.Fprintf(out, "  %s %s: %s\n", strings.ToUpper(string(f.Severity)), f.ID, f.Summary)
	}
}
