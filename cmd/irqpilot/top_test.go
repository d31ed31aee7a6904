package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// runIrqpilot runs irqpilot to completion and returns stdout and stderr.
func runIrqpilot(t *testing.T, args ...string) (string, string, error) {
	t.Helper()
	return runCmd(selfCmd(nil, args...))
}

// onlineCPUs counts the cpuN lines of the live /proc/stat.
func onlineCPUs(t *testing.T) []string {
	t.Helper()
	data, err := os.ReadFile("/proc/stat")
	if err != nil {
		t.Skip("no /proc/stat:", err)
	}
	var ids []string
	for _, l := range strings.Split(string(data), "\n") {
		if f := strings.Fields(l); len(f) > 0 && strings.HasPrefix(f[0], "cpu") && f[0] != "cpu" {
			ids = append(ids, strings.TrimPrefix(f[0], "cpu"))
		}
	}
	return ids
}

func TestTopOnceAndJSON(t *testing.T) {
	cpus := onlineCPUs(t)
	out, stderr, err := runIrqpilot(t, "top", "--once", "--interval", "300ms")
	if err != nil {
		t.Fatalf("top --once: %v\n%s", err, stderr)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if !strings.HasPrefix(lines[0], "irqpilot top") || !strings.Contains(lines[0], fmt.Sprintf("%d CPUs", len(cpus))) {
		t.Errorf("title %q", lines[0])
	}
	for _, id := range cpus {
		re := regexp.MustCompile(`(?m)^\s+` + id + `(\s+\d+\.\d){5} \[`)
		if !re.MatchString(out) {
			t.Errorf("no row for CPU %s in\n%s", id, out)
		}
	}

	out, stderr, err = runIrqpilot(t, "top", "--json", "--interval", "300ms")
	if err != nil {
		t.Fatalf("top --json: %v\n%s", err, stderr)
	}
	// Decode into maps so the test checks the documented names, not Go fields.
	var doc struct {
		CPUs []map[string]any `json:"cpus"`
		IRQs []map[string]any `json:"irqs"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("top --json: %v\n%s", err, out)
	}
	if len(doc.CPUs) != len(cpus) {
		t.Fatalf("%d cpus in JSON, %d online", len(doc.CPUs), len(cpus))
	}
	for i, c := range doc.CPUs {
		var sum float64
		for _, k := range []string{"id", "user", "nice", "system", "iowait", "irq", "softirq", "steal", "idle", "net_rx", "net_tx", "block"} {
			v, ok := c[k].(float64)
			if !ok {
				t.Fatalf("cpus[%d].%s missing or not a number: %v", i, k, c)
			}
			if k != "id" && k != "net_rx" && k != "net_tx" && k != "block" {
				sum += v
			}
		}
		if fmt.Sprint(c["id"]) != cpus[i] {
			t.Errorf("cpus[%d].id = %v, want %s", i, c["id"], cpus[i])
		}
		// The percentages of a CPU add up to 100 (or are all 0: no ticks).
		if sum != 0 && (sum < 99.5 || sum > 100.5) {
			t.Errorf("cpu %v: percentages add up to %.2f", c["id"], sum)
		}
	}
	if len(doc.IRQs) == 0 {
		t.Fatal("no irqs in JSON")
	}
	for _, q := range doc.IRQs {
		for _, k := range []string{"irq", "name", "device", "queue", "rate", "cpus"} {
			if _, ok := q[k]; !ok {
				t.Errorf("irq %v: field %q missing", q["irq"], k)
			}
		}
	}
}

// tmux drives the interactive screen in an 80x24 pane on a private tmux
// server: the per-CPU rows appear, 's' and '/' work, and 'q' ends the
// process with status 0.
func TestTopInTmux(t *testing.T) {
	if _, err := exec.LookPath("tmux"); err != nil {
		t.Skip("tmux not installed")
	}
	cpus := onlineCPUs(t)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	name := fmt.Sprintf("irqpilot-top-%d-%d", os.Getpid(), time.Now().UnixNano())
	tmux := func(args ...string) (string, error) {
		out, err := exec.Command("tmux", append([]string{"-L", name}, args...)...).CombinedOutput()
		return string(out), err
	}
	t.Cleanup(func() {
		_, _ = tmux("kill-session", "-t", name)
		_, _ = tmux("kill-server")
	})
	// A shell in the pane records top's exit status in a file: tmux itself
	// sometimes marks the pane dead before it has reaped the process, and
	// then never reports a status.
	statusFile := filepath.Join(t.TempDir(), "status")
	if out, err := tmux("-f", "/dev/null", "new-session", "-d", "-s", name, "-x", "80", "-y", "24",
		"-e", selfEnv+"=1", "sh", "-c", `"$0" top --interval 200ms; echo $? > "$1"`, exe, statusFile); err != nil {
		t.Fatalf("tmux new-session: %v: %s", err, out)
	}
	if out, err := tmux("set-option", "-w", "-t", name, "remain-on-exit", "on"); err != nil {
		t.Fatalf("tmux set-option: %v: %s", err, out)
	}
	capture := func() string {
		out, err := tmux("capture-pane", "-p", "-t", name)
		if err != nil {
			t.Fatalf("capture-pane: %v: %s", err, out)
		}
		return out
	}
	// waitFor polls the pane until cond holds (a deadline for failing, not
	// a timing assertion).
	waitFor := func(what string, cond func(string) bool) string {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for {
			s := capture()
			if cond(s) {
				return s
			}
			if time.Now().After(deadline) {
				t.Fatalf("waiting for %s; pane shows:\n%s", what, s)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	rowRe := func(id string) *regexp.Regexp {
		return regexp.MustCompile(`(?m)^\s+` + id + `(\s+\d+\.\d){5} \[`)
	}
	screen := waitFor("per-CPU rows", func(s string) bool {
		for _, id := range cpus {
			if !rowRe(id).MatchString(s) {
				return false
			}
		}
		return true
	})
	lines := strings.Split(strings.TrimRight(screen, "\n"), "\n")
	if len(lines) > 24 {
		t.Errorf("pane has %d lines", len(lines))
	}
	for _, l := range lines {
		if utf8.RuneCountInString(l) > 80 {
			t.Errorf("line wider than 80: %q", l)
		}
	}
	if !strings.HasPrefix(lines[0], "irqpilot top") || !strings.Contains(screen, " CPU   usr   sys   irq  soft  idle") ||
		!strings.Contains(screen, "RATE/s   MS/s DEVICE") {
		t.Errorf("screen lacks title or headers:\n%s", screen)
	}

	if out, err := tmux("send-keys", "-t", name, "s"); err != nil {
		t.Fatal(err, out)
	}
	waitFor("sort:busy in the footer", func(s string) bool { return strings.Contains(s, "sort:busy") })
	if out, err := tmux("send-keys", "-t", name, "/", "virtio", "Enter"); err != nil {
		t.Fatal(err, out)
	}
	waitFor("the filter in the IRQ header", func(s string) bool { return strings.Contains(s, "(filter: virtio)") })

	if out, err := tmux("send-keys", "-t", name, "q"); err != nil {
		t.Fatal(err, out)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		if b, err := os.ReadFile(statusFile); err == nil && strings.HasSuffix(string(b), "\n") {
			if st := strings.TrimSpace(string(b)); st != "0" {
				t.Errorf("top exited with status %s", st)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("top still running 20 s after q; pane:\n%s", capture())
		}
		time.Sleep(100 * time.Millisecond)
	}
}
