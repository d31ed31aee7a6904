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
// The campaign script's A/A step over the campaigns of record's reports
// (SCENARIOS=aa measures nothing): each report is read again with this
// version's statistics, every twin's width is stated and flagged above
// ±5 %, every copy of the baseline (#aa, #best, #tune) counts as a twin,
// and each sweep point has its own — the tables in docs/benchmarks.md.
func TestBenchEvidenceAAWidths(t *testing.T) {
	for _, tool := range []string{"bash", "python3"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("needs %s", tool)
		}
	}
	out := t.TempDir()
	for _, dir := range []string{"../../docs/evidence/campaign", "../../docs/evidence/workloads"} {
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
		"memcached: default#best 0.989 (0.931–1.040): ±7.4 %  ABOVE ±5 %",
		"mysql-connections connections=1: default#aa 1.000 (0.813–1.144): ±23.0 %  ABOVE ±5 %",
		"mysql-connections connections=4: default#aa 0.924 (0.804–0.989): ±24.4 %  ABOVE ±5 %",
		"mysql-connections connections=16: default#aa 1.052 (0.856–1.215): ±21.5 %  ABOVE ±5 %",
		"mysql-connections connections=64: default#aa 1.012 (0.828–1.196): ±20.7 %  ABOVE ±5 %",
		"mysql: default#aa 1.001 (0.966–1.019): ±3.5 %",
		"mysql: default#tune 0.957 (0.923–1.087): ±8.7 %  ABOVE ±5 %",
		"nginx: default#aa 0.999 (0.970–1.056): ±5.6 %  ABOVE ±5 %",
		"sockperf-pingpong: default#aa 1.028 (0.969–1.099): ±9.9 %  ABOVE ±5 %",
		"sockperf-pingpong: default#tune 1.098 (0.953–1.288): ±28.8 %  ABOVE ±5 %",
		"sockperf: default#aa 1.480 (0.332–2.780): ±201.5 %  ABOVE ±5 %",
		"sockperf: default#tune 0.728 (0.218–1.748): ±359.4 %  ABOVE ±5 %",
		"storage-libaio-qd16: default#aa 1.017 (0.856–1.088): ±16.8 %  ABOVE ±5 %",
		"storage-libaio-qd16: default#best 1.019 (0.961–1.065): ±6.5 %  ABOVE ±5 %",
		"storage-psync-qd1: default#aa 0.982 (0.953–1.007): ±4.9 %",
		"storage-psync-qd1: default#best 1.015 (0.896–1.027): ±11.6 %  ABOVE ±5 %",
		"udp: default#aa 0.980 (0.951–0.993): ±5.2 %  ABOVE ±5 %",
	}
	if d := cmp.Diff(want, strings.Split(strings.TrimSpace(string(got)), "\n")); d != "" {
		t.Errorf("A/A widths (-want +got):\n%s", d)
	}
}
