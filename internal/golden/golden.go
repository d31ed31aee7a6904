// Package golden compares a test's output with a file kept in testdata,
// and on request rewrites the file, printing the lines it changed so that
// an update is read, not just accepted.
package golden

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	iofs "io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// Out is where Check prints what an update changed (standard output, so
// that it shows without -v).
var Out io.Writer = os.Stdout

// Check compares got with file. With update it writes got to file instead
// (making its directory) and prints the difference it wrote, or nothing
// when the file already held got. flag names the test flag that updates,
// for the message of a failure.
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
		fmt.Fprintf(Out, "golden: rewrote %s (-old +new):\n%s", file, Diff(want, got))
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
