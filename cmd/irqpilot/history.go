package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/irqpilot/irqpilot/internal/apply"
	"github.com/irqpilot/irqpilot/internal/setting"
)

type historyOptions struct {
	g        *globalFlags
	stateDir string
}

// historyJSON is `history --json`.
type historyJSON struct {
	Journals   []*apply.Journal   `json:"journals"`
	Unreadable []apply.Unreadable `json:"unreadable,omitempty"`
}

func newHistoryCmd(g *globalFlags) *cobra.Command {
	o := &historyOptions{g: g}
	cmd := &cobra.Command{
		Use:   "history",
		Short: "List applied plans from the journal",
		Long: `history lists the journals in --state-dir, oldest first. A journal file that
cannot be read is listed with its error, and history then exits 2.`,
		Args: cobra.NoArgs,
		RunE: runE(o),
	}
	stateDirFlag(cmd, &o.stateDir)
	return cmd
}

// complete refuses a --state-dir given that does not exist.
func (o *historyOptions) complete(cmd *cobra.Command, _ []string) error {
	return existingStateDir(cmd, o.stateDir)
}

func (o *historyOptions) run(_ context.Context, out, _ io.Writer) error {
	js, err := apply.History(o.stateDir)
	var herr *apply.HistoryError
	if err != nil && !errors.As(err, &herr) {
		return err
	}
	if err := o.render(out, js, herr); err != nil {
		return err
	}
	if herr != nil {
		return &exitError{code: 2, err: herr}
	}
	return nil
}

// render lists the journals js, and herr's unreadable files in JSON.
func (o *historyOptions) render(out io.Writer, js []*apply.Journal, herr *apply.HistoryError) error {
	if o.g.json {
		h := historyJSON{Journals: nonNil(js)}
		if herr != nil {
			h.Unreadable = herr.Files
		}
		return writeJSON(out, h)
	}
	if len(js) == 0 && herr == nil {
		fmt.Fprintf(out, "no journals in %s\n", o.stateDir)
		return nil
	}
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tTIME\tSTATE\tCHANGES\tPLAN")
	for _, j := range js {
		n := 0
		for _, e := range j.Entries {
			if e.Status == setting.StatusDone || e.Status == setting.StatusRestored || e.Status == setting.StatusPending {
				n++
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\n", j.ID, j.Time.Local().Format("2006-01-02 15:04:05"), j.State, n, j.PlanFile)
	}
	tw.Flush()
	return nil
}
