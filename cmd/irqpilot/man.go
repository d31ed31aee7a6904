package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/cpuguy83/go-md2man/v2/md2man"
	"github.com/spf13/cobra"
	"github.com/spf13/cobra/doc"

	"github.com/irqpilot/irqpilot/docs"
)

// manSection is irqpilot's manual section: a system administration tool.
// The plan file's page is in section 5 (file formats).
const (
	manSection     = "8"
	planManSection = "5"
	manManual      = "irqpilot manual"
)

// newManCmd writes the manual pages: irqpilot.8, irqpilot-apply.8, … generated
// from the commands and their flags, and irqpilot-plan.5 from
// docs/plan-format.md (`make man`; persist's unit refers to irqpilot(8) only
// when it is installed).
func newManCmd(root *cobra.Command) *cobra.Command {
	return &cobra.Command{
		Use:    "man DIR",
		Short:  "Write the manual pages (sections 8 and 5) into DIR",
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
	// cobra adds --version (-v) and each --help only when a command line
	// runs; the pages are made from the flags a command has, so add them
	// here, or irqpilot(8) would not list -v.
	root.InitDefaultVersionFlag()
	date := manDate()
	hdr := &doc.GenManHeader{Title: "IRQPILOT", Section: manSection, Date: &date, Source: manSource(version), Manual: manManual}
	if err := doc.GenManTree(root, hdr, dir); err != nil {
		return fmt.Errorf("manual pages in %s: %w", dir, err)
	}
	if err := dropFalseDefaults(dir); err != nil {
		return fmt.Errorf("manual pages in %s: %w", dir, err)
	}
	for _, name := range planReaders {
		if err := seeAlsoPlanPage(filepath.Join(dir, name+"."+manSection)); err != nil {
			return fmt.Errorf("manual pages in %s: %w", dir, err)
		}
	}
	page := planManPage(docs.PlanFormat, date, manSource(version))
	if err := os.WriteFile(filepath.Join(dir, "irqpilot-plan."+planManSection), page, 0o644); err != nil {
		return fmt.Errorf("manual pages in %s: %w", dir, err)
	}
	fmt.Fprintf(out, "wrote the manual pages to %s\n", dir)
	return nil
}

// dropFalseDefaults removes the "[=false]" cobra writes after every switch
// ("--help[=false]"): a switch is off unless given, as the pages' readers
// expect, and the suffix reads as if --help took a value.
func dropFalseDefaults(dir string) error {
	pages, err := filepath.Glob(filepath.Join(dir, "*."+manSection))
	if err != nil {
		return err
	}
	for _, p := range pages {
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		nb := bytes.ReplaceAll(b, []byte(`\fP[=false]`), []byte(`\fP`))
		if !bytes.Equal(nb, b) {
			if err := os.WriteFile(p, nb, 0o644); err != nil {
				return err
			}
		}
	}
	return nil
}

// planReaders are the pages of the commands that read or write plan files:
// their SEE ALSO names irqpilot-plan(5) too (cobra lists only commands).
var planReaders = []string{"irqpilot", "irqpilot-plan", "irqpilot-apply", "irqpilot-agent", "irqpilot-persist"}

// seeAlsoPlanPage adds irqpilot-plan(5) to the end of a page's SEE ALSO
// line.
func seeAlsoPlanPage(file string) error {
	b, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	const head = ".SH SEE ALSO\n"
	i := bytes.Index(b, []byte(head))
	if i < 0 {
		return fmt.Errorf("%s has no SEE ALSO section", file)
	}
	j := i + len(head)
	end := bytes.IndexByte(b[j:], '\n')
	if end < 0 {
		end = len(b) - j
	}
	out := append([]byte{}, b[:j+end]...)
	out = append(out, []byte(", \\fBirqpilot-plan(5)\\fP")...)
	out = append(out, b[j+end:]...)
	return os.WriteFile(file, out, 0o644)
}

// manDate is the pages' date: SOURCE_DATE_EPOCH when set (the package build
// sets the commit's time, so one commit builds the same pages), else now.
func manDate() time.Time {
	if s := os.Getenv("SOURCE_DATE_EPOCH"); s != "" {
		if sec, err := strconv.ParseInt(s, 10, 64); err == nil {
			return time.Unix(sec, 0).UTC()
		}
	}
	return time.Now().UTC()
}

// manFooterLeft is the most the footer's left part (the source) may take:
// man centres the date ("Nov 2026") on an 80-column terminal at column 36,
// and a longer source runs into it ("(go1.2Nov)2026").
const manFooterLeft = 34

// manSource is the footer's left part: "irqpilot VERSION". Only the release
// is shown (no commit, no Go release, which --version prints); a version too
// long to leave the date alone, as a package built from an untagged commit
// has ("0.0~git20261122.1be7b6f+dirty"), is shown without the name.
func manSource(v string) string {
	if v == "" {
		v = strings.Fields(versionString())[0]
	}
	if s := "irqpilot " + v; len(s) <= manFooterLeft {
		return s
	}
	return v
}

// planManPage renders the plan file's page from its Markdown: the first
// heading is replaced by the page's title line and NAME section, the other
// sections' names are upper-cased as man pages spell them, and each table
// row becomes a tagged paragraph (.TP), the way manual pages list fields:
// md2man's tables do not wrap a cell that starts with plain text, so a row
// wider than the terminal would run off it.
func planManPage(md []byte, date time.Time, source string) []byte {
	var body bytes.Buffer
	first, row := true, 0
	for _, line := range strings.SplitAfter(string(md), "\n") {
		if !strings.HasPrefix(line, "|") {
			row = 0
		}
		switch {
		case first && strings.HasPrefix(line, "# "):
			first = false
			continue
		case strings.HasPrefix(line, "## "):
			line = "## " + strings.ToUpper(strings.TrimPrefix(line, "## "))
		case strings.HasPrefix(line, "|"):
			row++
			if row <= 2 { // the header and the |---| line
				continue
			}
			cells := strings.Split(strings.Trim(strings.TrimSpace(line), "|"), "|")
			for i := range cells {
				cells[i] = strings.TrimSpace(cells[i])
			}
			line = cells[0] + "\n: " + strings.Join(cells[1:], "; ") + "\n\n"
		}
		body.WriteString(line)
	}
	roff := strings.TrimPrefix(string(md2man.Render(body.Bytes())), ".nh\n")
	var b bytes.Buffer
	b.WriteString(".nh\n")
	fmt.Fprintf(&b, ".TH \"IRQPILOT-PLAN\" %q %q %q %q\n", planManSection, date.Format("Jan 2006"), source, manManual)
	b.WriteString(".SH NAME\nirqpilot-plan \\- the plan file irqpilot applies\n")
	b.WriteString(roff)
	return b.Bytes()
}
