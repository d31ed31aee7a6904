package bench

import (
	"os"
	"testing"
)

// TestMain lets the test binary act as the udp workload's sink and sender
// (the workload starts its own executable with HelperEnv set).
func TestMain(m *testing.M) {
	if mode := os.Getenv(HelperEnv); mode != "" {
		os.Exit(RunHelper(mode, os.Args[1:], os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}
