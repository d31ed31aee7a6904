package lab

import (
	"os"
	"strings"
	"testing"
)

// A guest whose kernel panicked before the script began is booted again
// (crashedBooting); one that panicked after, or finished, is not.
func TestCrashedBooting(t *testing.T) {
	b, err := os.ReadFile("testdata/console/int3-oops-6.12-server.txt")
	if err != nil {
		t.Fatal(err)
	}
	console := string(b)
	if !crashedBooting(&Result{Console: console}) {
		t.Errorf("the captured 6.12 boot oops is not read as a crash while booting")
	}
	if got, want := panicLine(console), "Oops: int3: 0000 [#2] PREEMPT SMP PTI"; got != want {
		t.Errorf("panicLine = %q, want %q", got, want)
	}
	for name, c := range map[string]string{
		"after the script began": "@@LAB-BEGIN@@\n" + console,
		"finished":               "@@LAB-BEGIN@@\nok\n@@LAB-END rc=0@@\n",
		"powered off early":      strings.Split(console, "Kernel panic")[0],
	} {
		if crashedBooting(&Result{Console: c}) {
			t.Errorf("%s: read as a crash while booting", name)
		}
	}
	if crashedBooting(nil) {
		t.Error("no result read as a crash while booting")
	}
}
