package agent

import (
	"os"
	"testing"

	"github.com/irqpilot/irqpilot/internal/livetest"
)

// TestMain removes the binary and the generated host the tests built.
func TestMain(m *testing.M) {
	code := m.Run()
	if bigHostBuilt {
		if dir, _ := bigHost(); dir != "" {
			os.RemoveAll(dir)
		}
	}
	livetest.RemoveBuilt()
	removeNobodyBinary()
	os.Exit(code)
}
