package kernel

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
)

// ErrNoServiceManager: the machine was not booted with systemd (it is not
// PID 1, as in most containers), so units cannot be started or stopped.
// Callers fall back to acting on the process, or tell the user.
var ErrNoServiceManager = errors.New("systemd is not running as the service manager (PID 1)")

// ServiceManager starts and stops system services by unit name
// ("irqbalance.service").
type ServiceManager interface {
	// Start starts the unit (systemctl start).
	Start(unit string) error
	// Stop stops the unit (systemctl stop). It can succeed and leave the
	// daemon running when the daemon was started outside the manager.
	Stop(unit string) error
	// TryRestart restarts the unit if it is running and does nothing
	// otherwise (systemctl try-restart).
	TryRestart(unit string) error
}

// Services returns the service manager of the machine the FS reads: on the
// live machine systemctl; below any other root one that refuses every call
// with ErrUnsupported (a snapshot has no services).
func (f *FS) Services() ServiceManager {
	if !f.IsLive() {
		return noServices{}
	}
	return Systemctl{}
}

type noServices struct{}

func (noServices) Start(unit string) error      { return noServicesErr("start", unit) }
func (noServices) Stop(unit string) error       { return noServicesErr("stop", unit) }
func (noServices) TryRestart(unit string) error { return noServicesErr("try-restart", unit) }

func noServicesErr(verb, unit string) error {
	return fmt.Errorf("%s %s: %w on a snapshot", verb, unit, ErrUnsupported)
}

// SystemdRunDir exists exactly when systemd is the running service manager;
// it is what sd_booted(3) checks.
const SystemdRunDir = "/run/systemd/system"

// Systemctl is the ServiceManager of a machine booted with systemd: it
// runs systemctl(1). When systemd is not running every call returns
// ErrNoServiceManager without running anything.
type Systemctl struct {
	// Bin is the systemctl program; "" looks up "systemctl" in PATH.
	Bin string
	// RunDir replaces SystemdRunDir (tests).
	RunDir string
}

// Start runs systemctl start unit.
func (s Systemctl) Start(unit string) error { return s.run("start", unit) }

// Stop runs systemctl stop unit.
func (s Systemctl) Stop(unit string) error { return s.run("stop", unit) }

// TryRestart runs systemctl try-restart unit.
func (s Systemctl) TryRestart(unit string) error { return s.run("try-restart", unit) }

func (s Systemctl) run(verb, unit string) error {
	dir := s.RunDir
	if dir == "" {
		dir = SystemdRunDir
	}
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		return fmt.Errorf("systemctl %s %s: %w (no %s)", verb, unit, ErrNoServiceManager, dir)
	}
	bin := s.Bin
	if bin == "" {
		bin = "systemctl"
	}
	out, err := exec.Command(bin, verb, unit).CombinedOutput()
	if err != nil {
		if msg := strings.TrimSpace(string(out)); msg != "" {
			return fmt.Errorf("systemctl %s %s: %v: %s", verb, unit, err, msg)
		}
		return fmt.Errorf("systemctl %s %s: %w", verb, unit, err)
	}
	return nil
}
