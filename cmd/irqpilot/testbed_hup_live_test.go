package main

import (
	"bufio"
	"encoding/json"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/irqpilot/irqpilot/internal/bench/testbed"
	"github.com/irqpilot/irqpilot/internal/kernel"
	"github.com/irqpilot/irqpilot/internal/livetest"
)

// SIGHUP (the terminal went away) ends `testbed up --wait` as SIGTERM does:
// the namespaces, the veth pair and the state file are removed at once, not
// left until the next `up`.
func TestTestbedWaitSIGHUPRemoves(t *testing.T) {
	livetest.NeedRoot(t, "ip")
	sd := filepath.Join(t.TempDir(), "state")
	var prefix []string
	if signal.Ignored(syscall.SIGHUP) {
		// Started under nohup, this test would hand its children SIGHUP
		// ignored, and the testbed rightly leaves an ignored SIGHUP alone:
		// the child gets the default back.
		prefix = []string{"env", "--default-signal=HUP"}
	}
	cmd := selfCmd(prefix, "--json", "testbed", "up", "--wait", "--state-dir", sd)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	t.Cleanup(func() {
		// Whatever happened, nothing of it stays.
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
		}
		_, _ = testbed.CleanStale(kernel.New("/"), sd)
	})
	var tb testbed.Testbed
	line, err := bufio.NewReader(stdout).ReadBytes('\n')
	if err != nil {
		t.Fatalf("no test bed printed: %v", err)
	}
	if err := json.Unmarshal(line, &tb); err != nil || tb.ServerNS == "" {
		t.Fatalf("test bed %q: %v", line, err)
	}
	go func() { done <- cmd.Wait() }()
	for _, ns := range []string{tb.ServerNS, tb.ClientNS} {
		if _, err := os.Stat(filepath.Join(kernel.RunNetNSDir, ns)); err != nil {
			t.Fatalf("namespace %s not made: %v", ns, err)
		}
	}
	if err := cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("testbed up --wait after SIGHUP: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("testbed up --wait did not end on SIGHUP")
	}
	done <- nil // for the cleanup
	for _, ns := range []string{tb.ServerNS, tb.ClientNS} {
		if _, err := os.Stat(filepath.Join(kernel.RunNetNSDir, ns)); err == nil {
			t.Errorf("namespace %s left after SIGHUP", ns)
		}
	}
	if left, _ := testbed.List(kernel.New("/"), sd); len(left) != 0 {
		t.Errorf("state files left after SIGHUP: %d", len(left))
	}
}
