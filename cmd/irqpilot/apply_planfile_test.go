package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// `apply --dry-run /dev/zero` died of a fatal out-of-memory and a FIFO hung
// apply for ever. Both are refused, naming the file, with exit 2, before
// anything else is read.
func TestApplyRefusesPlanThatIsNotAFile(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "plan.fifo")
	if err := unix.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ file, want string }{{"/dev/zero", "character device"}, {fifo, "FIFO"}} {
		cmd := selfCmd(nil, "apply", "--dry-run", "--state-dir", filepath.Join(t.TempDir(), "s"), tc.file)
		var errb strings.Builder
		cmd.Stderr = &errb
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			if code := exitCode(err); code != 2 || !strings.Contains(errb.String(), tc.want) || !strings.Contains(errb.String(), tc.file) {
				t.Errorf("apply %s: exit %d\n%s", tc.file, code, errb.String())
			}
		case <-time.After(60 * time.Second):
			cmd.Process.Kill()
			<-done
			t.Errorf("apply %s still running after 60s", tc.file)
		}
	}
	_ = os.Remove(fifo)
}
