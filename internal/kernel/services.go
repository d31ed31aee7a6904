package kernel

import (
	"fmt"
	"os/exec"
	"strings"

	"golang.org/x/sys/unix"
)

// ServiceManager starts and stops system services (irqbalance). The
// implementation for the live machine is Systemctl; tests use fakes.
type ServiceManager interface {
	Start(unit string) error
	Stop(unit string) error
	TryRestart(unit string) error
}

// Systemctl drives systemd through the systemctl command. Where systemd is
// not PID 1 (a container, this project's CI) each call fails with
// systemctl's own message, which callers report or tolerate.
type Systemctl struct{}

func (Systemctl) run(verb, unit string) error {
	out, err := exec.Command("systemctl", verb, unit).CombinedOutput()
	if err != nil {
		return fmt.Errorf("systemctl %s %s: %v: %s", verb, unit, err, strings.TrimSpace(string(out)))
	}
	return nil
}

// Start starts unit.
func (s Systemctl) Start(unit string) error { return s.run("start", unit) }

// Stop stops unit.
func (s Systemctl) Stop(unit string) error { return s.run("stop", unit) }

// TryRestart restarts unit if it runs.
func (s Systemctl) TryRestart(unit string) error { return s.run("try-restart", unit) }

// Terminate sends SIGTERM to process pid on the live machine.
func (f *FS) Terminate(pid int) error {
	if !f.IsLive() {
		return fmt.Errorf("signal pid %d: %w on a snapshot", pid, ErrUnsupported)
	}
	if pid <= 1 {
		return fmt.Errorf("refusing to signal pid %d", pid)
	}
	return unix.Kill(pid, unix.SIGTERM)
}
