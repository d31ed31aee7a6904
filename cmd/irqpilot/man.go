package main

import (
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"
	"github.com/spf13/cobra/doc"
)

// manSection is irqpilot's manual section: a system administration tool.
const manSection = "8"

// newManCmd writes the manual pages, generated from the commands and their
// flags: irqpilot.8, irqpilot-apply.8, … (`make man`; persist's unit refers
// to irqpilot(8) only when it is installed).
func newManCmd(root *cobra.Command) *cobra.Command {
	return &cobra.Command{
		Use:    "man DIR",
		Short:  "Write the manual pages (section 8) into DIR",
		Hidden: true,
		Args:   exactArgs(1, "a directory for the manual pages"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return writeManPages(root, args[0], cmd.OutOrStdout())
		},
	}
}

func writeManPages(root *cobra.Command, dir string, out io.Writer) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	root.DisableAutoGenTag = true
	hdr := &doc.GenManHeader{Title: "IRQPILOT", Section: manSection, Source: "irqpilot " + versionString(), Manual: "irqpilot manual"}
	if err := doc.GenManTree(root, hdr, dir); err != nil {
		return fmt.Errorf("manual pages in %s: %w", dir, err)
	}
	fmt.Fprintf(out, "wrote the manual pages to %s\n", dir)
	return nil
}
