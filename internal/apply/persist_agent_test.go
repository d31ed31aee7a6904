package apply

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// persist --agent installs a Type=notify unit with a watchdog that runs the
// agent on the installed plan; systemd-analyze verify accepts it; remove
// takes it away.
func TestPersistAgentInstallVerifyRemove(t *testing.T) {
	root := t.TempDir()
	bin := filepath.Join(root, "usr/local/bin/irqpilot")
	os.MkdirAll(filepath.Dir(bin), 0o755)
	os.WriteFile(bin, []byte("#!/bin/sh\nexit 0\n"), 0o755)
	p := &Persistence{Root: root, Binary: bin, StateDir: "/var/lib/irqpilot", Agent: true}
	written, err := p.Install([]byte("version: 1\n"))
	if err != nil {
		t.Fatal(err)
	}
	if len(written) != 3 {
		t.Fatalf("wrote %v", written)
	}
	unit := filepath.Join(root, PersistAgentUnitPath)
	data, _ := os.ReadFile(unit)
	for _, want := range []string{`ExecStart="` + bin + `" agent --state-dir "/var/lib/irqpilot" --plan "/etc/irqpilot/plan.yaml"`,
		"Type=notify", "WatchdogSec=", "ExecReload=/bin/kill -HUP $MAINPID", "Restart=on-failure", "WantedBy=multi-user.target"} {
		if !strings.Contains(string(data), want) {
			t.Errorf("unit lacks %q:\n%s", want, data)
		}
	}
	if _, err := os.Stat(filepath.Join(root, PersistUdevPath)); !os.IsNotExist(err) {
		t.Errorf("the agent needs no udev rule, but one was written")
	}
	if target, err := os.Readlink(filepath.Join(root, persistWantsDir, "irqpilot-agent.service")); err != nil || target != PersistAgentUnitPath {
		t.Errorf("enable symlink: %q %v", target, err)
	}
	if sa, err := exec.LookPath("systemd-analyze"); err == nil {
		out, err := exec.Command(sa, "verify", "--man=no", unit).CombinedOutput()
		if err != nil || strings.Contains(string(out), filepath.Base(unit)+":") {
			t.Errorf("systemd-analyze verify %s: %v\n%s", unit, err, out)
		}
	} else {
		t.Log("systemd-analyze not installed; unit syntax not verified")
	}
	removed, err := p.Remove()
	if err != nil || len(removed) != 3 {
		t.Fatalf("remove: %v %v", removed, err)
	}
}
