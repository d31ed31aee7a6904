package kernel

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	sddbus "github.com/coreos/go-systemd/v22/dbus"
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
// live machine systemd; below any other root one that refuses every call
// with ErrUnsupported (a snapshot has no services).
func (f *FS) Services() ServiceManager {
	if !f.IsLive() {
		return noServices{}
	}
	return Systemd{}
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

// Systemd is the ServiceManager of a machine booted with systemd. It asks
// systemd itself over its private socket (go-systemd's dbus package), as
// systemctl does when run by root: no program is started and no D-Bus
// daemon is needed. Each call waits until systemd says the job is done.
// When systemd is not running every call returns ErrNoServiceManager and
// nothing is asked.
type Systemd struct {
	// RunDir is where sd_booted looks; "" is SystemdRunDir.
	RunDir string
	// Timeout bounds a call, the job included; 0 is 3 minutes: a stop
	// systemd ends with SIGKILL after its default 90 s, and the start after
	// it, are still answered.
	Timeout time.Duration
}

// Start starts unit and waits for the job (systemctl start).
func (s Systemd) Start(unit string) error { return s.run("start", unit) }

// Stop stops unit and waits for the job (systemctl stop).
func (s Systemd) Stop(unit string) error { return s.run("stop", unit) }

// TryRestart restarts unit if it runs (systemctl try-restart).
func (s Systemd) TryRestart(unit string) error { return s.run("try-restart", unit) }

func (s Systemd) run(verb, unit string) error {
	dir := s.RunDir
	if dir == "" {
		dir = SystemdRunDir
	}
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		return fmt.Errorf("%s %s: %w (no %s)", verb, unit, ErrNoServiceManager, dir)
	}
	timeout := s.Timeout
	if timeout <= 0 {
		timeout = 3 * time.Minute
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	conn, err := sddbus.NewSystemdConnectionContext(ctx)
	if err != nil {
		return fmt.Errorf("%s %s: connecting to systemd: %w", verb, unit, err)
	}
	defer conn.Close()
	job := map[string]func(context.Context, string, string, chan<- string) (int, error){
		"start":       conn.StartUnitContext,
		"stop":        conn.StopUnitContext,
		"try-restart": conn.TryRestartUnitContext,
	}[verb]
	done := make(chan string, 1) // buffered: systemd's answer never blocks the connection
	if _, err := job(ctx, unit, "replace", done); err != nil {
		return fmt.Errorf("%s %s: %w", verb, unit, err)
	}
	select {
	case result := <-done:
		// "skipped": nothing to do in the unit's state (try-restart of a
		// stopped unit), which systemctl counts as success too.
		if result != "done" && result != "skipped" {
			return fmt.Errorf("%s %s: systemd's job ended %q", verb, unit, result)
		}
		return nil
	case <-ctx.Done():
		return fmt.Errorf("%s %s: no answer from systemd in %v", verb, unit, timeout)
	}
}
