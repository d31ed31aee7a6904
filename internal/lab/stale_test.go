package lab

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/irqpilot/irqpilot/internal/kernel"
	"github.com/irqpilot/irqpilot/internal/livetest/liveroot"
)

// hostFS is the machine the tests' runs are owned on.
var hostFS = kernel.New("/")

// A run killed with SIGKILL leaves its namespace (with its taps) and its
// directory; the next run reclaims them. A run whose owner still runs, a
// directory without an owner file and another user's owner file are left
// alone.

func TestReclaimStaleRun(t *testing.T) {
	liveroot.Need(t)
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)

	// The killed run: a real child process, gone, that made a namespace
	// with a tap in it, as tapNamespace does.
	dead := exec.Command("sleep", "60")
	if err := dead.Start(); err != nil {
		t.Fatal(err)
	}
	deadDir := filepath.Join(tmp, "irqpilot-lab-killed")
	if err := os.Mkdir(deadDir, 0o700); err != nil {
		t.Fatal(err)
	}
	st, err := kernel.New("/").ProcStart(dead.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	ns := fmt.Sprintf("irqplab-stale%d", os.Getpid())
	writeOwner(t, deadDir, runOwner{PID: dead.Process.Pid, StartTime: st, Netns: ns}, 0o600)
	if err := kernel.AddNetns(ns); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = kernel.DelNetns(ns) })
	// A process left running inside it, as a guest of a killed fleet run.
	inside := exec.Command("sleep", "300")
	if err := kernel.InNetns(ns, func() error {
		if _, err := addTap(ns, "tap0", 1); err != nil {
			return err
		}
		return inside.Start()
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = inside.Process.Kill() })
	waited := make(chan error, 1)
	go func() { waited <- inside.Wait() }()
	if err := dead.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = dead.Wait()

	// A live run: this process.
	liveDir := filepath.Join(tmp, "irqpilot-lab-live")
	if err := os.Mkdir(liveDir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := markOwner(hostFS, liveDir, "irqplab-notmade"); err != nil {
		t.Fatal(err)
	}
	// Not a run's: no owner file; and an owner file others can write.
	bare := filepath.Join(tmp, "irqpilot-fleet-bare")
	if err := os.Mkdir(bare, 0o700); err != nil {
		t.Fatal(err)
	}
	loose := filepath.Join(tmp, "irqpilot-fleet-loose")
	if err := os.Mkdir(loose, 0o700); err != nil {
		t.Fatal(err)
	}
	writeOwner(t, loose, runOwner{PID: dead.Process.Pid, StartTime: st, Netns: ns}, 0o666)

	var log bytes.Buffer
	got, err := ReclaimStale(hostFS, &log)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0] != deadDir {
		t.Fatalf("reclaimed %q, want only the killed run's %s", got, deadDir)
	}
	if _, err := os.Stat(filepath.Join(kernel.RunNetNSDir, ns)); !os.IsNotExist(err) {
		t.Errorf("the killed run's namespace %s is still there (%v)", ns, err)
	}
	select {
	case <-waited:
	case <-time.After(10 * time.Second):
		t.Errorf("the process inside the killed run's namespace (pid %d) still runs", inside.Process.Pid)
	}
	if _, err := os.Stat(deadDir); !os.IsNotExist(err) {
		t.Errorf("the killed run's directory is still there (%v)", err)
	}
	for _, d := range []string{liveDir, bare, loose} {
		if _, err := os.Stat(d); err != nil {
			t.Errorf("%s was removed: only a dead owner's run is reclaimed", d)
		}
	}
	if !strings.Contains(log.String(), "namespace "+ns) {
		t.Errorf("the log does not say what was reclaimed: %q", log.String())
	}
}

func writeOwner(t *testing.T, dir string, o runOwner, mode os.FileMode) {
	t.Helper()
	b, _ := json.Marshal(o)
	p := filepath.Join(dir, ownerFile)
	if err := os.WriteFile(p, b, mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, mode); err != nil { // past the umask
		t.Fatal(err)
	}
}
