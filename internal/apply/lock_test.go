package apply

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The lock's error names the process that holds it now — here flock(1),
// which writes no pid — never this process, whose pid an earlier hold left
// behind; a released lock file names nobody.
func TestAcquireLockNamesTheHolder(t *testing.T) {
	flock, err := exec.LookPath("flock")
	if err != nil {
		t.Skip("flock(1) not installed (util-linux)")
	}
	dir := filepath.Join(t.TempDir(), "state")
	l, err := AcquireLock(dir)
	if err != nil {
		t.Fatal(err)
	}
	l.Release()
	p := filepath.Join(dir, "lock")
	if b, _ := os.ReadFile(p); len(b) != 0 {
		t.Errorf("released lock file still names %q", b)
	}
	// An earlier irqpilot's pid left in the file (a crash before Release)
	// is not trusted either when it is our own.
	os.WriteFile(p, []byte(fmt.Sprintf("%d\n", os.Getpid())), 0o600)

	cmd := exec.Command(flock, p, "sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	var lerr error
	for deadline := time.Now().Add(10 * time.Second); ; {
		l, lerr = AcquireLock(dir)
		if lerr != nil {
			break
		}
		l.Release()
		if time.Now().After(deadline) {
			t.Fatal("flock(1) never took the lock")
		}
		time.Sleep(10 * time.Millisecond)
	}
	msg := lerr.Error()
	if want := fmt.Sprintf("(pid %d, flock)", cmd.Process.Pid); !strings.Contains(msg, want) {
		t.Errorf("error %q does not name the holder %s", msg, want)
	}
	if strings.Contains(msg, fmt.Sprintf("pid %d", os.Getpid())) {
		t.Errorf("error %q names this process, which does not hold the lock", msg)
	}
}
