package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const loadTestdata = "../../internal/load/testdata"

// copyTree copies a small directory of regular files.
func copyTree(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.Walk(src, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		if fi.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
}

type doctorJSON struct {
	Interval float64 `json:"interval_seconds"`
	Findings []struct {
		ID       string `json:"id"`
		Severity string `json:"severity"`
		CPUs     []int  `json:"cpus"`
		Summary  string `json:"summary"`
		Evidence []struct {
			Name  string  `json:"name"`
			Value float64 `json:"value"`
			Unit  string  `json:"unit"`
		} `json:"evidence"`
		Fix string `json:"fix"`
	} `json:"findings"`
}

func TestDoctorCapturedPairs(t *testing.T) {
	a, b := filepath.Join(loadTestdata, "udp-loopback/a"), filepath.Join(loadTestdata, "udp-loopback/b")
	// The real loopback capture: both CPUs share the work; no warnings.
	out, errOut, err := runIrqpilot(t, "doctor", "--root", a, "--after", b, "--json")
	if exitCode(err) != 0 {
		t.Fatalf("exit %v: %s", err, errOut)
	}
	var rep doctorJSON
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if rep.Interval < 1 || rep.Interval > 1.1 || rep.Findings == nil {
		t.Errorf("interval %v findings %v", rep.Interval, rep.Findings)
	}
	for _, f := range rep.Findings {
		if f.Severity != "info" {
			t.Errorf("unexpected %s finding %s", f.Severity, f.ID)
		}
	}

	// The same pair with 300 backlog drops on CPU1 in the second sample:
	// a softnet-drops warning and exit status 1.
	dir := t.TempDir()
	copyTree(t, filepath.Join(loadTestdata, "udp-loopback"), dir)
	sn := filepath.Join(dir, "b/proc/net/softnet_stat")
	data, err := os.ReadFile(sn)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(data), "\n")
	f := strings.Fields(lines[1])
	f[1] = fmt.Sprintf("%08x", 300)
	lines[1] = strings.Join(f, " ")
	if err := os.WriteFile(sn, []byte(strings.Join(lines, "\n")), 0o644); err != nil {
		t.Fatal(err)
	}
	out, errOut, err = runIrqpilot(t, "doctor", "--root", filepath.Join(dir, "a"), "--after", filepath.Join(dir, "b"), "--json")
	if exitCode(err) != 1 {
		t.Fatalf("exit %v (want 1): %s %s", err, out, errOut)
	}
	rep = doctorJSON{}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, f := range rep.Findings {
		if f.ID == "softnet-drops" {
			found = true
			if f.Severity != "warning" || len(f.CPUs) != 1 || f.CPUs[0] != 1 || len(f.Evidence) == 0 || f.Evidence[0].Name != "CPU1 dropped" {
				t.Errorf("%+v", f)
			}
			// 300 drops over the capture's interval.
			if want := 300 / rep.Interval; f.Evidence[0].Value < want-0.01 || f.Evidence[0].Value > want+0.01 {
				t.Errorf("drops %v/s, want %.2f", f.Evidence[0].Value, want)
			}
		}
	}
	if !found {
		t.Errorf("no softnet-drops finding: %s", out)
	}

	// Text for people: the finding, its evidence and fix.
	out, _, err = runIrqpilot(t, "doctor", "--root", filepath.Join(dir, "a"), "--after", filepath.Join(dir, "b"))
	if exitCode(err) != 1 || !strings.Contains(out, "WARNING  softnet-drops (CPU 1)") || !strings.Contains(out, "Fix: Raise the backlog") || !strings.Contains(out, "Evidence: CPU1 dropped") {
		t.Errorf("text output (exit %v):\n%s", err, out)
	}
}

func TestDoctorErrors(t *testing.T) {
	a := filepath.Join(loadTestdata, "udp-loopback/a")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"doctor", "--root", a}, "needs two samples"},
		{[]string{"doctor", "--root", a, "--after", "/nonexistent"}, "--after /nonexistent"},
		{[]string{"doctor", "--root", filepath.Join(loadTestdata, "udp-loopback/b"), "--after", a}, "positive interval"},
		{[]string{"doctor", "--after", a}, "--after is for captured state"},
	} {
		_, errOut, err := runIrqpilot(t, c.args...)
		if exitCode(err) != 2 || !strings.Contains(errOut, c.want) {
			t.Errorf("%v: exit %v stderr %q, want 2 and %q", c.args, err, errOut, c.want)
		}
	}
}
