package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/irqpilot/irqpilot/internal/agent"
)

// Flag values the agent used to accept silently (a default in their place,
// or a local file read as root) are refused before anything runs, exit 2,
// naming the flag.
func TestAgentRefusesBadFlags(t *testing.T) {
	pf := filepath.Join(t.TempDir(), "plan.yaml")
	if err := os.WriteFile(pf, []byte("version: 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	sd := filepath.Join(t.TempDir(), "state")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--keep-journals", "-5"}, "--keep-journals -5: must be at least 1"},
		{[]string{"--keep-journals", "0"}, "--keep-journals 0: must be at least 1"},
		{[]string{"--pingpong-limit", "-1"}, "--pingpong-limit -1: must be at least 1"},
		{[]string{"--pingpong-window", "-1s"}, "--pingpong-window -1s: must not be negative"},
		{[]string{"--adapt-budget", "-1"}, "--adapt-budget -1: must be at least 1"},
		{[]string{"--adapt-window", "0"}, "--adapt-window 0: must be at least 1"},
		{[]string{"--adapt-persist", "0"}, "--adapt-persist 0: must be at least 1"},
		{[]string{"--adapt-dwell", "-5m"}, "--adapt-dwell -5m0s: must not be negative"},
		{[]string{"--device", ""}, `--device "": an empty interface name`},
		{[]string{"--device", "va0,,vb0"}, `--device "": an empty interface name`},
		{[]string{"--device", "a/b"}, `--device "a/b": not an interface name`},
		{[]string{"--device", "averyveryverylongname"}, "longer than 15 characters"},
		{[]string{"--adapt-metric-query", "file:///etc/shadow"}, "--adapt-metric-query \"file:///etc/shadow\": give a Prometheus http:// or https:// URL"},
		{[]string{"--adapt-metric-query", "http:///api/v1/query"}, "give a Prometheus http:// or https:// URL"},
		{[]string{"--state-dir", ""}, "--state-dir is empty"},
		{[]string{"--device", "va0", "--include-default-route"}, "--include-default-route goes without --device"},
		{[]string{"--machine-wide"}, "with --plan FILE and no --adapt the file alone says what is in scope"},
	} {
		args := append([]string{"--root", sharedFixtures + "/node_exporter", "agent", "--plan", pf, "--state-dir", sd, "--listen", ""}, tc.args...)
		cmd := selfCmd(nil, args...)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		err := cmd.Run()
		if exitCode(err) != 2 || !strings.Contains(stderr.String(), tc.want) {
			t.Errorf("agent %s: exit %d, want 2 with %q:\n%s", strings.Join(tc.args, " "), exitCode(err), tc.want, stderr.String())
		}
	}
	if _, err := os.Stat(sd); err == nil {
		t.Errorf("a refused agent created its state directory %s", sd)
	}
}

// status prints a rejected reload (and says the previous plan stays).
func TestStatusPrintsRejectedReload(t *testing.T) {
	var b bytes.Buffer
	printStatus(&b, &agent.Status{Plan: "/etc/irqpilot/plan.yaml", LastReload: &agent.ReloadResult{Rejected: true,
		Error: "/etc/irqpilot/plan.yaml:2: version: given twice (first at line 1)"}})
	if !strings.Contains(b.String(), "REJECTED; the previous plan stays in force: /etc/irqpilot/plan.yaml:2: version: given twice") {
		t.Errorf("status output:\n%s", b.String())
	}
	b.Reset()
	printStatus(&b, &agent.Status{Plan: "p", LastReload: &agent.ReloadResult{}})
	if strings.Contains(b.String(), "REJECTED") {
		t.Errorf("an applied reload printed as rejected:\n%s", b.String())
	}
}
