package main

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/irqpilot/irqpilot/internal/agent"
	"github.com/irqpilot/irqpilot/internal/hostgen"
	"github.com/irqpilot/irqpilot/internal/livetest"
)

// apply and revert beside an agent that uses the same state directory
// (its status socket answers there) refuse, saying the way forward, and
// write nothing: the agent would undo them within one interval. With
// --ignore-agent they go ahead. A socket file left by an agent that is
// gone does not count.
func TestApplyRevertBesideRunningAgent(t *testing.T) {
	root, _ := livetest.GenHost(t, hostgen.Spec{CPUs: 4, Packages: 1, Nodes: 1, Offline: hostgen.NoOffline,
		NICs: []hostgen.NICSpec{{Name: "eth0", Driver: "ice", Slot: 3, Queues: 2}}, NVMeQueues: -1})
	dir := t.TempDir()
	state := filepath.Join(dir, "state")
	if err := os.Mkdir(state, 0o700); err != nil {
		t.Fatal(err)
	}
	plan := filepath.Join(dir, "plan.yaml")
	os.WriteFile(plan, []byte("version: 1\nrx_queues:\n  - {device: eth0, queue: 0, rps_cpus: \"1\", reason: test}\n"), 0o644)
	rps := filepath.Join(root, "sys/class/net/eth0/queues/rx-0/rps_cpus")
	before, _ := os.ReadFile(rps)

	ln, err := net.Listen("unix", filepath.Join(state, agent.SocketName))
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	for _, args := range [][]string{{"apply", "--state-dir", state, plan}, {"revert", "--state-dir", state}} {
		out, errOut, err := runCmd(selfCmd(nil, append([]string{"--root", root}, args...)...))
		if err == nil || !strings.Contains(errOut, "an irqpilot agent is running with state directory") ||
			!strings.Contains(errOut, "--ignore-agent") || !strings.Contains(errOut, "SIGHUP") {
			t.Errorf("%s beside a running agent: %v\n%s%s", args[0], err, out, errOut)
		}
	}
	if after, _ := os.ReadFile(rps); strings.TrimSpace(string(after)) != strings.TrimSpace(string(before)) {
		t.Errorf("apply beside the agent wrote rps_cpus %q (was %q)", after, before)
	}
	if _, errOut, err := runCmd(selfCmd(nil, "--root", root, "apply", "--ignore-agent", "--state-dir", state, plan)); err != nil {
		t.Errorf("apply --ignore-agent: %v\n%s", err, errOut)
	}
	ln.(*net.UnixListener).SetUnlinkOnClose(false)
	ln.Close() // the agent is gone; its socket file stays behind
	if _, errOut, err := runCmd(selfCmd(nil, "--root", root, "revert", "--state-dir", state)); err != nil {
		t.Errorf("revert with a stale socket file: %v\n%s", err, errOut)
	}
	if after, _ := os.ReadFile(rps); strings.TrimSpace(string(after)) != strings.TrimSpace(string(before)) {
		t.Errorf("rps_cpus %q after revert, want %q", after, before)
	}
}
