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

// --json holds on the empty paths too: a revert with nothing left, and the
// lab's shape list, print JSON documents (docs/json.md), not text.
func TestJSONOnEmptyPaths(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	var nothing struct {
		Nothing bool   `json:"nothing_to_revert"`
		Reason  string `json:"reason"`
	}
	runJSON(t, nil, 0, &nothing, "--json", "revert", "--state-dir", dir)
	if !nothing.Nothing || !strings.HasPrefix(nothing.Reason, "nothing to revert") {
		t.Errorf("revert --json with nothing: %+v", nothing)
	}
	var all []map[string]any
	runJSON(t, nil, 0, &all, "--json", "revert", "--all", "--state-dir", dir)
	if all == nil || len(all) != 0 {
		t.Errorf("revert --all --json with nothing: %v", all)
	}
	var shapes []struct {
		Name string `json:"name"`
		CPUs int    `json:"cpus"`
		NICs []struct {
			Model string `json:"model"`
		} `json:"nics"`
	}
	runJSON(t, nil, 0, &shapes, "--json", "lab", "--list")
	if len(shapes) < 3 || shapes[0].Name == "" || shapes[0].CPUs == 0 || len(shapes[0].NICs) == 0 {
		t.Errorf("lab --list --json: %+v", shapes)
	}
}

// `make build` stamps the version `git describe` gives, so a binary built
// from the repository never says "devel" (the .deb's script does the same
// with a Debian version; the lab runs the binary it is given).
func TestMakeBuildStampsVersion(t *testing.T) {
	want, err := exec.Command("git", "describe", "--tags", "--match", "v[0-9]*", "--always", "--dirty").Output()
	if err != nil {
		t.Skipf("not in a git checkout: %v", err)
	}
	out, err := exec.Command("make", "-s", "-n", "-C", "../..", "build").CombinedOutput()
	if err != nil {
		t.Fatalf("make -n build: %v: %s", err, out)
	}
	if v := strings.TrimSpace(string(want)); !strings.Contains(string(out), "-X main.version="+v) {
		t.Errorf("make build does not stamp %q:\n%s", v, out)
	}
}
