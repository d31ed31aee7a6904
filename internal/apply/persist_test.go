package apply

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func TestPersistInstallVerifyRemove(t *testing.T) {
	root := t.TempDir()
	// systemd-analyze verify checks that ExecStart's binary exists and is
	// executable, so install against a real executable path.
	bin := filepath.Join(root, "usr/local/bin/irqpilot")
	os.MkdirAll(filepath.Dir(bin), 0o755)
	os.WriteFile(bin, []byte("#!/bin/sh\nexit 0\n"), 0o755)
	p := &Persistence{Root: root, Binary: bin, StateDir: "/var/lib/irqpilot"}
	written, err := p.Install([]byte("version: 1\n"))
	if err != nil {
		t.Fatal(err)
	}
	if len(written) != 4 {
		t.Fatalf("wrote %v", written)
	}
	unit := filepath.Join(root, PersistUnitPath)
	data, _ := os.ReadFile(unit)
	for _, want := range []string{`ExecStart="` + bin + `" apply --boot --state-dir "/var/lib/irqpilot" "/etc/irqpilot/plan.yaml"`, "Type=oneshot", "RemainAfterExit=no", "WantedBy=multi-user.target"} {
		if !strings.Contains(string(data), want) {
			t.Errorf("unit lacks %q:\n%s", want, data)
		}
	}
	if target, err := os.Readlink(filepath.Join(root, persistWantsDir, "irqpilot-apply.service")); err != nil || target != PersistUnitPath {
		t.Errorf("enable symlink: %q %v", target, err)
	}

	if sa, err := exec.LookPath("systemd-analyze"); err == nil {
		// Verify a copy whose ConditionPathExists/ExecStart paths point at
		// the temp tree, since verify resolves them on this machine.
		// verify exits 0 on unknown keys and bad values (it only warns), so
		// any line about our file counts as a failure.
		out, err := exec.Command(sa, "verify", "--man=no", unit).CombinedOutput()
		if err != nil || strings.Contains(string(out), filepath.Base(unit)+":") {
			t.Errorf("systemd-analyze verify %s: %v\n%s", unit, err, out)
		}
	} else {
		t.Log("systemd-analyze not installed; unit syntax not verified")
	}
	rule, _ := os.ReadFile(filepath.Join(root, PersistUdevPath))
	if !strings.Contains(string(rule), `SUBSYSTEM=="net"`) || !strings.Contains(string(rule), "irqpilot-apply.service") {
		t.Errorf("udev rule:\n%s", rule)
	}
	if ua, err := exec.LookPath("udevadm"); err == nil {
		if out, err := exec.Command(ua, "verify", filepath.Join(root, PersistUdevPath)).CombinedOutput(); err != nil && !strings.Contains(string(out), "Unknown command") && !strings.Contains(string(out), "unknown") {
			t.Errorf("udevadm verify: %v\n%s", err, out)
		}
	}

	removed, err := p.Remove()
	if err != nil || len(removed) != 4 {
		t.Fatalf("remove: %v %v", removed, err)
	}
	for _, rel := range []string{PersistUnitPath, PersistUdevPath, PersistPlanPath} {
		if _, err := os.Stat(filepath.Join(root, rel)); !os.IsNotExist(err) {
			t.Errorf("%s still there after remove", rel)
		}
	}
}

func TestPersistNeedsAbsoluteBinary(t *testing.T) {
	p := &Persistence{Root: t.TempDir(), Binary: "irqpilot"}
	if _, err := p.Install(nil); err == nil || !strings.Contains(err.Error(), "absolute") {
		t.Fatalf("err = %v", err)
	}
}

