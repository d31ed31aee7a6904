// Package liveroot is livetest.NeedRoot for the packages livetest itself
// imports (host), whose own tests cannot import livetest. It imports
// nothing of irqpilot. Only tests import it.
package liveroot

import (
	"os"
	"os/exec"
	"testing"
)

// Need skips a live test: one that is not run as root, one run with
// -short, and one whose tools (looked up on PATH) are not installed.
func Need(t testing.TB, tools ...string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("live test: needs root (CI runs as root)")
	}
	if testing.Short() {
		t.Skip("live test; -short")
	}
	for _, tool := range tools {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("live test: needs %s: %v", tool, err)
		}
	}
}
