// Package program starts the programs irqpilot runs for its work: the
// benchmark's servers and load generators, irqbalance's one-shot balance,
// `ip netns exec`, a user's metric command. The packages that run on a
// managed machine do not call os/exec themselves (the lab's harness of
// virtual machines does): they ask the machine they were given
// (kernel.FS.Programs), which the caller chose, so one place decides how a
// process starts and a test can record every start.
package program

import (
	"context"
	"errors"
	"fmt"
	"os"
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

// WaitDelay bounds how long a stopped group's output pipes are waited for
// (Group): a process that escaped the group and holds them open cannot
// keep the caller.
const WaitDelay = time.Second

// Exec runs programs on this machine, as exec.CommandContext does: in
// irqpilot's process group, so a Ctrl-C at the terminal stops them too.
type Exec struct{}

// Command implements Runner.
func (Exec) Command(ctx context.Context, name string, args ...string) *exec.Cmd {
	return exec.CommandContext(ctx, name, args...)
}

// Group puts cmd (not started yet) in a process group of its own: a Ctrl-C
// at the terminal reaches irqpilot alone, which stops its children in
// order (the testbed's servers), and when the command's context ends the
// whole group is killed, not only the first process (a shell's child left
// behind, "sleep 15; echo 5", would otherwise hold the output pipe open and
// keep the caller waiting). It returns cmd.
func Group(cmd *exec.Cmd) *exec.Cmd {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setpgid = true
	cmd.Cancel = func() error {
		err := syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		if errors.Is(err, syscall.ESRCH) {
			return os.ErrProcessDone
		}
		return err
	}
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
		return out, Failed(argv, err, out)
	}
	return out, nil
}

// Failed is the error of argv that ended with err after printing out: it
// names the command line, keeps err (an *exec.ExitError stays reachable
// with errors.As) and ends with the last of the output, the part that says
// why.
func Failed(argv []string, err error, out []byte) error {
	return fmt.Errorf("%s: %w: %s", strings.Join(argv, " "), err, Tail(out, 400))
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