// Issue 15 item 7: --state-dir went into the unit unquoted, so a space split
// the argument and a newline injected a unit line.
func TestPersistQuotesUnitArguments(t *testing.T) {
	p := &Persistence{Binary: "/usr/sbin/irq pilot", StateDir: "/var/lib/irq pilot 100%"}
	files, err := p.Files()
	if err != nil {
		t.Fatal(err)
	}
	unit := string(files[PersistUnitPath])
	if want := `ExecStart="/usr/sbin/irq pilot" apply --boot --state-dir "/var/lib/irq pilot 100%%" "/etc/irqpilot/plan.yaml"`; !strings.Contains(unit, want) {
		t.Errorf("unit lacks %q:\n%s", want, unit)
	}
	for _, bad := range []string{"/var/lib/x\nExecStartPre=/bin/rm -rf /", "/var/lib/x\x00"} {
		p := &Persistence{Binary: "/usr/sbin/irqpilot", StateDir: bad}
		if _, err := p.Files(); err == nil || !strings.Contains(err.Error(), "control character") {
			t.Errorf("state dir %q: %v", bad, err)
		}
	}
	if _, err := (&Persistence{Binary: "/usr/sbin/irqpilot", StateDir: "relative"}).Files(); err == nil {
		t.Error("relative state dir accepted")
	}
}

// The unit's Documentation= names irqpilot(8) only when that page is
// installed: a man: reference must exist.
func TestPersistUnitManReferenceOnlyWhenInstalled(t *testing.T) {
	root := t.TempDir()
	p := &Persistence{Root: root, Binary: "/usr/local/sbin/irqpilot"}
	files, err := p.Files()
	if err != nil {
		t.Fatal(err)
	}
	if unit := string(files[PersistUnitPath]); strings.Contains(unit, "man:") {
		t.Errorf("unit refers to a manual page that is not installed:\n%s", unit)
	}
	// persist --agent's unit too.
	agent := &Persistence{Root: root, Binary: "/usr/local/sbin/irqpilot", Agent: true}
	if files, err := agent.Files(); err != nil {
		t.Fatal(err)
	} else if unit := string(files[PersistAgentUnitPath]); unit == "" || strings.Contains(unit, "man:") {
		t.Errorf("agent unit missing or refers to a manual page that is not installed:\n%s", unit)
	}
	dir := filepath.Join(root, "usr/local/share/man/man8")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "irqpilot.8"), []byte(".TH IRQPILOT 8\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	files, err = p.Files()
	if err != nil {
		t.Fatal(err)
	}
	if unit := string(files[PersistUnitPath]); !strings.Contains(unit, "\nDocumentation=man:irqpilot(8)\n") {
		t.Errorf("unit does not refer to the installed page:\n%s", unit)
	}
}

// Issue 14: the units a package ships are persist's units, byte for byte
// below their header: the header says how to enable them, not how persist
// removes them, and Documentation= names irqpilot(8), which the package
// installs, even though no page is installed on the build machine.
func TestPersistPackagedUnitsDifferOnlyInHeader(t *testing.T) {
	root := t.TempDir()
	for _, agent := range []bool{false, true} {
		plain := &Persistence{Root: root, Binary: "/usr/bin/irqpilot", Agent: agent}
		pkg := &Persistence{Root: root, Binary: "/usr/bin/irqpilot", Agent: agent, Packaged: true}
		a, err := plain.Files()
		if err != nil {
			t.Fatal(err)
		}
		b, err := pkg.Files()
		if err != nil {
			t.Fatal(err)
		}
		for path, want := range a {
			got := string(b[path])
			if strings.Contains(got, "persist --remove") || strings.Contains(got, "Installed by") {
				t.Errorf("%s (packaged) still says persist installed it:\n%s", path, got)
			}
			if !strings.Contains(got, "irqpilot package") {
				t.Errorf("%s (packaged) does not say the package ships it:\n%s", path, got)
			}
			if strings.HasSuffix(path, ".service") && !strings.Contains(got, "\nDocumentation=man:irqpilot(8)\n") {
				t.Errorf("%s (packaged) lacks Documentation=man:irqpilot(8):\n%s", path, got)
			}
			body := func(s string) string {
				var keep []string
				for _, l := range strings.Split(s, "\n") {
					if !strings.HasPrefix(l, "#") && !strings.HasPrefix(l, "Documentation=") {
						keep = append(keep, l)
					}
				}
				return strings.Join(keep, "\n")
			}
			if body(got) != body(string(want)) {
				t.Errorf("%s: packaged unit differs from persist's beyond header and Documentation=:\n%s\n---\n%s", path, got, want)
			}
		}
	}
}
