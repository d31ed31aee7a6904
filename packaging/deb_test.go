package packaging

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/irqpilot/irqpilot/internal/livetest"
)

// On the real tools: `make deb` builds the package,
// lintian reports no error, apt-get installs it, the installed binary runs
// inventory, the units are installed, valid (systemd-analyze verify) and
// neither enabled nor started, and apt-get purge removes every file the
// package installed and the enable link an administrator made.
func TestDebBuildLintInstallPurge(t *testing.T) {
	needPackagingRoot(t)
	deb := buildDeb(t)
	name := filepath.Base(deb)
	arch := strings.TrimSpace(run(t, "dpkg", "--print-architecture"))
	if !strings.HasPrefix(name, "irqpilot_") || !strings.HasSuffix(name, "_"+arch+".deb") {
		t.Errorf("package file %s is not irqpilot_<version>_%s.deb", name, arch)
	}
	version := strings.TrimSpace(run(t, "dpkg-deb", "-f", deb, "Version"))

	// lintian reads only the .deb: it runs while the package is installed,
	// used and purged.
	type lint struct {
		out []byte
		err error
	}
	lintDone := make(chan lint, 1)
	if _, err := exec.LookPath("lintian"); err != nil {
		t.Error("no lintian command: install the Debian package lintian (make deps)")
		close(lintDone)
	} else {
		go func() {
			out, err := exec.Command("lintian", "--tag-display-limit", "0", deb).CombinedOutput()
			lintDone <- lint{out, err}
		}()
	}
	defer func() {
		l, ok := <-lintDone
		if !ok {
			return
		}
		for _, line := range strings.Split(string(l.out), "\n") {
			if strings.HasPrefix(line, "E: ") {
				t.Errorf("lintian: %s", line)
			} else if line != "" {
				t.Logf("lintian: %s", line)
			}
		}
		if l.err != nil && !bytes.Contains(l.out, []byte("E: ")) {
			t.Errorf("lintian %s: %v\n%s", deb, l.err, l.out)
		}
	}()

	if out, err := exec.Command("dpkg-deb", "-I", deb, "postinst").CombinedOutput(); err == nil {
		t.Errorf("the package has a postinst; installing must enable and start nothing:\n%s", out)
	}
	_, etcExisted := os.Stat("/etc/irqpilot")
	purgeOnCleanup(t)
	if out, err := aptGet("install", "-y", deb); err != nil {
		t.Fatalf("apt-get install -y %s: %v\n%s", deb, err, out)
	}
	files := strings.Fields(run(t, "dpkg-query", "-L", "irqpilot"))

	want := []string{
		"/usr/bin/irqpilot",
		"/lib/systemd/system/irqpilot-agent.service",
		"/lib/systemd/system/irqpilot-apply.service",
		"/usr/share/man/man8/irqpilot.8.gz",
		"/usr/share/man/man8/irqpilot-apply.8.gz",
		"/usr/share/man/man5/irqpilot-plan.5.gz",
		"/usr/share/bash-completion/completions/irqpilot",
		"/usr/share/zsh/vendor-completions/_irqpilot",
		"/usr/share/fish/vendor_completions.d/irqpilot.fish",
		"/etc/irqpilot/plan.yaml.example",
		"/usr/share/doc/irqpilot/copyright",
		"/usr/share/doc/irqpilot/changelog.gz",
		"/usr/share/doc/irqpilot/examples/90-irqpilot.rules",
		"/usr/share/doc/irqpilot/README.md.gz",
		"/usr/share/doc/irqpilot/plan-format.md.gz",
		"/usr/share/doc/irqpilot/safety.md.gz",
	}
	for _, w := range want {
		if _, err := os.Stat(w); err != nil {
			t.Errorf("installed package lacks %s: %v", w, err)
		}
	}
	if conf := run(t, "dpkg-query", "-W", "-f=${Conffiles}", "irqpilot"); !strings.Contains(conf, "/etc/irqpilot/plan.yaml.example") {
		t.Errorf("/etc/irqpilot/plan.yaml.example is not a conffile: %q", conf)
	}

	// The installed binary: its version is the package's, it runs inventory
	// and the example configuration is a valid (empty) plan.
	if v := run(t, "/usr/bin/irqpilot", "--version"); !strings.Contains(v, version) {
		t.Errorf("irqpilot --version = %q, want the package version %s", v, version)
	}
	if inv := run(t, "/usr/bin/irqpilot", "inventory"); !strings.Contains(inv, "CPU") {
		t.Errorf("/usr/bin/irqpilot inventory printed no CPUs:\n%s", inv)
	}
	state := filepath.Join(t.TempDir(), "state")
	var dry struct{ Entries []json.RawMessage }
	out := run(t, "/usr/bin/irqpilot", "--json", "apply", "--dry-run", "--state-dir", state, "/etc/irqpilot/plan.yaml.example")
	if err := json.Unmarshal([]byte(out), &dry); err != nil || len(dry.Entries) != 0 {
		t.Errorf("the example plan is not an empty plan (%v): %s", err, out)
	}

	// Units: valid for systemd, and installing enabled and started nothing.
	units := []string{"/lib/systemd/system/irqpilot-agent.service", "/lib/systemd/system/irqpilot-apply.service"}
	if out, err := exec.Command("systemd-analyze", append([]string{"verify"}, units...)...).CombinedOutput(); err != nil {
		t.Errorf("systemd-analyze verify: %v\n%s", err, out)
	}
	for _, u := range []string{"irqpilot-agent.service", "irqpilot-apply.service"} {
		out, _ := exec.Command("systemctl", "is-enabled", u).Output()
		if s := strings.TrimSpace(string(out)); s != "disabled" {
			t.Errorf("systemctl is-enabled %s = %q after install, want disabled", u, s)
		}
	}
	if l := enableLinks(); len(l) != 0 {
		t.Errorf("installing enabled units: %v", l)
	}
	if pids := running("/usr/bin/irqpilot"); len(pids) != 0 {
		t.Errorf("installing started /usr/bin/irqpilot (pids %v)", pids)
	}

	// An administrator enables the boot unit; purge drops that link too.
	run(t, "systemctl", "enable", "irqpilot-apply.service")
	if len(enableLinks()) == 0 {
		t.Fatal("systemctl enable irqpilot-apply.service made no link")
	}
	if out, err := aptGet("purge", "-y", "irqpilot"); err != nil {
		t.Fatalf("apt-get purge -y irqpilot: %v\n%s", err, out)
	}
	if packageInstalled() {
		t.Error("irqpilot still installed after purge")
	}
	for _, f := range files {
		fi, err := os.Lstat(f)
		if err != nil || fi.IsDir() {
			continue
		}
		if st, err := os.Stat(f); err == nil && st.IsDir() { // /lib -> usr/lib
			continue
		}
		t.Errorf("%s is still there after purge", f)
	}
	if _, err := os.Stat("/etc/irqpilot"); err == nil && etcExisted != nil {
		t.Error("/etc/irqpilot is still there after purge")
	}
	if l := enableLinks(); len(l) != 0 {
		t.Errorf("enable links left after purge: %v", l)
	}
}

