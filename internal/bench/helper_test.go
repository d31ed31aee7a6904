package bench

import (
	"os"
	"testing"

	"github.com/irqpilot/irqpilot/internal/bench/workload"
)

// TestMain lets the test binary act as the udp workload's sink and sender
// (the workload starts its own executable with HelperEnv set).
func TestMain(m *testing.M) {
	if mode := os.Getenv(workload.HelperEnv); mode != "" {
		os.Exit(workload.RunHelper(mode, os.Args[1:], os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}
