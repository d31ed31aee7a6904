package apply

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/safchain/ethtool"
	"golang.org/x/sys/unix"

	"github.com/irqpilot/irqpilot/internal/host"
	"github.com/irqpilot/irqpilot/internal/kernel"
	"github.com/irqpilot/irqpilot/internal/plan"
)

// Coalescing: the value is "key=value …" for the fields the plan names; the
// old value recorded in the journal has the same keys, so revert restores
// exactly those fields and nothing else.

func parseKV(v string) (map[string]string, []string, error) {
	m := map[string]string{}
	var keys []string
	for _, f := range strings.Fields(v) {
		k, val, ok := strings.Cut(f, "=")
		if !ok || k == "" || val == "" {
			return nil, nil, fmt.Errorf("%q is not key=value", f)
		}
		if _, dup := m[k]; dup {
			return nil, nil, fmt.Errorf("%q: field %s given twice", v, k)
		}
		m[k] = val
		keys = append(keys, k)
	}
	if len(keys) == 0 {
		return nil, nil, fmt.Errorf("%q: no key=value field", v)
	}
	return m, keys, nil
}

func readCoalesce(fs *kernel.FS, c Change) (string, error) {
	if !fs.IsLive() {
		return "", fmt.Errorf("%s coalescing: %w on a snapshot", c.Device, kernel.ErrUnsupported)
	}
	m, keys, err := parseKV(c.Value)
	if err != nil {
		return "", fmt.Errorf("%s coalescing: %w", c.Device, err)
	}
	// Check the wanted values before asking the device, so a bad value stops
	// the apply before anything is written rather than at the write.
	if err := host.SetCoalesceFields(&ethtool.Coalesce{}, m); err != nil {
		return "", fmt.Errorf("%s: %w", c.Device, err)
	}
	facts, err := host.QueryEthtool([]string{c.Device})
	if err != nil {
		return "", err
	}
	f := facts[c.Device]
	if f.Coalesce == nil {
		return "", fmt.Errorf("%s coalescing (%s): %w", c.Device, f.CoalesceError, kernel.ErrUnsupported)
	}
	k := f.Coalesce
	onoff := map[bool]string{true: "on", false: "off"}
	cur := map[string]string{
		"rx_usecs": fmt.Sprint(k.RxUsecs), "rx_frames": fmt.Sprint(k.RxFrames),
		"tx_usecs": fmt.Sprint(k.TxUsecs), "tx_frames": fmt.Sprint(k.TxFrames),
		"adaptive_rx": onoff[k.AdaptiveRx], "adaptive_tx": onoff[k.AdaptiveTx],
	}
	parts := make([]string, 0, len(keys))
	for _, key := range keys {
		v, ok := cur[key]
		if !ok {
			return "", fmt.Errorf("%s coalescing: field %q is not known", c.Device, key)
		}
		parts = append(parts, key+"="+v)
	}
	return strings.Join(parts, " "), nil
}

func writeCoalesce(fs *kernel.FS, c Change, value string) error {
	if !fs.IsLive() {
		return fmt.Errorf("%s coalescing: %w on a snapshot", c.Device, kernel.ErrUnsupported)
	}
	m, _, err := parseKV(value)
	if err != nil {
		return err
	}
	err = host.SetCoalesce(c.Device, m)
	if errors.Is(err, unix.EOPNOTSUPP) {
		return fmt.Errorf("%w: %v", kernel.ErrUnsupported, err)
	}
	return err
}

// irqbalance: stopping and starting go through systemd when it manages the
// daemon; banning writes IRQBALANCE_BANNED_CPULIST in its configuration file
// and restarts a running daemon so it reads it (what cri-o does).

