package lab

import (
	"context"
	"strings"
	"testing"
	"time"
)

// A run stopped by a signal after 8 s says so; only the run's own timeout
// reads "no result within". Stopped by Ctrl-C, it used to claim the timeout.
func TestStoppedErrSaysWhy(t *testing.T) {
	parent, stop := context.WithCancel(context.Background())
	run, cancel := context.WithTimeout(parent, 15*time.Minute)
	defer cancel()
	if err := stoppedErr(parent, run, "server", 15*time.Minute, 8*time.Second); err != nil {
		t.Fatalf("nothing stopped, yet: %v", err)
	}
	stop()
	err := stoppedErr(parent, run, "server", 15*time.Minute, 8*time.Second)
	if err == nil || strings.Contains(err.Error(), "no result within") || !strings.Contains(err.Error(), "stopped after 8s") {
		t.Errorf("stopped by the caller: %v", err)
	}
	run2, cancel2 := context.WithTimeout(context.Background(), time.Nanosecond)
	defer cancel2()
	<-run2.Done()
	if err := stoppedErr(context.Background(), run2, "server", 15*time.Minute, 15*time.Minute); err == nil || !strings.Contains(err.Error(), "no result within 15m0s") {
		t.Errorf("timed out: %v", err)
	}
}
