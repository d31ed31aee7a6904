package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/irqpilot/irqpilot/docs"
	"github.com/irqpilot/irqpilot/internal/plan"
)

// allCommands is every command of a fresh tree, the root first.
func allCommands() []*cobra.Command {
	var out []*cobra.Command
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		out = append(out, c)
		for _, s := range c.Commands() {
			walk(s)
		}
	}
	walk(newRootCmd())
	return out
}

// helpText is what `--help` prints for c.
func helpText(t *testing.T, c *cobra.Command) string {
	t.Helper()
	var b bytes.Buffer
	c.SetOut(&b)
	if err := c.Help(); err != nil {
		t.Fatalf("%s --help: %v", c.CommandPath(), err)
	}
	return b.String()
}

// Words users read name the product only: no issue or session numbers in
// the README, the documents, any --help or any manual page; and no flag
// shows a sentinel as its default ("(default -1ns)").
func TestUserTextNamesNoIssuesOrSessions(t *testing.T) {
	bad := regexp.MustCompile(`(?i)\b(issue|session)s?[ _-]?#?[0-9]`)
	check := func(where, text string) {
		for i, line := range strings.Split(text, "\n") {
			if m := bad.FindString(line); m != "" {
				t.Errorf("%s:%d: %q names an issue or session: %s", where, i+1, m, line)
			}
		}
	}
	for _, c := range allCommands() {
		h := helpText(t, c)
		check(c.CommandPath()+" --help", h)
		if strings.Contains(h, "(default -") {
			t.Errorf("%s --help shows a negative default:\n%s", c.CommandPath(), h)
		}
	}
	dir := t.TempDir()
	if err := writeManPages(newRootCmd(), dir, &bytes.Buffer{}); err != nil {
		t.Fatal(err)
	}
	pages, _ := filepath.Glob(filepath.Join(dir, "*"))
	for _, p := range pages {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		check(filepath.Base(p), string(b))
		if bytes.Contains(b, []byte("=-1ns")) {
			t.Errorf("%s shows a flag default of -1ns", filepath.Base(p))
		}
	}
	docs, _ := filepath.Glob("../../docs/*.md")
	more, _ := filepath.Glob("../../deploy/*/README.md")
	for _, f := range append(append(docs, more...), "../../README.md", "../../CONTRIBUTING.md") {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		check(strings.TrimPrefix(f, "../../"), string(b))
	}
}

// The README stays a front page: what irqpilot does, install, the everyday
// loop and links; the rest lives in docs/.
func TestREADMEIsShortAndLinksResolve(t *testing.T) {
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	if n := bytes.Count(b, []byte("\n")); n > 250 {
		t.Errorf("README.md has %d lines, want at most 250 (move details to docs/)", n)
	}
	files, _ := filepath.Glob("../../docs/*.md")
	files = append(files, "../../README.md", "../../CONTRIBUTING.md", "../../deploy/ansible/README.md", "../../deploy/kubernetes/README.md")
	link := regexp.MustCompile(`\]\(([^)#:]+)(#[^)]*)?\)`)
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range link.FindAllStringSubmatch(string(b), -1) {
			target := filepath.Join(filepath.Dir(f), m[1])
			if _, err := os.Stat(target); err != nil {
				t.Errorf("%s links to %s, which does not exist", strings.TrimPrefix(f, "../../"), m[1])
			}
		}
	}
}

// Every example in --help parses with the command's real flags, so the
// examples cannot drift from the flags; every main verb has some.
func TestExamplesParse(t *testing.T) {
	mustHave := map[string]bool{}
	for _, p := range []string{"irqpilot", "inventory", "capture", "top", "doctor", "record", "report", "plan", "apply",
		"revert", "history", "persist", "agent", "status", "bench", "tune", "lab", "coalesce show", "coalesce nvme",
		"sim coalesce", "testbed up"} {
		mustHave[p] = true
	}
	for _, c := range allCommands() {
		if p := strings.TrimPrefix(c.CommandPath(), "irqpilot "); mustHave[p] && c.Example == "" {
			t.Errorf("%s has no Example", c.CommandPath())
		}
		for _, line := range strings.Split(c.Example, "\n") {
			line, _, _ = strings.Cut(line, "#")
			line, _, _ = strings.Cut(line, "|")
			f := strings.Fields(line)
			if len(f) == 0 || f[0] != "irqpilot" {
				continue
			}
			root := newRootCmd()
			sub, rest, err := root.Find(f[1:])
			if err != nil {
				t.Errorf("%s example %q: %v", c.CommandPath(), line, err)
				continue
			}
			if err := sub.ParseFlags(rest); err != nil {
				t.Errorf("%s example %q: %v", c.CommandPath(), line, err)
			}
		}
	}
}

// --sample shows "auto" for its unset default, accepts it, and refuses a
// negative duration instead of treating it as unset.
func TestSampleFlagDefault(t *testing.T) {
	var d time.Duration = -1
	v := autoDuration{&d}
	if v.String() != "auto" {
		t.Errorf("unset --sample reads %q, want auto", v.String())
	}
	for in, want := range map[string]time.Duration{"5s": 5 * time.Second, "0": 0, "auto": -1} {
		if err := v.Set(in); err != nil || d != want {
			t.Errorf("--sample %s: %v, %v; want %v", in, d, err, want)
		}
	}
	if err := v.Set("-3s"); err == nil {
		t.Error("--sample -3s was accepted")
	}
}

