package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/irqpilot/irqpilot/internal/apply"
	"github.com/irqpilot/irqpilot/internal/cpuset"
	"github.com/irqpilot/irqpilot/internal/kernel"
	"github.com/irqpilot/irqpilot/internal/setting"
)

// Issue 15 item 1, end to end: a journal directory holding a file that does
// not parse made `revert` print "nothing to revert" and exit 0, leaving the
// plan applied, and `history` say "no journals".
func TestRevertVerbWithUnreadableJournal(t *testing.T) {
	root := t.TempDir()
	file := filepath.Join(root, "proc/irq/40/smp_affinity_list")
	os.MkdirAll(filepath.Dir(file), 0o755)
	os.WriteFile(file, []byte("0-3\n"), 0o644)
	state := filepath.Join(t.TempDir(), "state")
	a := apply.New(kernel.New(root), state)
	if _, err := a.Apply([]setting.Change{setting.IRQAffinity(40, "irq 40", mustSet(t, "1"), "test")}, apply.Meta{}); err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(state, "journal", "20000101T000000Z.json")
	os.WriteFile(bad, nil, 0o600)

	out, stderr, err := runIrqpilot(t, "history", "--state-dir", state)
	if code := exitCode(err); code != 2 || !strings.Contains(stderr, bad) || strings.Contains(out, "no journals") {
		t.Errorf("history: exit %d\n%s\n%s", code, out, stderr)
	}
	out, stderr, err = runIrqpilot(t, "revert", "--root", root, "--state-dir", state)
	if code := exitCode(err); code != 0 || !strings.Contains(out, "1 settings restored") || !strings.Contains(stderr, bad) {
		t.Errorf("revert: exit %d\n%s\n%s", code, out, stderr)
	}
	if b, _ := os.ReadFile(file); strings.TrimSpace(string(b)) != "0-3" {
		t.Errorf("affinity %q after revert", b)
	}

	// Nothing readable but an unreadable journal: an error naming it, exit 2.
	state2 := filepath.Join(t.TempDir(), "state")
	os.MkdirAll(filepath.Join(state2, "journal"), 0o700)
	os.Chmod(state2, 0o700)
	os.WriteFile(filepath.Join(state2, "journal", "20000101T000000Z.json"), []byte("{"), 0o600)
	out, stderr, err = runIrqpilot(t, "revert", "--root", root, "--state-dir", state2)
	if code := exitCode(err); code != 2 || strings.Contains(out, "nothing to revert") || !strings.Contains(stderr, "20000101T000000Z.json") {
		t.Errorf("revert with only an unreadable journal: exit %d\n%s\n%s", code, out, stderr)
	}
	// A world-writable state directory is refused before anything is read.
	os.Chmod(state, 0o777)
	_, stderr, err = runIrqpilot(t, "revert", "--root", root, "--state-dir", state)
	if code := exitCode(err); code != 2 || !strings.Contains(stderr, "writable by group or others") {
		t.Errorf("revert in a world-writable dir: exit %d\n%s", code, stderr)
	}
}

func mustSet(t *testing.T, s string) cpuset.Set {
	t.Helper()
	c, err := cpuset.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return c
}
