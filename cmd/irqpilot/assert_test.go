package main

import (
	"encoding/json"
	"strings"
	"testing"
)

// runJSON runs irqpilot (this test binary) behind prefix (nil, or a wrapper
// such as "ip netns exec NS") with args, which ask for --json; the exit
// status must be code, and standard output is decoded into v. It returns
// standard error.
func runJSON(t *testing.T, prefix []string, code int, v any, args ...string) string {
	t.Helper()
	out, errOut, err := runCmd(selfCmd(prefix, args...))
	if got := exitCode(err); got != code {
		t.Fatalf("irqpilot %s: exit %d (%v), want %d\n%s%s", strings.Join(args, " "), got, err, code, out, errOut)
	}
	decodeJSON(t, out, v)
	return errOut
}

// decodeJSON decodes the JSON document out into v; anything else fails t.
func decodeJSON(t *testing.T, out string, v any) {
	t.Helper()
	if err := json.Unmarshal([]byte(out), v); err != nil {
		t.Fatalf("not JSON: %v\n%.2000s", err, out)
	}
}

// wantLines checks that each of want is a whole line of out (trailing
// blanks aside, as tables pad their last column).
func wantLines(t *testing.T, out string, want ...string) {
	t.Helper()
	have := map[string]bool{}
	for _, l := range strings.Split(out, "\n") {
		have[strings.TrimRight(l, " ")] = true
	}
	for _, w := range want {
		if !have[strings.TrimRight(w, " ")] {
			t.Errorf("no line %q in:\n%s", w, out)
		}
	}
}

// countStatus counts the entries of a journal (apply, revert, history
// --json) whose status is status.
func countStatus(entries []journalEntry, status string) int {
	n := 0
	for _, e := range entries {
		if e.Status == status {
			n++
		}
	}
	return n
}

// journalEntry is what the tests read of a journal's entries[].
type journalEntry struct {
	Kind   string `json:"kind"`
	Target string `json:"target"`
	Path   string `json:"path"`
	Value  string `json:"value"`
	Old    string `json:"old"`
	Status string `json:"status"`
}

// journalJSON is one journal as revert --json prints it, and as history
// --json lists them.
type journalJSON struct {
	ID      string         `json:"id"`
	State   string         `json:"state"`
	Entries []journalEntry `json:"entries"`
}

// historyOut is history --json.
type historyOut struct {
	Journals   []journalJSON `json:"journals"`
	Unreadable []struct {
		File string `json:"file"`
	} `json:"unreadable"`
}

// revertOut is revert --json: the reverted journal, or nothing to revert.
type revertOut struct {
	journalJSON
	Nothing bool   `json:"nothing_to_revert"`
	Reason  string `json:"reason"`
}
