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

// 6.12 on more than 8 vCPUs runs on one TCG thread (singleThreadTCG);
// everything else on a thread per vCPU.
func TestSingleThreadTCG(t *testing.T) {
	accel := func(shape, version string) string {
		s, err := Lookup(shape)
		if err != nil {
			t.Fatal(err)
		}
		a := s.machineArgsOn(version, []string{"tap0", "tap1", "tap2"}, []string{"d0", "d1"})
		for i := range a[:len(a)-1] {
			if a[i] == "-accel" {
				return a[i+1]
			}
		}
		t.Fatalf("%s on %q: no -accel in %v", shape, version, a)
		return ""
	}
	for _, c := range []struct{ shape, version, want string }{
		{"big", "6.12", "tcg,thread=single"},
		{"server", "6.12", "tcg,thread=single"},
		{"small", "6.12", "tcg,thread=multi"},
		{"big", "", "tcg,thread=multi"},
		{"big", "5.10", "tcg,thread=multi"},
	} {
		if got := accel(c.shape, c.version); got != c.want {
			t.Errorf("%s on %q: -accel %s, want %s", c.shape, c.version, got, c.want)
		}
	}
}
