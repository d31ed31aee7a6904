package kernel

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

const (
	signalChildEnv = "IRQPILOT_TEST_SNAPSHOT_CHILD"
	signalModeEnv  = "IRQPILOT_TEST_SNAPSHOT_MODE"
)

// TestSnapshotSignalChild is the child of TestSnapshotSignalCleansUp: it
// opens the snapshot named by the environment and is signalled by the parent
// when it prints "unpacking" (its unpack then waits in unpackHook, with 100
// entries written) or "opened". In mode "handled" it handles SIGINT itself,
// the way `irqpilot record` does, and so survives it.
func TestSnapshotSignalChild(t *testing.T) {
	snap := os.Getenv(signalChildEnv)
	if snap == "" {
		t.Skip("only run as the child of TestSnapshotSignalCleansUp")
	}
	mode := os.Getenv(signalModeEnv)
	own := make(chan os.Signal, 1)
	if mode == "handled" {
		signal.Notify(own, syscall.SIGINT)
	}
	if mode != "opened" {
		unpackHook = func(n int) {
			if n == 100 {
				fmt.Println("unpacking")
				if mode == "handled" {
					<-own
					return
				}
				select {} // killed by the signal
			}
		}
	}
	_, cleanup, err := OpenSnapshot(snap)
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(0)
	}
	fmt.Println("opened")
	if mode == "handled" {
		cleanup()
		os.Exit(0)
	}
	select {} // killed by the signal
}

// bigSnapshot is an archive of n small files in directories of 100.
func bigSnapshot(t *testing.T, n int) string {
	t.Helper()
	entries := make([]tarEntry, 0, n)
	for i := range n {
		entries = append(entries, tarEntry{name: fmt.Sprintf("sys/d%d/f%d", i/100, i), body: "0\n"})
	}
	return writeTarGz(t, entries)
}

// SIGINT, SIGTERM or SIGHUP while a snapshot is being unpacked, or while it is in
// use, removes its directory, and the process still dies of the signal; a
// program that handles the signal itself survives it, without the snapshot.
func TestSnapshotSignalCleansUp(t *testing.T) {
	if testing.Short() {
		t.Skip("starts child processes")
	}
	snap := bigSnapshot(t, 1000)
	for _, tc := range []struct {
		mode, ready string
		sig         syscall.Signal
	}{
		{"unpacking", "unpacking", syscall.SIGINT},
		{"unpacking", "unpacking", syscall.SIGTERM},
		{"opened", "opened", syscall.SIGINT},
		{"opened", "opened", syscall.SIGTERM},
		{"opened", "opened", syscall.SIGHUP},
		{"unpacking", "unpacking", syscall.SIGHUP},
		{"handled", "unpacking", syscall.SIGINT},
	} {
		t.Run(tc.mode+"/"+tc.sig.String(), func(t *testing.T) {
			box := t.TempDir()
			argv := []string{os.Args[0], "-test.run=^TestSnapshotSignalChild$", "-test.count=1"}
			if signal.Ignored(syscall.SIGHUP) {
				// Run under nohup, the child would inherit SIGHUP ignored
				// and rightly not watch for it: give it the default back.
				argv = append([]string{"env", "--default-signal=HUP"}, argv...)
			}
			cmd := exec.Command(argv[0], argv[1:]...)
			cmd.Env = append(os.Environ(), signalChildEnv+"="+snap, signalModeEnv+"="+tc.mode, "TMPDIR="+box)
			pipe, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
			out := bufio.NewReader(pipe)
			line, err := out.ReadString('\n')
			if strings.TrimSpace(line) != tc.ready {
				t.Fatalf("child said %q (%v), want %q", line, err, tc.ready)
			}
			if m, _ := filepath.Glob(filepath.Join(box, "irqpilot-snapshot-*", "sys", "d0")); len(m) == 0 {
				t.Fatal("nothing unpacked before the signal")
			}
			if err := cmd.Process.Signal(tc.sig); err != nil {
				t.Fatal(err)
			}
			rest, _ := io.ReadAll(out)
			err = cmd.Wait()
			if tc.mode == "handled" {
				if err != nil || !strings.Contains(string(rest), "interrupted") {
					t.Errorf("child: %v, output %q; want it to survive and OpenSnapshot to say interrupted", err, rest)
				}
			} else {
				var ee *exec.ExitError
				if !errors.As(err, &ee) {
					t.Fatalf("child: %v, output %q", err, rest)
				}
				if ws := ee.Sys().(syscall.WaitStatus); !ws.Signaled() || ws.Signal() != tc.sig {
					t.Errorf("child ended with %v, want death by %v (output %q)", ee, tc.sig, rest)
				}
			}
			assertNoSnapshotDirs(t, box)
		})
	}
}

// A snapshot directory left by a process that died without cleaning up (OOM
// kill, SIGKILL) is removed by the next OpenSnapshot; one whose owner is
// alive, or that belongs to another user, or has no owner in its name (older
// versions), is kept.
func TestSnapshotStaleDirsRemoved(t *testing.T) {
	box := sandbox(t)
	// A PID that has been used and is now dead: a finished child. (If the
	// PID were reused, the start time would not match, which counts too.)
	c := exec.Command("true")
	if err := c.Run(); err != nil {
		t.Fatal(err)
	}
	dead := c.Process.Pid
	self := os.Getpid()
	start, err := New("/").ProcStart(self)
	if err != nil {
		t.Fatal(err)
	}
	mk := func(name string) string {
		p := filepath.Join(box, name)
		if err := os.MkdirAll(filepath.Join(p, "proc"), 0o755); err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(p, "proc", "interrupts"), []byte("x"), 0o644)
		return p
	}
	gone := []string{
		mk(fmt.Sprintf("irqpilot-snapshot-%d-%d-1", dead, start)),
		mk(fmt.Sprintf("irqpilot-snapshot-%d-%d-2", self, start+1)), // our PID, earlier owner
	}
	kept := []string{
		mk(fmt.Sprintf("irqpilot-snapshot-%d-%d-3", self, start)),
		mk("irqpilot-snapshot-123456"), // older naming: owner unknown
		mk(fmt.Sprintf("other-%d-%d", dead, start)),
	}
	other := mk(fmt.Sprintf("irqpilot-snapshot-%d-%d-4", dead, start))
	if os.Geteuid() == 0 {
		if err := os.Chown(other, 65534, 65534); err != nil {
			t.Fatal(err)
		}
		kept = append(kept, other)
	} else {
		gone = append(gone, other)
	}
	f, cleanup, err := OpenSnapshot(writeTarGz(t, []tarEntry{{name: "proc/cmdline", body: "x"}}))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range gone {
		if _, err := os.Stat(p); err == nil {
			t.Errorf("stale %s kept", filepath.Base(p))
		}
	}
	for _, p := range kept {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("%s removed: %v", filepath.Base(p), err)
		}
	}
	if !strings.HasPrefix(filepath.Base(f.Root()), fmt.Sprintf("irqpilot-snapshot-%d-%d-", self, start)) {
		t.Errorf("snapshot directory %s does not name its owner", f.Root())
	}
	cleanup()
	if _, err := os.Stat(f.Root()); err == nil {
		t.Error("cleanup left the snapshot directory")
	}
}
