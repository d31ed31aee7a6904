package main

import (
	"slices"
	"strings"
	"testing"
)

// --device takes interface names as the kernel allows them: a double quote
// is a valid character of a name, and used to fail with a CSV parse error
// (a StringSlice flag reads its value as CSV). Names are split at commas
// only, and the flag repeats.
func TestDeviceFlagTakesQuotes(t *testing.T) {
	for _, verb := range []string{"plan", "agent"} {
		root := newRootCmd()
		cmd, _, err := root.Find([]string{verb})
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.ParseFlags([]string{"--device", `a"b,c'd`, "--device", `"q"`}); err != nil {
			t.Fatalf("%s --device with quotes: %v", verb, err)
		}
		v := cmd.Flags().Lookup("device").Value
		got := strings.Split(v.String(), ",")
		if want := []string{`a"b`, `c'd`, `"q"`}; !slices.Equal(got, want) {
			t.Errorf("%s --device = %q, want %q", verb, got, want)
		}
	}
}

// End to end: the agent reads the name and judges it as a name (here: it
// shapes nothing with --plan alone), not as CSV.
func TestAgentDeviceWithQuote(t *testing.T) {
	args := []string{"--root", sharedFixtures + "/node_exporter", "agent", "--plan", "/nonexistent", "--listen", "", "--device", `va"0`}
	cmd := selfCmd(nil, args...)
	out, _ := cmd.CombinedOutput()
	if strings.Contains(string(out), "parse error") || !strings.Contains(string(out), "--device shapes the plans") {
		t.Errorf("agent --device 'va\"0':\n%s", out)
	}
}
