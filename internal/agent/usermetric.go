package agent

import (
	"context"
	"fmt"
	"os/exec"
	"syscall"
	"time"
)

// maxMetricOutput bounds what the agent keeps of the metric command's
// output: one number needs a few bytes; a command that prints without end
// is cut off rather than held in the root process's memory.
const maxMetricOutput = 4 << 10

// capped keeps at most maxMetricOutput bytes and notes that more came.
type capped struct {
	b    []byte
	over bool
}

func (c *capped) Write(p []byte) (int, error) {
	if len(c.b)+len(p) > maxMetricOutput {
		c.over = true
	}
	if room := maxMetricOutput - len(c.b); room > 0 {
		c.b = append(c.b, p[:min(room, len(p))]...)
	}
	return len(p), nil
}

// runMetricCommand runs the command and returns its standard output, at
// most maxMetricOutput bytes of it.
func runMetricCommand(ctx context.Context, command string) ([]byte, error) {
	cmd := metricCommand(ctx, command)
	out := &capped{}
	cmd.Stdout = out
	if err := cmd.Run(); err != nil {
		return nil, err
	}
	if out.over {
		return nil, fmt.Errorf("printed more than %d bytes; want one number", maxMetricOutput)
	}
	return out.b, nil
}

// metricWaitDelay bounds how long the agent waits for the command's output
// pipe after the command was killed.
const metricWaitDelay = time.Second

// metricCommand is --adapt-metric-command run by /bin/sh in a process group
// of its own. When ctx ends the whole group is killed, not only the shell:
// a child the shell left behind ("sleep 15; echo 5") would otherwise hold
// the output pipe open and keep the agent (and its lock, and `irqpilot
// status`) waiting until it exits. WaitDelay stops waiting for the pipe
// even if something escaped the group.
func metricCommand(ctx context.Context, command string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, "/bin/sh", "-c", command)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error {
		return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
	cmd.WaitDelay = metricWaitDelay
	return cmd
}
