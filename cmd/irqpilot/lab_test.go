package main

import (
	"bytes"
	"os"
	"strings"
	"testing"
)

// TestLabRefusesBeforeBooting: bad input is refused with an error that
// names it, before anything is fetched or booted.
func TestLabRefusesBeforeBooting(t *testing.T) {
	dyn := "/bin/true" // Debian's, dynamically linked
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"lab", "--shape", "huge", "--", "true"}, `unknown lab shape "huge" (known: big, server, small)`},
		{[]string{"lab"}, "give a command to run in the guest after --, or --shell"},
		{[]string{"lab", "--shell", "--", "true"}, "--shell takes no command"},
		{[]string{"lab", "--timeout", "0s", "--", "true"}, "--timeout must be positive"},
		{[]string{"lab", "--guest-binary", dyn, "--", "true"}, "is dynamically linked"},
		{[]string{"lab", "--fleet", "0", "--fleet-dir", "/nonexistent"}, "--fleet needs a number of guests"},
		{[]string{"lab", "--fleet", "2", "--", "true"}, "--fleet takes neither --shell nor a command"},
	} {
		cmd := selfCmd(nil, tc.args...)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		err := cmd.Run()
		if err == nil || !strings.Contains(stderr.String(), tc.want) {
			t.Errorf("irqpilot %s: err %v, stderr %q, want %q", strings.Join(tc.args, " "), err, stderr.String(), tc.want)
		}
	}
	if _, err := os.Stat(dyn); err != nil {
		t.Fatalf("%s: %v", dyn, err)
	}
}

func TestLabList(t *testing.T) {
	out := string(invRun(t, "lab", "--list"))
	for _, s := range []string{"small", "server", "big", "2 packages × 8 cores × 2 threads in 4 nodes"} {
		if !strings.Contains(out, s) {
			t.Errorf("lab --list lacks %q:\n%s", s, out)
		}
	}
}
