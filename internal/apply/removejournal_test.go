package apply

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/irqpilot/irqpilot/internal/setting"
)

// RemoveJournal removes an applied journal, and refuses a journal in any
// other state and a name that is not a journal ID.
func TestRemoveJournal(t *testing.T) {
	fs := tree(t, baseTree)
	sd := t.TempDir()
	a := New(fs, sd)
	p := "proc/irq/40/smp_affinity_list"
	r1, err := a.Apply([]setting.Change{{Kind: setting.KindIRQAffinity, Target: "irq 40", Path: p, Value: "2"}}, Meta{})
	if err != nil {
		t.Fatal(err)
	}
	r2, err := a.Apply([]setting.Change{{Kind: setting.KindIRQAffinity, Target: "irq 40", Path: p, Value: "3"}}, Meta{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Revert(r2.Journal.ID, false); err != nil {
		t.Fatal(err)
	}
	if err := RemoveJournal(sd, r2.Journal.ID); err == nil || !strings.Contains(err.Error(), "is reverted, not applied") {
		t.Errorf("reverted journal: %v", err)
	}
	if err := RemoveJournal(sd, "../../etc/passwd"); err == nil || !strings.Contains(err.Error(), "not a journal ID") {
		t.Errorf("bad id: %v", err)
	}
	if err := RemoveJournal(sd, r1.Journal.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(sd, "journal", r1.Journal.ID+".json")); !os.IsNotExist(err) {
		t.Errorf("applied journal still there: %v", err)
	}
}
