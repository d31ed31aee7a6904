package agent

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// A metric command that outlives its timeout through a child ("sleep;
// echo") is killed with its whole process group: userMetric returns once
// the timeout fires, not when the child would have ended, and nothing of
// the command is left running.
func TestMetricCommandTimeoutKillsGroup(t *testing.T) {
	pidFile := filepath.Join(t.TempDir(), "pgid")
	const sleep = 60 * time.Second
	ag := &Agent{o: Options{Interval: time.Second},
		adapt: newAdaptState(AdaptOptions{MetricCommand: "echo $$ > " + pidFile + "; sleep " + strconv.Itoa(int(sleep.Seconds())) + "; echo 5"})}
	start := time.Now()
	_, err := ag.userMetric()
	took := time.Since(start)
	if err == nil {
		t.Fatal("a metric command killed by its timeout gave a value")
	}
	// A bound against the old behaviour (waiting out the child), far
	// above the 1 s timeout: not a timing assertion.
	if took > sleep/2 {
		t.Fatalf("userMetric returned after %s: it waited for the command's child (timeout 1s)", took)
	}
	b, rerr := os.ReadFile(pidFile)
	if rerr != nil {
		t.Fatal(rerr)
	}
	pgid := strings.TrimSpace(string(b))
	var left []string
	waitForT(t, func() bool {
		left = groupMembers(t, pgid)
		return len(left) == 0
	})
	t.Logf("returned after %s: %v", took.Round(time.Millisecond), err)
}

// groupMembers lists the live (not zombie) processes in process group pgid.
func groupMembers(t *testing.T, pgid string) []string {
	t.Helper()
	ents, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(s[i+1:])
		// state ppid pgrp ...
		if len(f) > 2 && f[2] == pgid && f[0] != "Z" && f[0] != "X" {
			out = append(out, e.Name())
		}
	}
	return out
}

// A metric command that prints without end is cut off at maxMetricOutput
// and refused; one number passes.
func TestMetricCommandOutputCapped(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := runMetricCommand(ctx, "head -c 1000000 /dev/zero | tr '\\0' 1"); err == nil || !strings.Contains(err.Error(), "printed more than") {
		t.Errorf("a megabyte of output: %v", err)
	}
	out, err := runMetricCommand(ctx, "echo 42")
	if err != nil || strings.TrimSpace(string(out)) != "42" {
		t.Errorf("echo 42: %q %v", out, err)
	}
}