func irqbalanceChanges(fs *kernel.FS, s plan.Setting) ([]Change, error) {
	e := s.Irqbalance
	switch e.Mode {
	case plan.IrqbalanceStop:
		return []Change{{Kind: KindIrqbalance, Target: "irqbalance", Value: "stopped", Reason: s.Reason}}, nil
	case plan.IrqbalanceBan:
		files := host.IrqbalanceConfigFiles()
		file := files[0]
		for _, f := range files {
			if fs.Exists(f) {
				file = f
				break
			}
		}
		return []Change{{Kind: KindIrqbalanceBan, Target: "irqbalance banned CPUs", Path: file, Value: e.BannedCPUs.String(), Reason: s.Reason}}, nil
	}
	return nil, fmt.Errorf("irqbalance mode %q is not supported", e.Mode)
}

func irqbalancePID(fs *kernel.FS) int {
	pids, _ := fs.PIDs()
	for _, p := range pids {
		if c, err := fs.Comm(p); err == nil && c == "irqbalance" {
			return p
		}
	}
	return 0
}

func readIrqbalanceState(fs *kernel.FS) (string, error) {
	if irqbalancePID(fs) != 0 {
		return "running", nil
	}
	return "stopped", nil
}

func writeIrqbalanceState(fs *kernel.FS, value string) error {
	if !fs.IsLive() {
		return fmt.Errorf("irqbalance: %w on a snapshot", kernel.ErrUnsupported)
	}
	if value == "running" {
		if out, err := exec.Command("systemctl", "start", "irqbalance.service").CombinedOutput(); err != nil {
			return fmt.Errorf("systemctl start irqbalance: %v: %s", err, strings.TrimSpace(string(out)))
		}
		return nil
	}
	// systemctl stop succeeds even when the daemon was started outside
	// systemd and keeps running, so check the process afterwards, ask it to
	// stop by its PID, and wait until it is gone: apply reads the state back
	// right after this returns.
	exec.Command("systemctl", "stop", "irqbalance.service").Run()
	deadline := time.Now().Add(5 * time.Second)
	for {
		pid := irqbalancePID(fs)
		if pid == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("irqbalance (pid %d) still runs 5 s after SIGTERM", pid)
		}
		unix.Kill(pid, unix.SIGTERM)
		time.Sleep(100 * time.Millisecond)
	}
}

const banVar = "IRQBALANCE_BANNED_CPULIST"

func readBanned(fs *kernel.FS, path string) (string, error) {
	data, err := fs.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	set, _, err := host.BannedInConfig(data)
	if err != nil {
		return "", fmt.Errorf("%s: %w", path, err)
	}
	return set.String(), nil
}

// writeBanned sets (or, for "", removes) the ban variable, keeping every
// other line of the file, then restarts irqbalance if it runs.
func writeBanned(fs *kernel.FS, path, value string) error {
	data, err := fs.ReadFile(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	var out []string
	done := false
	for _, l := range strings.Split(strings.TrimRight(string(data), "\n"), "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), banVar+"=") {
			if value != "" && !done {
				out = append(out, fmt.Sprintf("%s=%q", banVar, value))
				done = true
			}
			continue
		}
		if l != "" || len(out) > 0 {
			out = append(out, l)
		}
	}
	if value != "" && !done {
		out = append(out, "# Set by irqpilot (revert with 'irqpilot revert').", fmt.Sprintf("%s=%q", banVar, value))
	}
	full := fs.Path(path)
	if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
		return err
	}
	if err := writeAtomic(full, []byte(strings.Join(out, "\n")+"\n")); err != nil {
		return err
	}
	if fs.IsLive() && irqbalancePID(fs) != 0 {
		exec.Command("systemctl", "try-restart", "irqbalance.service").Run()
	}
	return nil
}

// restoreConfigFile puts a configuration file back as the journal recorded
// it: the exact old bytes, or no file when it did not exist; then a running
// irqbalance is restarted so it reads it.
func restoreConfigFile(fs *kernel.FS, path string, old *string) error {
	full := fs.Path(path)
	if old == nil {
		if err := os.Remove(full); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	} else if err := writeAtomic(full, []byte(*old)); err != nil {
		return err
	}
	if fs.IsLive() && irqbalancePID(fs) != 0 {
		exec.Command("systemctl", "try-restart", "irqbalance.service").Run()
	}
	return nil
}
