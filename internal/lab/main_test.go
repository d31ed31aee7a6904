package lab

import (
	"os"
	"path/filepath"
	"testing"
)

// TestMain removes the guest's irqpilot binary (guestIrqpilot) after the
// package's tests, so that no run leaves its 37 MB build behind in /tmp.
func TestMain(m *testing.M) {
	code := m.Run()
	if buildErr == nil && guestBin != "" {
		os.RemoveAll(filepath.Dir(guestBin))
	}
	os.Exit(code)
}
