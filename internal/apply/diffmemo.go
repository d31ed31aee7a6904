package apply

import (
	"slices"

	"github.com/irqpilot/irqpilot/internal/setting"
)

// DiffMemo lets a caller that diffs the same changes again and again (the
// agent, every interval) skip the work whose inputs did not change. The
// changes are validated again only when they differ from the last call's
// (any field of any change); a setting whose value reads exactly as last
// time gets last time's verdict without comparing again (Same is a function
// of the value read and the change). Every value is still read from the
// machine on every call, and the result is what Diff returns. The zero
// value is ready; a DiffMemo is not safe for concurrent use.
type DiffMemo struct {
	in    []setting.Change // the changes last given
	valid []setting.Change // the same, as Validate left them
	old   []string         // per change: the value read last time
	st    []setting.Status // its verdict; "" when none yet
}

// DiffWith is Diff with a memo of the previous call.
func (a *Applier) DiffWith(changes []setting.Change, m *DiffMemo) ([]setting.Change, error) {
	return a.diff(changes, m)
}

// entries returns a validated copy of changes to diff, validating only
// when they are not the memo's.
func (m *DiffMemo) entries(changes []setting.Change) ([]setting.Change, error) {
	if m != nil && slices.Equal(m.in, changes) && m.in != nil {
		return slices.Clone(m.valid), nil
	}
	entries := slices.Clone(changes)
	if entries == nil {
		entries = []setting.Change{}
	}
	if err := Validate(entries); err != nil {
		if m != nil {
			*m = DiffMemo{}
		}
		return nil, err
	}
	if m != nil {
		*m = DiffMemo{in: slices.Clone(changes), valid: slices.Clone(entries),
			old: make([]string, len(entries)), st: make([]setting.Status, len(entries))}
	}
	return entries, nil
}

// verdict returns the status remembered for change i when its value read
// old last time too.
func (m *DiffMemo) verdict(i int, old string) (setting.Status, bool) {
	if m == nil || m.st[i] == "" || m.old[i] != old {
		return "", false
	}
	return m.st[i], true
}

func (m *DiffMemo) remember(i int, old string, st setting.Status) {
	if m != nil {
		m.old[i], m.st[i] = old, st
	}
}
