package main

import (
	"bytes"
	"runtime/debug"
	"strings"
	"testing"
)

// --version prints the version (-ldflags -X, else the module's, else
// "devel"), the commit when the build recorded one, and the Go release.
func TestFormatVersion(t *testing.T) {
	vcs := func(rev, modified string) []debug.BuildSetting {
		return []debug.BuildSetting{{Key: "vcs.revision", Value: rev}, {Key: "vcs.modified", Value: modified}}
	}
	tests := []struct {
		name     string
		override string
		bi       *debug.BuildInfo
		want     string
	}{
		{"no build info", "", nil, "devel ("},
		{"devel build", "", &debug.BuildInfo{GoVersion: "go1.99", Main: debug.Module{Version: "(devel)"}}, "devel (go1.99)"},
		{"module version and commit", "", &debug.BuildInfo{GoVersion: "go1.99", Main: debug.Module{Version: "v1.2.3"}, Settings: vcs("abc123", "false")},
			"v1.2.3 (commit abc123, go1.99)"},
		{"modified tree", "", &debug.BuildInfo{GoVersion: "go1.99", Main: debug.Module{Version: "(devel)"}, Settings: vcs("abc123", "true")},
			"devel (commit abc123, modified, go1.99)"},
		{"ldflags override", "v9.0.0", &debug.BuildInfo{GoVersion: "go1.99", Main: debug.Module{Version: "v1.2.3"}}, "v9.0.0 (go1.99)"},
	}
	for _, tc := range tests {
		if got := formatVersion(tc.override, tc.bi); !strings.HasPrefix(got, tc.want) {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
	out := string(invRun(t, "--version"))
	if !strings.HasPrefix(out, "irqpilot ") || !strings.Contains(out, "go1.") {
		t.Errorf("--version: %q", out)
	}
}

// A mistyped verb or subcommand fails (exit 2) with cobra's suggestion; a
// missing argument says what is missing and shows the usage line.
func TestCLIMistakes(t *testing.T) {
	tests := []struct {
		args []string
		want []string
	}{
		{[]string{"inventroy"}, []string{`unknown command "inventroy" for "irqpilot"`, "Did you mean this?\n\tinventory"}},
		{[]string{"coalesce", "shwo"}, []string{`unknown command "shwo" for "irqpilot coalesce"`, "Did you mean this?\n\tshow"}},
		{[]string{"sim", "coalese"}, []string{`unknown command "coalese" for "irqpilot sim"`, "\tcoalesce"}},
		{[]string{"testbed", "stat"}, []string{`unknown command "stat" for "irqpilot testbed"`, "\tstatus"}},
		{[]string{"apply"}, []string{"apply needs a plan file", "usage: irqpilot apply PLAN"}},
		{[]string{"report", "-o", "x.html"}, []string{"report needs at least one recording", "usage: irqpilot report run.jsonl"}},
		{[]string{"report", "a.jsonl", "--prometheus", "http://localhost:9090", "-o", "x.png"}, []string{"give recordings or --prometheus, not both"}},
		{[]string{"persist"}, []string{"persist needs a plan file", "or --remove", "usage: irqpilot persist PLAN | --remove"}},
		{[]string{"persist", "--remove", "plan.yaml"}, []string{"persist --remove takes no plan (got plan.yaml)"}},
		{[]string{"--root", sharedFixtures + "/node_exporter", "plan", "--policy", "per-queu"},
			[]string{`unknown policy "per-queu" (known: auto, colocate, dedicated-core, efficiency, latency, per-queue, rps-spread); did you mean per-queue?`}},
	}
	for _, tc := range tests {
		cmd := selfCmd(nil, tc.args...)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		err := cmd.Run()
		if exitCode(err) != 2 {
			t.Errorf("irqpilot %s: exit %d, want 2\n%s", strings.Join(tc.args, " "), exitCode(err), stderr.String())
		}
		for _, w := range tc.want {
			if !strings.Contains(stderr.String(), w) {
				t.Errorf("irqpilot %s: stderr lacks %q:\n%s", strings.Join(tc.args, " "), w, stderr.String())
			}
		}
	}
	// A group verb alone still prints its help.
	if out := string(invRun(t, "coalesce")); !strings.Contains(out, "Available Commands:") || !strings.Contains(out, "show") {
		t.Errorf("coalesce alone: %s", out)
	}
}

// Two command trees share no flag: what one parses does not leak into the
// next (the flags live in each tree's options, not in package variables).
func TestRootCmdsIndependent(t *testing.T) {
	var a, b bytes.Buffer
	ra := newRootCmd()
	ra.SetArgs([]string{"--json", "--root", sharedFixtures + "/node_exporter", "inventory"})
	ra.SetOut(&a)
	if err := ra.Execute(); err != nil {
		t.Fatal(err)
	}
	rb := newRootCmd()
	rb.SetArgs([]string{"--root", sharedFixtures + "/node_exporter", "inventory"})
	rb.SetOut(&b)
	if err := rb.Execute(); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(a.String(), "{") || strings.HasPrefix(b.String(), "{") {
		t.Errorf("--json leaked between trees or was lost:\n%.80s\n---\n%.80s", a.String(), b.String())
	}
}
