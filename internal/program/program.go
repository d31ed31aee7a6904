// Package program starts the programs irqpilot runs for its work: the
// benchmark's servers and load generators, irqbalance's one-shot balance,
// `ip netns exec`, a user's metric command. Library code does not call
// os/exec itself: it asks the machine it was given (kernel.FS.Programs),
// which the caller chose, so one place decides how a process starts and a
// test can record every start or refuse them.
package program

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Runner makes the commands a library starts.
type Runner interface {
	// Command is the command to run name with args. When ctx ends the
	// command is stopped (a Runner may stop more than the first process).
	Command(ctx context.Context, name string, args ...string) *exec.Cmd
}

// WaitDelay bounds how long a stopped command's output pipes are waited
// for: a process that escaped its group and holds them open cannot keep
// the caller.
const WaitDelay = time.Second

// Exec runs programs on this machine. Each command runs in a process group
// of its own: a Ctrl-C at the terminal reaches irqpilot, which stops its
// children in order, and when ctx ends the whole group is killed, not only
// the first process (a shell's child left behind would hold the output
// pipe open and keep the caller waiting).
type Exec struct{}

// Command implements Runner.
func (Exec) Command(ctx context.Context, name string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = WaitDelay
	return cmd
}

// Output runs argv through r and returns what it printed (standard output
// and error together). A failure's error names the command line and ends
// with the last of its output, the part that says why.
func Output(ctx context.Context, r Runner, argv ...string) ([]byte, error) {
	if len(argv) == 0 {
		return nil, fmt.Errorf("program: no command")
	}
	out, err := r.Command(ctx, argv[0], argv[1:]...).CombinedOutput()
	if err != nil {
		return out, fmt.Errorf("%s: %w: %s", strings.Join(argv, " "), err, Tail(out, 400))
	}
	return out, nil
}

// Tail is the last n bytes of a program's output, trimmed, with "…" in
// front when cut.
func Tail(b []byte, n int) string {
	s := strings.TrimSpace(string(b))
	if len(s) > n {
		s = "…" + s[len(s)-n:]
	}
	return s
}

// Recorder is a Runner that notes each command line it is asked for and
// then makes the command with Next (Exec when nil). For tests: what a
// library starts is seen, not guessed.
type Recorder struct {
	Next Runner

	mu    sync.Mutex
	lines [][]string
}

// Command implements Runner.
func (r *Recorder) Command(ctx context.Context, name string, args ...string) *exec.Cmd {
	r.mu.Lock()
	r.lines = append(r.lines, append([]string{name}, args...))
	r.mu.Unlock()
	next := r.Next
	if next == nil {
		next = Exec{}
	}
	return next.Command(ctx, name, args...)
}

// Lines are the command lines asked for, in order.
func (r *Recorder) Lines() [][]string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([][]string, len(r.lines))
	copy(out, r.lines)
	return out
}
