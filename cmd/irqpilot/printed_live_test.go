package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/irqpilot/irqpilot/internal/apply"
)

// pathWithIrqpilot is a PATH whose first directory holds an `irqpilot`
// that runs this test binary as irqpilot, so that a command line the tool
// printed runs exactly as printed, through a shell.
func pathWithIrqpilot(t *testing.T) string {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	script := fmt.Sprintf("#!/bin/sh\n%s=1 exec %s \"$@\"\n", selfEnv, apply.ShellQuote(self))
	if err := os.WriteFile(filepath.Join(dir, "irqpilot"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return dir + string(os.PathListSeparator) + os.Getenv("PATH")
}

// runPrinted runs a printed command line with sh, from the host's
// namespace, as a person pasting it would.
func runPrinted(t *testing.T, path, line string) (string, int) {
	t.Helper()
	cmd := exec.Command("sh", "-c", line)
	cmd.Env = append(os.Environ(), "PATH="+path)
	out, err := cmd.CombinedOutput()
	return string(out), exitCode(err)
}

// The undo command apply prints works when pasted as printed, from the
// host's namespace, for a journal applied inside a network namespace with
// a state directory whose name needs quoting (a space, a semicolon, a
// quote).
func TestPrintedUndoRunsAsPrinted(t *testing.T) {
	ns := newVethPair(t).name
	dir := t.TempDir()
	state := filepath.Join(dir, "st odd;x'q")
	planFile := filepath.Join(dir, "p.yaml")
	if err := os.WriteFile(planFile, []byte("version: 1\nrx_queues:\n  - {device: vq0, queue: 1, rps_cpus: 0, reason: test}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errs := runWrapped([]string{"ip", "netns", "exec", ns}, "apply", "--state-dir", state, planFile)
	if code != 0 {
		t.Fatalf("apply: exit %d\n%s%s", code, out, errs)
	}
	m := regexp.MustCompile(`\(undo: (.*)\)\n`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no undo command in:\n%s", out)
	}
	if !strings.HasPrefix(m[1], "ip netns exec "+ns+" irqpilot revert --to ") {
		t.Errorf("undo %q does not run in the journal's namespace", m[1])
	}
	printed, code := runPrinted(t, pathWithIrqpilot(t), m[1])
	if code != 0 {
		t.Fatalf("the undo command as printed, %s: exit %d\n%s", m[1], code, printed)
	}
	for id, st := range journalStates(t, state) {
		if st != apply.StateReverted {
			t.Errorf("journal %s is %s after the printed undo", id, st)
		}
	}
	if got := nsRead(t, ns, "/sys/class/net/vq0/queues/rx-1/rps_cpus"); strings.Trim(got, "0,") != "" {
		t.Errorf("rps_cpus %q after the printed undo, want 0", got)
	}
}

// revert --session run from the host's namespace for a session applied in
// a named namespace is refused, and its "run revert there" hint, pasted as
// printed, reverts that session there: the session's journal, not an
// older one (a hint naming one journal with --to was refused as "older
// than" when the session held newer ones), and nothing of another session.
func TestPrintedRevertThereRunsAsPrinted(t *testing.T) {
	ns := newVethPair(t).name
	dir := t.TempDir()
	state := filepath.Join(dir, "st odd;x'q")
	for i, cpu := range []string{"0", "1"} {
		planFile := filepath.Join(dir, fmt.Sprintf("p%d.yaml", i))
		if err := os.WriteFile(planFile, []byte("version: 1\nrx_queues:\n  - {device: vq0, queue: 1, rps_cpus: "+cpu+", reason: test}\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if code, out, errs := runWrapped([]string{"ip", "netns", "exec", ns}, "apply", "--state-dir", state, planFile); code != 0 {
			t.Fatalf("apply %s: exit %d\n%s%s", planFile, code, out, errs)
		}
	}
	before := journalStates(t, state)
	code, out, errs := runWrapped(nil, "revert", "--session", "--state-dir", state)
	if code != 2 {
		t.Fatalf("revert --session from the host's namespace: exit %d, want 2 (refused)\n%s%s", code, out, errs)
	}
	m := regexp.MustCompile(`run revert there: (.*)\. Nothing was changed`).FindStringSubmatch(errs)
	if m == nil {
		t.Fatalf("no 'run revert there' hint in:\n%s", errs)
	}
	if !strings.HasPrefix(m[1], "ip netns exec "+ns+" irqpilot revert --session=") {
		t.Errorf("hint %q does not repeat the session's revert in the namespace", m[1])
	}
	if d := journalStates(t, state); fmt.Sprint(d) != fmt.Sprint(before) {
		t.Errorf("the refused revert changed journals: %v, then %v", before, d)
	}
	printed, code := runPrinted(t, pathWithIrqpilot(t), m[1])
	if code != 0 {
		t.Fatalf("the hint as printed, %s: exit %d\n%s", m[1], code, printed)
	}
	reverted := 0
	for id, st := range journalStates(t, state) {
		if st == apply.StateReverted {
			reverted++
		} else if st != apply.StateApplied {
			t.Errorf("journal %s is %s", id, st)
		}
	}
	if reverted != 1 {
		t.Errorf("%d journals reverted by the hint, want the newest session's one", reverted)
	}
	if got := nsRead(t, ns, "/sys/class/net/vq0/queues/rx-1/rps_cpus"); strings.Trim(got, "0,") != "1" {
		t.Errorf("rps_cpus %q after the hint, want 1 (the older session's value)", got)
	}
}
