package program

import (
	"context"
	"errors"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestOutput(t *testing.T) {
	out, err := Output(context.Background(), Exec{}, "sh", "-c", "echo one; echo two >&2")
	if err != nil || string(out) != "one\ntwo\n" {
		t.Errorf("Output = %q, %v", out, err)
	}
	_, err = Output(context.Background(), Exec{}, "sh", "-c", "echo the reason >&2; exit 3")
	if err == nil || err.Error() != "sh -c echo the reason >&2; exit 3: exit status 3: the reason" {
		t.Errorf("failing command: %v", err)
	}
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 3 {
		t.Errorf("the exit status is not kept: %v", err)
	}
	if _, err := Output(context.Background(), Exec{}); err == nil {
		t.Error("no command: no error")
	}
}

// In a Group, when ctx ends the whole process group is killed: the shell's
// background child too, which would otherwise hold the output pipe open
// for 30 s.
func TestGroupKilledWhole(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cmd := Group(Exec{}.Command(ctx, "sh", "-c", "sleep 30 & echo $!; wait"))
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 32)
	n, _ := stdout.Read(buf)
	child, err := strconv.Atoi(strings.TrimSpace(string(buf[:n])))
	if err != nil {
		t.Fatalf("child pid %q: %v", buf[:n], err)
	}
	cancel()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("Wait did not return after the context ended")
	}
	// The child is gone (reaped by init once killed): signal 0 fails.
	deadline := time.Now().Add(5 * time.Second)
	for syscall.Kill(child, 0) == nil {
		if time.Now().After(deadline) {
			syscall.Kill(child, syscall.SIGKILL)
			t.Fatalf("the shell's child %d outlived the cancelled command", child)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestRecorder(t *testing.T) {
	r := &Recorder{}
	if _, err := Output(context.Background(), r, "true", "a"); err != nil {
		t.Fatal(err)
	}
	if _, err := Output(context.Background(), r, "sh", "-c", "exit 0"); err != nil {
		t.Fatal(err)
	}
	want := [][]string{{"true", "a"}, {"sh", "-c", "exit 0"}}
	if d := cmp.Diff(want, r.Lines()); d != "" {
		t.Errorf("recorded (-want +got):\n%s", d)
	}
}

// Exec leaves a command in irqpilot's process group, so a Ctrl-C at the
// terminal stops it too; Group gives it one of its own.
func TestExecKeepsTheGroup(t *testing.T) {
	pgid := func(cmd *exec.Cmd) int {
		t.Helper()
		out, err := cmd.Output()
		if err != nil {
			t.Fatal(err)
		}
		n, err := strconv.Atoi(strings.TrimSpace(string(out)))
		if err != nil {
			t.Fatalf("pgid %q: %v", out, err)
		}
		return n
	}
	script := `cut -d" " -f5 /proc/$$/stat`
	if got, want := pgid(Exec{}.Command(context.Background(), "sh", "-c", script)), syscall.Getpgrp(); got != want {
		t.Errorf("Exec: process group %d, want irqpilot's %d", got, want)
	}
	if got := pgid(Group(Exec{}.Command(context.Background(), "sh", "-c", script))); got == syscall.Getpgrp() {
		t.Errorf("Group: still in irqpilot's process group %d", got)
	}
}