// running lists the processes whose executable is exe.
func running(exe string) []string {
	var pids []string
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, d := range dirs {
		if p, err := os.Readlink(filepath.Join(d, "exe")); err == nil && (p == exe || p == exe+" (deleted)") {
			pids = append(pids, filepath.Base(d))
		}
	}
	return pids
}

// The .deb is built once per test binary (both tests install it) into a
// directory removed when the tests end.
var (
	debOnce sync.Once
	debPath string
	debErr  error
	debDir  string
)

func TestMain(m *testing.M) {
	code := m.Run()
	if debDir != "" {
		os.RemoveAll(debDir)
	}
	os.Exit(code)
}

// needPackagingRoot skips unless the test can install and purge a Debian
// package here: a live test (root, not -short), apt-get and dpkg, and no
// irqpilot package installed already (the tests purge theirs; they must
// never purge an operator's).
func needPackagingRoot(t *testing.T) {
	t.Helper()
	livetest.NeedRoot(t, "apt-get", "dpkg-deb", "dpkg-query", "make", "git", "go")
	if packageInstalled() {
		t.Skip("the irqpilot package is installed on this machine; these tests install and purge their own, so they do not run here")
	}
}

// packageInstalled: dpkg knows irqpilot as installed (or half-installed).
func packageInstalled() bool {
	out, err := exec.Command("dpkg-query", "-W", "-f=${Status}", "irqpilot").Output()
	return err == nil && strings.Contains(string(out), "installed") && !strings.Contains(string(out), "not-installed")
}

// buildDeb runs `make deb DIST=…` once and returns the package's path.
func buildDeb(t *testing.T) string {
	t.Helper()
	debOnce.Do(func() {
		if debDir, debErr = os.MkdirTemp("", "irqpilot-deb-test"); debErr != nil {
			return
		}
		repo, err := filepath.Abs("..")
		if err != nil {
			debErr = err
			return
		}
		cmd := exec.Command("make", "--no-print-directory", "-C", repo, "deb", "DIST="+debDir)
		out, err := cmd.CombinedOutput()
		if err != nil {
			debErr = fmt.Errorf("make deb: %v\n%s", err, out)
			return
		}
		debs, _ := filepath.Glob(filepath.Join(debDir, "irqpilot_*_*.deb"))
		if len(debs) != 1 {
			debErr = fmt.Errorf("make deb left %v in %s, want one irqpilot_<version>_<arch>.deb\n%s", debs, debDir, out)
			return
		}
		debPath = debs[0]
	})
	if debErr != nil {
		t.Fatal(debErr)
	}
	return debPath
}

// purgeOnCleanup purges the package when the test ends, whatever happened.
func purgeOnCleanup(t *testing.T) {
	t.Cleanup(func() {
		if !packageInstalled() {
			return
		}
		if out, err := aptGet("purge", "-y", "irqpilot"); err != nil {
			t.Errorf("cleanup: apt-get purge irqpilot: %v\n%s", err, out)
		}
	})
}

func aptGet(args ...string) ([]byte, error) {
	cmd := exec.Command("apt-get", args...)
	cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
	return cmd.CombinedOutput()
}

// run runs a command and fails the test on error, returning its stdout
// (livetest.Run would mix in stderr: dpkg and apt-get warn there).
func run(t *testing.T, name string, args ...string) string {
	t.Helper()
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(name, args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %s: %v\n%s%s", name, strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
	return stdout.String()
}

// enableLinks lists the links in /etc/systemd/system/*.wants that name one
// of the package's units.
func enableLinks() []string {
	var links []string
	for _, u := range []string{"irqpilot-agent.service", "irqpilot-apply.service"} {
		m, _ := filepath.Glob(filepath.Join("/etc/systemd/system/*.wants", u))
		links = append(links, m...)
	}
	return links
}
