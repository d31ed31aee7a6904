package kernel

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fakeSystemctl writes a systemctl stand-in that appends its arguments to
// a log and fails for unit "bad.service" the way systemctl does.
func fakeSystemctl(t *testing.T) (bin, log string) {
	t.Helper()
	dir := t.TempDir()
	bin, log = filepath.Join(dir, "systemctl"), filepath.Join(dir, "log")
	script := "#!/bin/sh\necho \"$@\" >> " + log + "\n" +
		"if [ \"$2\" = bad.service ]; then echo \"Failed to $1 $2: Unit $2 not found.\" >&2; exit 5; fi\n"
	if err := os.WriteFile(bin, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return bin, log
}

func TestSystemctl(t *testing.T) {
	bin, log := fakeSystemctl(t)
	s := Systemctl{Bin: bin, RunDir: t.TempDir()} // systemd "running"
	for _, call := range []func(string) error{s.Start, s.Stop, s.TryRestart} {
		if err := call("irqbalance.service"); err != nil {
			t.Fatal(err)
		}
	}
	b, _ := os.ReadFile(log)
	if got := string(b); got != "start irqbalance.service\nstop irqbalance.service\ntry-restart irqbalance.service\n" {
		t.Errorf("systemctl ran with:\n%s", got)
	}
	err := s.Start("bad.service")
	if err == nil || err.Error() != "systemctl start bad.service: exit status 5: Failed to start bad.service: Unit bad.service not found." {
		t.Errorf("failing start: %v", err)
	}

	// Without systemd as PID 1 nothing is run and the error says why.
	os.Remove(log)
	none := Systemctl{Bin: bin, RunDir: filepath.Join(t.TempDir(), "absent")}
	for _, call := range []func(string) error{none.Start, none.Stop, none.TryRestart} {
		if err := call("irqbalance.service"); !errors.Is(err, ErrNoServiceManager) || !strings.Contains(err.Error(), "irqbalance.service") {
			t.Errorf("no systemd: %v", err)
		}
	}
	if _, err := os.Stat(log); err == nil {
		t.Error("systemctl ran although systemd is not running")
	}
}

func TestServices(t *testing.T) {
	snap := New(t.TempDir()).Services()
	for _, call := range []func(string) error{snap.Start, snap.Stop, snap.TryRestart} {
		if err := call("irqbalance.service"); !errors.Is(err, ErrUnsupported) {
			t.Errorf("services of a snapshot: %v", err)
		}
	}
	if _, ok := New("/").Services().(Systemctl); !ok {
		t.Error("live services are not systemctl")
	}
	// This machine: systemd or not, the answer is consistent with sd_booted.
	if _, err := os.Stat(SystemdRunDir); err != nil {
		if err := New("/").Services().TryRestart("irqpilot-test-none.service"); !errors.Is(err, ErrNoServiceManager) {
			t.Errorf("live machine without %s: %v", SystemdRunDir, err)
		}
	}
}
