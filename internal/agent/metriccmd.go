package agent

import (
	"context"
	"os/exec"
	"syscall"
	"time"
)

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
