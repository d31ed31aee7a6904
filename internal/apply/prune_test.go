package apply

import (
	"slices"
	"testing"
	"time"
)

// PruneJournals keeps the newest finished journals and every journal that
// may still hold changes.
func TestPruneJournalsKeepsApplied(t *testing.T) {
	dir := t.TempDir()
	t0 := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	states := []string{StateReverted, StateApplied, StateNoChange, StateRolledBack, StateApplying, StateReverted, StateRollbackIncomplete, StateReverted}
	var ids []string
	for i, st := range states {
		j, err := newJournal(dir, t0.Add(time.Duration(i)*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		j.State = st
		if err := j.save(); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, j.ID)
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
