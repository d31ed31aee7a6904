package main

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// A --state-dir that does not exist is a mistake, not "nothing to revert":
// the verbs that only read it refuse with exit status 2, naming it, and
// create nothing.
func TestMissingStateDirIsAnError(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "typo")
	for _, args := range [][]string{
		{"revert", "--state-dir", dir},
		{"revert", "--all", "--state-dir", dir},
		{"history", "--state-dir", dir},
		{"verify", "--state-dir", dir},
		{"--json", "history", "--state-dir", dir},
	} {
		_, stderr, err := runIrqpilot(t, args...)
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 2 || !strings.Contains(stderr, "--state-dir "+dir+": no such directory") {
			t.Errorf("%v: %v, stderr %q", args, err, stderr)
		}
		if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("%v created %s", args, dir)
		}
	}
}
