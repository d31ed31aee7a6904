// Package golden compares a test's output with a file kept in testdata,
// and on request rewrites the file. A rewrite that changed the file fails
// the test with the lines it changed, so that an update is read, not just
// accepted (go test hides what a passing package prints).
package golden

import (
	"bytes"
	"errors"
	iofs "io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// Check compares got with file. With update it writes got to file instead
// (making its directory) and, when that changed the file, fails the test
// with the difference it wrote; the next run without the flag checks it.
// flag names the test flag that updates, for the messages.
func Check(t testing.TB, file string, got []byte, update bool, flag string) {
	t.Helper()
	want, err := os.ReadFile(file)
	if update {
		if err != nil && !errors.Is(err, iofs.ErrNotExist) {
			t.Fatal(err)
		}
		if err == nil && bytes.Equal(want, got) {
			return
		}
		if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(file, got, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Errorf("rewrote %s (-old +new); read it, then run again without -%s:\n%s", file, flag, Diff(want, got))
		return
	}
	if err != nil {
		t.Fatalf("%v (run go test -run '%s' -%s)", err, t.Name(), flag)
	}
	if !bytes.Equal(want, got) {
		t.Errorf("%s differs (-want +got; run go test -run '%s' -%s to accept):\n%s", file, t.Name(), flag, Diff(want, got))
	}
}

// Diff is the line-by-line difference between a and b (-a +b).
func Diff(a, b []byte) string {
	return cmp.Diff(strings.Split(string(a), "\n"), strings.Split(string(b), "\n"))
}
