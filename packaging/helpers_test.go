package packaging

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/irqpilot/irqpilot/internal/livetest"
)

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
