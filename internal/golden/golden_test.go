package golden

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// An update writes the file and prints the lines it changed; an update
// that changes nothing prints nothing; a check of the updated file passes.
func TestCheckUpdatePrintsTheDiff(t *testing.T) {
	var out bytes.Buffer
	Out = &out
	t.Cleanup(func() { Out = os.Stdout })
	file := filepath.Join(t.TempDir(), "sub", "g.txt")
	Check(t, file, []byte("one\ntwo\n"), true, "update-golden")
	if !strings.Contains(out.String(), "golden: rewrote "+file) || !strings.Contains(out.String(), `+ 	"two",`) {
		t.Errorf("a new file's update printed:\n%s", out.String())
	}
	out.Reset()
	Check(t, file, []byte("one\nthree\n"), true, "update-golden")
	if s := out.String(); !strings.Contains(s, `- 	"two",`) || !strings.Contains(s, `+ 	"three",`) {
		t.Errorf("the update's printed diff:\n%s", s)
	}
	out.Reset()
	Check(t, file, []byte("one\nthree\n"), true, "update-golden")
	if out.Len() != 0 {
		t.Errorf("an update that changed nothing printed:\n%s", out.String())
	}
	if b, err := os.ReadFile(file); err != nil || string(b) != "one\nthree\n" {
		t.Fatalf("file %q, %v", b, err)
	}
	Check(t, file, []byte("one\nthree\n"), false, "update-golden")
}

// A difference fails the check with the lines that differ.
func TestCheckFailsOnDifference(t *testing.T) {
	file := filepath.Join(t.TempDir(), "g.txt")
	if err := os.WriteFile(file, []byte("a\nb\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ft := &fakeT{TB: t}
	Check(ft, file, []byte("a\nc\n"), false, "update-golden")
	if !ft.failed || !strings.Contains(ft.msg, `- 	"b",`) || !strings.Contains(ft.msg, `+ 	"c",`) || !strings.Contains(ft.msg, "-update-golden to accept") {
		t.Errorf("failed %v: %s", ft.failed, ft.msg)
	}
}

type fakeT struct {
	testing.TB
	failed bool
	msg    string
}

func (f *fakeT) Helper() {}
func (f *fakeT) Errorf(format string, args ...any) {
	f.failed = true
	f.msg = fmtS(format, args...)
}

func fmtS(format string, args ...any) string { return fmt.Sprintf(format, args...) }
