package kernel

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestSystemdNotBooted: without systemd as PID 1 nothing is asked and each
// verb's error says why and names the unit.
func TestSystemdNotBooted(t *testing.T) {
	none := Systemd{RunDir: filepath.Join(t.TempDir(), "absent")}
	for verb, call := range map[string]func(string) error{"start": none.Start, "stop": none.Stop, "try-restart": none.TryRestart} {
		err := call("irqbalance.service")
		if !errors.Is(err, ErrNoServiceManager) || !strings.HasPrefix(err.Error(), verb+" irqbalance.service: ") {
			t.Errorf("%s without systemd: %v", verb, err)
		}
	}
}

// TestSystemdNoSocket: sd_booted says yes but systemd's private socket does
// not answer (a container with a stale /run, or this machine's /run made to
// look booted): the call fails at once, naming the unit and the connection.
// A guest with systemd as PID 1 runs the real answers (the lab's systemd
// guest stops and starts irqbalance through this).
func TestSystemdNoSocket(t *testing.T) {
	if _, err := os.Stat("/run/systemd/private"); err == nil {
		t.Skip("systemd runs here: its socket answers")
	}
	s := Systemd{RunDir: t.TempDir(), Timeout: 5 * time.Second}
	err := s.Stop("irqbalance.service")
	if err == nil || errors.Is(err, ErrNoServiceManager) || !strings.HasPrefix(err.Error(), "stop irqbalance.service: connecting to systemd: ") {
		t.Errorf("stop with no systemd socket: %v", err)
	}
}

func TestServices(t *testing.T) {
	snap := New(t.TempDir()).Services()
	for _, call := range []func(string) error{snap.Start, snap.Stop, snap.TryRestart} {
		if err := call("irqbalance.service"); !errors.Is(err, ErrUnsupported) {
			t.Errorf("services of a snapshot: %v", err)
		}
	}
	if _, ok := New("/").Services().(Systemd); !ok {
		t.Error("live services are not systemd's")
	}
	// This machine: systemd or not, the answer is consistent with sd_booted.
	if _, err := os.Stat(SystemdRunDir); err != nil {
		if err := New("/").Services().TryRestart("irqpilot-test-none.service"); !errors.Is(err, ErrNoServiceManager) {
			t.Errorf("live machine without %s: %v", SystemdRunDir, err)
		}
	}
}