// The footer's left part leaves room for the date on an 80-column terminal
// (a long version ran into it: "(go1.2Nov)2026"); where man is installed,
// the rendered footer shows the date whole.
func TestManFooter(t *testing.T) {
	for _, v := range []string{"1.2.3", "1.2.3+git4.g1be7b6f", "0.0~git20261122.1be7b6f+dirty", ""} {
		if s := manSource(v); len(s) > manFooterLeft || !strings.Contains(s, v) {
			t.Errorf("manSource(%q) = %q: over %d characters or without the version", v, s, manFooterLeft)
		}
	}
	if manSource("1.2.3") != "irqpilot 1.2.3" {
		t.Errorf("manSource(1.2.3) = %q", manSource("1.2.3"))
	}
	man, err := exec.LookPath("man")
	if err != nil {
		t.Skip("no man command to render the pages")
	}
	save := version
	version = "0.0~git20261122.1be7b6f+dirty"
	t.Cleanup(func() { version = save })
	t.Setenv("SOURCE_DATE_EPOCH", "1795000000") // 2026-11-17
	dir := t.TempDir()
	if err := writeManPages(newRootCmd(), dir, &bytes.Buffer{}); err != nil {
		t.Fatal(err)
	}
	for _, page := range []string{"irqpilot.8", "irqpilot-agent.8", "irqpilot-plan.5"} {
		cmd := exec.Command(man, "-l", filepath.Join(dir, page))
		cmd.Env = append(os.Environ(), "MANWIDTH=80", "MANPAGER=cat", "LC_ALL=C.UTF-8")
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("man -l %s: %v", page, err)
		}
		lines := strings.Split(strings.TrimRight(string(out), "\n"), "\n")
		footer := lines[len(lines)-1]
		if !strings.Contains(footer, "Nov 2026") || !strings.Contains(footer, version) {
			t.Errorf("%s footer %q: want the version and the date Nov 2026 apart", page, footer)
		}
	}
}

// irqpilot-plan(5) is docs/plan-format.md, and that page documents every
// field the plan parser reads.
func TestPlanFormatPage(t *testing.T) {
	fromDisk, err := os.ReadFile("../../docs/plan-format.md")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(fromDisk, docs.PlanFormat) {
		t.Fatal("docs.PlanFormat is not docs/plan-format.md")
	}
	page := string(planManPage(docs.PlanFormat, time.Unix(0, 0), "irqpilot 1.2.3"))
	if !strings.HasPrefix(page, ".nh\n.TH \"IRQPILOT-PLAN\" \"5\" \"Jan 1970\" \"irqpilot 1.2.3\"") || !strings.Contains(page, ".SH NAME\nirqpilot-plan \\- ") {
		t.Errorf("irqpilot-plan.5 lacks its title or NAME:\n%.300s", page)
	}
	if strings.Contains(page, ".TS") {
		t.Error("irqpilot-plan.5 has a tbl table; rows are tagged paragraphs")
	}
	dir := t.TempDir()
	if err := writeManPages(newRootCmd(), dir, &bytes.Buffer{}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "irqpilot-plan.5")); err != nil {
		t.Errorf("irqpilot man wrote no irqpilot-plan.5: %v", err)
	}
	for _, name := range planReaders {
		b, err := os.ReadFile(filepath.Join(dir, name+".8"))
		if err != nil {
			t.Fatal(err)
		}
		_, seeAlso, _ := bytes.Cut(b, []byte(".SH SEE ALSO\n"))
		if !bytes.Contains(seeAlso, []byte("irqpilot-plan(5)")) {
			t.Errorf("%s.8's SEE ALSO does not name irqpilot-plan(5):\n%s", name, seeAlso)
		}
	}
	for _, name := range yamlFields(reflect.TypeOf(plan.Plan{})) {
		if !strings.Contains(string(fromDisk), "`"+name+"`") {
			t.Errorf("docs/plan-format.md does not document the plan field %s", name)
		}
	}
}

// yamlFields lists the YAML names of a struct's fields and of the structs
// below them.
func yamlFields(t reflect.Type) []string {
	var out []string
	for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct {
		return nil
	}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if name == "" || name == "-" {
			continue
		}
		out = append(out, name)
		out = append(out, yamlFields(f.Type)...)
	}
	return out
}

// The generated pages list every flag a command takes, its own and its
// parent's, --version (-v) on irqpilot(8) too, and write a switch as
// "--help", never "--help[=false]".
func TestManPagesListEveryFlag(t *testing.T) {
	dir := t.TempDir()
	root := newRootCmd()
	if err := writeManPages(root, dir, &bytes.Buffer{}); err != nil {
		t.Fatal(err)
	}
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		for _, s := range c.Commands() {
			walk(s)
		}
		if !c.IsAvailableCommand() && c != root {
			return
		}
		name := strings.ReplaceAll(c.CommandPath(), " ", "-") + "." + manSection
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Errorf("%s: %v", c.CommandPath(), err)
			return
		}
		page := string(b)
		if strings.Contains(page, "[=false]") {
			t.Errorf("%s writes a switch with [=false]", name)
		}
		if !strings.Contains(page, `\fB-h\fP, \fB--help\fP`+"\n") {
			t.Errorf("%s does not list -h, --help as a plain switch", name)
		}
		check := func(f *pflag.Flag) {
			if f.Hidden || f.Deprecated != "" {
				return
			}
			want := `\fB--` + f.Name + `\fP`
			if f.Shorthand != "" {
				want = `\fB-` + f.Shorthand + `\fP, ` + want
			}
			if !strings.Contains(page, want) {
				t.Errorf("%s lacks %s", name, want)
			}
		}
		c.NonInheritedFlags().VisitAll(check)
		c.InheritedFlags().VisitAll(check)
	}
	walk(root)
	b, err := os.ReadFile(filepath.Join(dir, "irqpilot."+manSection))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `\fB-v\fP, \fB--version\fP`) {
		t.Errorf("irqpilot.%s lacks -v, --version:\n%s", manSection, b)
	}
}
