package golden

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fakeT records what Check reports instead of failing the real test.
type fakeT struct {
	testing.TB
	failed bool
	msg    string
}

func (f *fakeT) Helper() {}
func (f *fakeT) Errorf(format string, args ...any) {
	f.failed = true
	f.msg = fmt.Sprintf(format, args...)
}

// An update writes the file and fails with the lines it changed; an
// update that changes nothing passes; a check of the updated file passes.
func TestCheckUpdateShowsTheDiff(t *testing.T) {
	file := filepath.Join(t.TempDir(), "sub", "g.txt")
	ft := &fakeT{TB: t}
	Check(ft, file, []byte("one\ntwo\n"), true, "update-golden")
	if !ft.failed || !strings.Contains(ft.msg, "rewrote "+file) || !strings.Contains(ft.msg, `"two"`) {
		t.Errorf("a new file's update: failed %v: %s", ft.failed, ft.msg)
	}
	ft = &fakeT{TB: t}
	Check(ft, file, []byte("one\nthree\n"), true, "update-golden")
	if !ft.failed || !strings.Contains(ft.msg, `"two"`) || !strings.Contains(ft.msg, `"three"`) || !strings.Contains(ft.msg, "run again without -update-golden") {
		t.Errorf("a changing update: failed %v: %s", ft.failed, ft.msg)
	}
	ft = &fakeT{TB: t}
	Check(ft, file, []byte("one\nthree\n"), true, "update-golden")
	if ft.failed {
		t.Errorf("an update that changed nothing failed: %s", ft.msg)
	}
	if b, err := os.ReadFile(file); err != nil || string(b) != "one\nthree\n" {
		t.Fatalf("file %q, %v", b, err)
	}
	Check(t, file, []byte("one\nthree\n"), false, "update-golden")
}

// A difference fails the check with the lines that differ (go-cmp's
// diff, whose spacing is deliberately unstable: only the lines are
// looked for).
func TestCheckFailsOnDifference(t *testing.T) {
	file := filepath.Join(t.TempDir(), "g.txt")
	if err := os.WriteFile(file, []byte("a\nb\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ft := &fakeT{TB: t}
	Check(ft, file, []byte("a\nc\n"), false, "update-golden")
	if !ft.failed || !strings.Contains(ft.msg, `"b"`) || !strings.Contains(ft.msg, `"c"`) || !strings.Contains(ft.msg, "-update-golden to accept") {
		t.Errorf("failed %v: %s", ft.failed, ft.msg)
	}
}
