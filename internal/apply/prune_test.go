package apply

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/irqpilot/irqpilot/internal/setting"
)

// PruneJournals keeps the newest finished journals and every journal that
// may still hold changes.
func TestPruneJournalsKeepsApplied(t *testing.T) {
	dir := t.TempDir()
	t0 := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	states := []string{StateReverted, StateApplied, StateNoChange, StateRolledBack, StateApplying, StateReverted, StateRollbackIncomplete, StateReverted}
	var ids []string
	for i, st := range states {
		ids = append(ids, saveJournal(t, dir, t0.Add(time.Duration(i)*time.Second), st).ID)
	}
	removed, err := PruneJournals(dir, 2)
	if err != nil {
		t.Fatal(err)
	}
	// Finished: 0 (reverted), 2 (no-change), 3 (rolled-back), 5, 7 (reverted): the oldest three go.
	if want := []string{ids[0], ids[2], ids[3]}; !slices.Equal(removed, want) {
		t.Fatalf("removed %v, want %v", removed, want)
	}
	left, err := History(dir)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, j := range left {
		got = append(got, j.ID)
	}
	if want := []string{ids[1], ids[4], ids[5], ids[6], ids[7]}; !slices.Equal(got, want) {
		t.Fatalf("left %v, want %v", got, want)
	}
	if again, _ := PruneJournals(dir, 2); len(again) != 0 {
		t.Errorf("second prune removed %v", again)
	}
}

// A Pruner reads each journal file once: pruning again after one more
// journal opens that one file, however long the history; a journal saved
// again (applied → reverted) is read again and pruned by its new state.
func TestPrunerReadsOnlyNewJournals(t *testing.T) {
	dir := t.TempDir()
	t0 := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	add := func(i int, st string) *Journal { return saveJournal(t, dir, t0.Add(time.Duration(i)*time.Second), st) }
	const n = 300
	var applied []*Journal
	for i := 0; i < n; i++ {
		st := StateApplied
		if i%2 == 0 {
			st = StateNoChange
		}
		if j := add(i, st); st == StateApplied {
			applied = append(applied, j)
		}
	}
	var p Pruner
	removed, err := p.Prune(dir, 5)
	if err != nil {
		t.Fatal(err)
	}
	if len(removed) != n/2-5 || p.opened != n {
		t.Fatalf("first prune removed %d (want %d), read %d files (want %d)", len(removed), n/2-5, p.opened, n)
	}
	p.opened = 0
	add(n, StateNoChange)
	if removed, err = p.Prune(dir, 5); err != nil || len(removed) != 1 || p.opened != 1 {
		t.Fatalf("after one more journal: removed %v (%v), read %d files, want 1 and 1", removed, err, p.opened)
	}
	// A revert saves an applied journal again: read again, then finished.
	p.opened = 0
	applied[0].State = StateReverted
	if err := applied[0].save(); err != nil {
		t.Fatal(err)
	}
	if removed, err = p.Prune(dir, 5); err != nil || p.opened != 1 || !slices.Equal(removed, []string{applied[0].ID}) {
		t.Fatalf("after a revert: removed %v (%v), read %d files; want %s removed after reading it alone", removed, err, p.opened, applied[0].ID)
	}
	// Same outcome as the one-shot function on the same directory.
	if again, err := PruneJournals(dir, 5); err != nil || len(again) != 0 {
		t.Errorf("PruneJournals after the Pruner removed %v (%v)", again, err)
	}
}

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

// saveJournal writes a journal dated at in state st into dir.
func saveJournal(t *testing.T, dir string, at time.Time, st string) *Journal {
	t.Helper()
	j, err := newJournal(dir, at)
	if err != nil {
		t.Fatal(err)
	}
	j.State = st
	if err := j.save(); err != nil {
		t.Fatal(err)
	}
	return j
}
