package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/irqpilot/irqpilot/internal/setting"
)

// The revert table lists the writes made, each once, from the value found
// to the value written back: a later journal's entry for a setting an
// older journal restored is counted below the table, never listed with
// values that were not written.
func TestRevertTableListsWritesMade(t *testing.T) {
	entries := []setting.Change{
		{Kind: setting.KindRPSCPUs, Target: "veth0 rx-0", Value: "3", Old: "0", Status: setting.StatusRestored},
		{Kind: setting.KindRPSCPUs, Target: "veth0 rx-0", Value: "0", Old: "3", Status: setting.StatusRestored, RestoredBy: "20261128T042323Z",
			Note: `restored to "0", the value from before journal 20261128T042323Z`},
	}
	var b bytes.Buffer
	printRestored(&b, entries)
	out := b.String()
	rows := 0
	for _, line := range strings.Split(out, "\n") {
		if strings.Contains(line, "veth0 rx-0") {
			rows++
			if f := strings.Fields(line); len(f) < 6 || f[4] != "0-1" || f[5] != "none" {
				t.Errorf("row %q: want from 0-1 (mask 3) restored to none", line)
			}
		}
	}
	if rows != 1 || !strings.Contains(out, "1 later write(s) of the same settings: undone by restoring journal 20261128T042323Z's value") {
		t.Fatalf("%d rows:\n%s", rows, out)
	}
}
