package lab

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"
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

// Every guest runs on one TCG thread unless IRQPILOT_LAB_TCG asks for a
// thread per vCPU.
func TestTCGThreads(t *testing.T) {
	accel := func() string {
		s, err := Lookup("big")
		if err != nil {
			t.Fatal(err)
		}
		a := s.machineArgs([]string{"tap0"}, []string{"d0"})
		for i := range a[:len(a)-1] {
			if a[i] == "-accel" {
				return a[i+1]
			}
		}
		t.Fatalf("no -accel in %v", a)
		return ""
	}
	for env, want := range map[string]string{"": "tcg,thread=single", "multi": "tcg,thread=multi", "bogus": "tcg,thread=single"} {
		t.Setenv("IRQPILOT_LAB_TCG", env)
		if got := accel(); got != want {
			t.Errorf("IRQPILOT_LAB_TCG=%q: -accel %s, want %s", env, got, want)
		}
	}
}

// A run stopped by a signal after 8 s says so; only the run's own timeout
// reads "no result within". Stopped by Ctrl-C, it used to claim the timeout.
func TestStoppedErrSaysWhy(t *testing.T) {
	for _, c := range []struct {
		name string
		// stopped: the caller's context is cancelled; timedOut: the run's
		// own timeout passed.
		stopped, timedOut bool
		elapsed           time.Duration
		want              string // "" no error
	}{
		{name: "nothing stopped, yet", elapsed: 8 * time.Second},
		{name: "stopped by the caller", stopped: true, elapsed: 8 * time.Second,
			want: "lab server: stopped after 8s, before a result (context canceled)"},
		{name: "timed out", timedOut: true, elapsed: 15 * time.Minute,
			want: "lab server: no result within 15m0s"},
	} {
		t.Run(c.name, func(t *testing.T) {
			parent, stop := context.WithCancel(context.Background())
			defer stop()
			timeout := 15 * time.Minute
			if c.timedOut {
				timeout = time.Nanosecond
			}
			run, cancel := context.WithTimeout(parent, timeout)
			defer cancel()
			if c.timedOut {
				<-run.Done()
			}
			if c.stopped {
				stop()
			}
			got := ""
			if err := stoppedErr(parent, run, "server", 15*time.Minute, c.elapsed); err != nil {
				got = err.Error()
			}
			if got != c.want {
				t.Errorf("stoppedErr = %q, want %q", got, c.want)
			}
		})
	}
}
