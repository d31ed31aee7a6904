package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/irqpilot/irqpilot/internal/livetest"
)

// TestMain removes the irqpilot binary a test built (livetest.Irqpilot:
// the campaign script below runs it).
// The campaign script's A/A step over the campaign of record's reports
// (SCENARIOS=aa measures nothing): each report is read again with this
// version's statistics, every twin's width is stated and flagged above
// ±5 %, and a sweep without a twin says so — the table in
// docs/benchmarks.md.
func TestBenchEvidenceAAWidths(t *testing.T) {
	for _, tool := range []string{"bash", "python3"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("needs %s", tool)
		}
	}
	out := t.TempDir()
	for _, dir := range []string{"../../docs/evidence/campaign", "../../docs/evidence/sweep"} {
		files, err := filepath.Glob(filepath.Join(dir, "*.json"))
		if err != nil || len(files) == 0 {
			t.Fatalf("%s: %v", dir, err)
		}
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(out, filepath.Base(f)), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	cmd := exec.Command("bash", "../../scripts/bench-evidence.sh")
	cmd.Env = append(os.Environ(), "SCENARIOS=aa", "OUT="+out, "BIN="+livetest.Irqpilot(t))
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, b)
	}
	got, err := os.ReadFile(filepath.Join(out, "aa-widths.txt"))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"memcached: default#aa 0.981 (0.929–1.031): ±7.6 %  ABOVE ±5 %",
		"mysql-connections connections=1: no A/A twin of default",
		"mysql-connections connections=4: no A/A twin of default",
		"mysql-connections connections=16: no A/A twin of default",
		"mysql-connections connections=64: no A/A twin of default",
		"nginx: default#aa 0.999 (0.970–1.056): ±5.6 %  ABOVE ±5 %",
		"storage-libaio-qd16: default#aa 1.017 (0.856–1.088): ±16.8 %  ABOVE ±5 %",
		"storage-psync-qd1: default#aa 0.982 (0.953–1.007): ±4.9 %",
		"udp: default#aa 0.980 (0.951–0.993): ±5.2 %  ABOVE ±5 %",
	}
	if d := cmp.Diff(want, strings.Split(strings.TrimSpace(string(got)), "\n")); d != "" {
		t.Errorf("A/A widths (-want +got):\n%s", d)
	}
}
