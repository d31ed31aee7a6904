package apply

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/irqpilot/irqpilot/internal/kernel"
)

func TestPersistInstallVerifyRemove(t *testing.T) {
	root, bin := installRoot(t)
	p := &Persistence{FS: kernel.New("/"), Root: root, Binary: bin, StateDir: "/var/lib/irqpilot"}
	install(t, p, 4)
	unit := filepath.Join(root, PersistUnitPath)
	checkUnit(t, unit, `ExecStart="`+bin+`" apply --boot --state-dir "/var/lib/irqpilot" "/etc/irqpilot/plan.yaml"`, "Type=oneshot", "RemainAfterExit=no", "WantedBy=multi-user.target")
	if target, err := os.Readlink(filepath.Join(root, persistWantsDir, "irqpilot-apply.service")); err != nil || target != PersistUnitPath {
		t.Errorf("enable symlink: %q %v", target, err)
	}
	rule, _ := os.ReadFile(filepath.Join(root, PersistUdevPath))
	if !strings.Contains(string(rule), `SUBSYSTEM=="net"`) || !strings.Contains(string(rule), "irqpilot-apply.service") {
		t.Errorf("udev rule:\n%s", rule)
	}
	// Debian 12's udevadm has no verify (systemd 253 added it), so the
	// rule's syntax is checked here by udev's grammar, and the lab's
	// systemd guest proves that udev runs it (TestLabSystemd, UDEV-RPS:
	// a NIC hot-added after boot gets the plan).
	checkUdevRule(t, string(rule))

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
	unit := unitFile(t, p, PersistUnitPath)
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
	if unit := unitFile(t, p, PersistUnitPath); strings.Contains(unit, "man:") {
		t.Errorf("unit refers to a manual page that is not installed:\n%s", unit)
	}
	// persist --agent's unit too.
	agent := &Persistence{Root: root, Binary: "/usr/local/sbin/irqpilot", Agent: true}
	if unit := unitFile(t, agent, PersistAgentUnitPath); unit == "" || strings.Contains(unit, "man:") {
		t.Errorf("agent unit missing or refers to a manual page that is not installed:\n%s", unit)
	}
	dir := filepath.Join(root, "usr/local/share/man/man8")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "irqpilot.8"), []byte(".TH IRQPILOT 8\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if unit := unitFile(t, p, PersistUnitPath); !strings.Contains(unit, "\nDocumentation=man:irqpilot(8)\n") {
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
		for path, want := range persistFiles(t, plain) {
			got := unitFile(t, pkg, path)
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

// persist --agent installs a Type=notify unit with a watchdog that runs the
// agent on the installed plan; systemd-analyze verify accepts it; remove
// takes it away.
func TestPersistAgentInstallVerifyRemove(t *testing.T) {
	root, bin := installRoot(t)
	p := &Persistence{FS: kernel.New("/"), Root: root, Binary: bin, StateDir: "/var/lib/irqpilot", Agent: true}
	install(t, p, 3)
	unit := filepath.Join(root, PersistAgentUnitPath)
	checkUnit(t, unit, `ExecStart="`+bin+`" agent --state-dir "/var/lib/irqpilot" --plan "/etc/irqpilot/plan.yaml"`,
		"Type=notify", "WatchdogSec=", "ExecReload=/bin/kill -HUP $MAINPID", "Restart=on-failure", "WantedBy=multi-user.target")
	if _, err := os.Stat(filepath.Join(root, PersistUdevPath)); !os.IsNotExist(err) {
		t.Errorf("the agent needs no udev rule, but one was written")
	}
	if target, err := os.Readlink(filepath.Join(root, persistWantsDir, "irqpilot-agent.service")); err != nil || target != PersistAgentUnitPath {
		t.Errorf("enable symlink: %q %v", target, err)
	}
	removed, err := p.Remove()
	if err != nil || len(removed) != 3 {
		t.Fatalf("remove: %v %v", removed, err)
	}
}

// The agent's unit and the boot-time apply's (which the udev rule starts as
// root for every new interface) bound privilege alike: a capability
// bounding set of exactly what irqpilot uses, no new privileges, a
// read-only system but for what it writes; the agent's bounds descriptors
// too. systemd-analyze verify accepts them and `systemd-analyze security`
// rates their exposure at most 3.0 ("OK"), offline (systemd need not be
// running; systemd 252, Debian 12's, has --offline). The apply unit had no
// sandbox and rated 9.6 ("UNSAFE").
func TestAgentUnitHardened(t *testing.T) {
	for _, c := range []struct {
		agent bool
		sd    string
	}{{true, DefaultStateDir}, {true, "/srv/irq state"}, {false, DefaultStateDir}, {false, "/srv/irq state"}} {
		sd := c.sd
		unitPath, name := PersistAgentUnitPath, "irqpilot-agent.service"
		if !c.agent {
			unitPath, name = PersistUnitPath, "irqpilot-apply.service"
		}
		root, bin := installRoot(t)
		unit := unitFile(t, &Persistence{Root: root, Binary: bin, StateDir: sd, Agent: c.agent, Packaged: true}, unitPath)
		want := []string{"CapabilityBoundingSet=CAP_NET_ADMIN CAP_SYS_NICE\n", "AmbientCapabilities=\n",
			"NoNewPrivileges=yes", "ProtectSystem=strict", "ProtectHome=yes", "PrivateTmp=yes", "PrivateDevices=yes",
			"SystemCallFilter=@system-service", `ReadWritePaths=-"` + sd + `" /run -/etc/default -/etc/sysconfig`}
		if c.agent {
			want = append(want, "LimitNOFILE=65536")
		}
		if sd == DefaultStateDir {
			want = append(want, "StateDirectory=irqpilot\nStateDirectoryMode=0700\n")
		} else if strings.Contains(unit, "StateDirectory=") {
			t.Errorf("StateDirectory= for state directory %s (it names /var/lib/irqpilot)", sd)
		}
		path := filepath.Join(root, name)
		if err := os.WriteFile(path, []byte(unit), 0o644); err != nil {
			t.Fatal(err)
		}
		checkUnit(t, path, want...)
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
		out, err := exec.Command(sa, "security", "--offline=yes", "--threshold=30", path).CombinedOutput()
		if err != nil {
			t.Errorf("systemd-analyze security %s: exposure above 3.0 (%v):\n%s", name, err, out)
		}
		if i := strings.Index(string(out), "Overall exposure level"); i >= 0 {
			t.Logf("%s, state dir %s: %s", name, sd, strings.TrimSpace(string(out[i:])))
		}
	}
}

// installRoot is a new root to install into, holding an executable
// irqpilot: systemd-analyze verify checks that ExecStart's binary exists
// and is executable.
func installRoot(t *testing.T) (root, bin string) {
	t.Helper()
	root = t.TempDir()
	bin = filepath.Join(root, "usr/local/bin/irqpilot")
	if err := os.MkdirAll(filepath.Dir(bin), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, []byte("#!/bin/sh\nexit 0\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return root, bin
}

// persistFiles is what p installs, by path; the test fails on an error.
func persistFiles(t *testing.T, p *Persistence) map[string][]byte {
	t.Helper()
	files, err := p.Files()
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// unitFile is the file p installs at path ("" for none).
func unitFile(t *testing.T, p *Persistence, path string) string {
	t.Helper()
	return string(persistFiles(t, p)[path])
}

// install installs a one-line plan with p and fails unless it wrote n
// files.
func install(t *testing.T, p *Persistence, n int) {
	t.Helper()
	written, err := p.Install([]byte("version: 1\n"))
	if err != nil {
		t.Fatal(err)
	}
	if len(written) != n {
		t.Fatalf("wrote %v, want %d files", written, n)
	}
}

// checkUnit checks that the unit file has each of wants and, where
// systemd-analyze is installed, that it verifies. The unit's paths point
// at the test's tree, since verify resolves them on this machine; verify
// exits 0 on unknown keys and bad values (it only warns), so any line
// about the file counts as a failure.
func checkUnit(t *testing.T, unit string, wants ...string) {
	t.Helper()
	data, _ := os.ReadFile(unit)
	for _, want := range wants {
		if !strings.Contains(string(data), want) {
			t.Errorf("unit lacks %q:\n%s", want, data)
		}
	}
	sa, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Log("systemd-analyze not installed; unit syntax not verified")
		return
	}
	out, err := exec.Command(sa, "verify", "--man=no", unit).CombinedOutput()
	if err != nil || strings.Contains(string(out), filepath.Base(unit)+":") {
		t.Errorf("systemd-analyze verify %s: %v\n%s", unit, err, out)
	}
}

// udevPair is one KEY[{attr}]OP"value" of a udev rule line (udev(7)).
var udevPair = regexp.MustCompile(`^\s*([A-Z_]+)(\{[^}]+\})?(==|!=|\+=|-=|:=|=)"([^"]*)"\s*$`)

// udevKeys are the keys udev(7) knows that a rule of ours may use.
var udevKeys = map[string]bool{"ACTION": true, "SUBSYSTEM": true, "KERNEL": true, "DEVPATH": true, "NAME": true,
	"ENV": true, "TAG": true, "RUN": true, "ATTR": true, "DRIVER": true, "GOTO": true, "LABEL": true, "OPTIONS": true}

// checkUdevRule checks every line of a udev rules file against udev's
// grammar: comments, blank lines, or comma-separated pairs of a known key,
// an operator and a double-quoted value; a match (==, !=) before any
// assignment on the line.
func checkUdevRule(t *testing.T, rule string) {
	t.Helper()
	rules := 0
	for i, line := range strings.Split(rule, "\n") {
		if l := strings.TrimSpace(line); l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		rules++
		assigned := false
		for _, part := range strings.Split(line, ",") {
			m := udevPair.FindStringSubmatch(part)
			if m == nil {
				t.Errorf("udev rule line %d: %q is not KEY OP \"value\"", i+1, part)
				continue
			}
			if !udevKeys[m[1]] {
				t.Errorf("udev rule line %d: unknown key %s", i+1, m[1])
			}
			switch m[3] {
			case "==", "!=":
				if assigned {
					t.Errorf("udev rule line %d: match %s after an assignment", i+1, m[1])
				}
			default:
				assigned = true
			}
		}
	}
	if rules == 0 {
		t.Error("the udev rules file holds no rule")
	}
}
