package apply

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The agent's unit bounds descriptors and privilege: LimitNOFILE, a
// capability bounding set of exactly what the agent uses, no new
// privileges, a read-only system but for what it writes; systemd-analyze
// verify accepts it and `systemd-analyze security` rates its exposure at
// most 3.0 ("OK"), offline (systemd need not be running).
func TestAgentUnitHardened(t *testing.T) {
	for _, sd := range []string{DefaultStateDir, "/srv/irq state"} {
		root := t.TempDir()
		bin := filepath.Join(root, "usr/bin/irqpilot")
		os.MkdirAll(filepath.Dir(bin), 0o755)
		os.WriteFile(bin, []byte("#!/bin/sh\nexit 0\n"), 0o755)
		files, err := (&Persistence{Root: root, Binary: bin, StateDir: sd, Agent: true, Packaged: true}).Files()
		if err != nil {
			t.Fatal(err)
		}
		unit := string(files[PersistAgentUnitPath])
		want := []string{"LimitNOFILE=65536", "CapabilityBoundingSet=CAP_NET_ADMIN CAP_SYS_NICE\n", "AmbientCapabilities=\n",
			"NoNewPrivileges=yes", "ProtectSystem=strict", "ProtectHome=yes", "PrivateTmp=yes", "PrivateDevices=yes",
			"SystemCallFilter=@system-service", `ReadWritePaths=-"` + sd + `" /run -/etc/default -/etc/sysconfig`}
		if sd == DefaultStateDir {
			want = append(want, "StateDirectory=irqpilot\nStateDirectoryMode=0700\n")
		} else if strings.Contains(unit, "StateDirectory=") {
			t.Errorf("StateDirectory= for state directory %s (it names /var/lib/irqpilot)", sd)
		}
		for _, w := range want {
			if !strings.Contains(unit, w) {
				t.Errorf("state dir %s: unit lacks %q:\n%s", sd, w, unit)
			}
		}
		// Not set: they would make /proc/irq and /sys read-only, or hide
		// the processes the agent pins.
		for _, no := range []string{"ProtectKernelTunables=", "ProtectProc=", "ProcSubset="} {
			if strings.Contains(unit, no) {
				t.Errorf("unit sets %s, which stops the agent from doing its work", no)
			}
		}
		sa, err := exec.LookPath("systemd-analyze")
		if err != nil {
			t.Skip("systemd-analyze not installed")
		}
		path := filepath.Join(root, "irqpilot-agent.service")
		os.WriteFile(path, []byte(unit), 0o644)
		out, err := exec.Command(sa, "verify", "--man=no", path).CombinedOutput()
		if err != nil || strings.Contains(string(out), "irqpilot-agent.service:") {
			t.Errorf("systemd-analyze verify: %v\n%s", err, out)
		}
		out, err = exec.Command(sa, "security", "--offline=yes", "--threshold=30", path).CombinedOutput()
		if err != nil {
			t.Errorf("systemd-analyze security: exposure above 3.0 (%v):\n%s", err, out)
		}
		if i := strings.Index(string(out), "Overall exposure level"); i >= 0 {
			t.Logf("state dir %s: %s", sd, strings.TrimSpace(string(out[i:])))
		}
	}
}
