package agent

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// A plan in a directory anyone may write is refused, unless the directory
// is on a read-only mount (a Kubernetes ConfigMap volume mounted readOnly
// is mode 0777): no one can change it through that mount. A tmpfs of the
// test's own, mounted in a temporary directory and unmounted after.
func TestLivePlanOnReadOnlyMountTrusted(t *testing.T) {
	needRoot(t)
	dir := filepath.Join(t.TempDir(), "config")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	run(t, "mount", "-t", "tmpfs", "-o", "size=1m,mode=0777", "irqp-agentsec", dir)
	t.Cleanup(func() {
		if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v %s", dir, err, out)
		}
	})
	pf := filepath.Join(dir, "plan.yaml")
	if err := os.WriteFile(pf, []byte(rpsPlanText("3")), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := checkTrusted("plan file", pf); err == nil || !strings.Contains(err.Error(), "writable by group or others (mode 0777)") {
		t.Fatalf("plan in a writable mode 0777 directory: %v", err)
	}
	run(t, "mount", "-o", "remount,ro", dir)
	if _, err := checkTrusted("plan file", pf); err != nil {
		t.Errorf("plan on a read-only mount: %v", err)
	}
}
