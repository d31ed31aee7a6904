package agent

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/irqpilot/irqpilot/internal/livetest"
)

// An unprivileged user floods the agent's metrics port with idle
// keep-alive connections, more than the agent has descriptors: the agent
// holds only its capped few, still repairs drift, and `status` answers
// during and after the flood. The agent runs with a descriptor limit of
// floodLimit (prlimit) in a namespace of the test's own, with the default
// --listen; the flood comes from this test binary re-executed as nobody
// inside that namespace.
func TestLiveFdFloodByUnprivilegedUser(t *testing.T) {
	needRoot(t)
	const (
		floodLimit = 2048
		floodConns = 4000
	)
	if _, err := os.Stat("/usr/bin/prlimit"); err != nil {
		t.Skip("prlimit (util-linux) not installed")
	}
	b := newBed(t, 2)
	pf := writePlan(t, `version: 1
rx_queues:
  - device: va0
    rps_cpus: "0"
    reason: agent fd flood test
`)
	sd := mkState(t)
	p := startAgentLimited(t, b.ns, sd, floodLimit, "--plan", pf, "--interval", "200ms")
	rps := "/sys/class/net/va0/queues/rx-0/rps_cpus"
	waitFor(t, 10*time.Second, "plan applied", func() bool { return strings.HasSuffix(b.read(t, rps), "1") })
	pid := p.cmd.Process.Pid
	before := procUsage(t, pid)

	f := asNobody(t, b.ns, modeFlood, "FLOOD_ADDR=127.0.0.1:9477", "FLOOD_CONNS="+strconv.Itoa(floodConns))
	var res floodResult
	if err := json.Unmarshal([]byte(f.line(t, 45*time.Second)), &res); err != nil {
		t.Fatalf("flood report: %v\n%s", err, f.errb)
	}
	t.Logf("flood as nobody: %+v", res)
	// The flood is real: more connections established than the agent has
	// descriptors (the kernel's backlog holds those it does not accept).
	if res.Opened <= floodLimit {
		t.Fatalf("only %d of %d connections opened; the flood did not exceed the agent's %d descriptors", res.Opened, floodConns, floodLimit)
	}
	if res.Answered == 0 {
		t.Errorf("no flood connection was answered: the metrics port did not serve at all")
	}
	during := procUsage(t, pid)
	if during.fds >= floodLimit-fdReserve {
		t.Errorf("agent holds %d descriptors under the flood (limit %d): the connection cap did not hold", during.fds, floodLimit)
	}

	// Status answers and drift is repaired while the flood holds.
	st := p.status(t)
	if strings.Contains(st.LastError, "too many open files") {
		t.Errorf("a pass failed under the flood: %s", st.LastError)
	}
	b.write(t, rps, "0")
	waitFor(t, 20*time.Second, "drift repaired under the flood", func() bool { return strings.HasSuffix(b.read(t, rps), "1") })
	waitFor(t, 10*time.Second, "repair in status under the flood", func() bool { return len(p.status(t).Repairs) >= 1 })
	during2 := procUsage(t, pid)

	// The flood ends; the agent answers and repairs again.
	f.end()
	select {
	case <-f.done:
	case <-time.After(20 * time.Second):
		t.Fatal("flooding child did not exit")
	}
	b.write(t, rps, "0")
	waitFor(t, 20*time.Second, "drift repaired after the flood", func() bool { return strings.HasSuffix(b.read(t, rps), "1") })
	waitFor(t, 10*time.Second, "second repair in status after the flood", func() bool { return len(p.status(t).Repairs) >= 2 })
	if log := p.log.String(); strings.Contains(log, "too many open files") && strings.Contains(log, "enforcement pass failed") {
		t.Errorf("an enforcement pass ran out of descriptors:\n%s", grepLines(log, "too many open files"))
	}
	after := procUsage(t, pid)
	t.Logf("agent descriptors %d → %d (flood) → %d (after repair under flood) → %d (after); RSS %d → %d → %d → %d KiB; limit %d",
		before.fds, during.fds, during2.fds, after.fds, before.rssKiB, during.rssKiB, during2.rssKiB, after.rssKiB, floodLimit)
}

// startAgentLimited is startAgent with RLIMIT_NOFILE soft and hard set to
// limit (prlimit execs ip, which execs the agent: one PID).
func startAgentLimited(t *testing.T, ns, stateDir string, limit int, args ...string) *agentProc {
	t.Helper()
	l := strconv.Itoa(limit)
	argv := append([]string{"--nofile=" + l + ":" + l, "ip", "netns", "exec", ns, irqpilot(t), "agent", "--state-dir", stateDir}, args...)
	p := startCmd(t, stateDir, "/usr/bin/prlimit", argv...)
	waitSocket(t, p, stateDir)
	return p
}

type usage struct{ fds, rssKiB int }

// procUsage counts pid's open descriptors and reads its resident size.
func procUsage(t *testing.T, pid int) usage {
	t.Helper()
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		t.Fatal(err)
	}
	u := usage{fds: len(ents)}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			u.rssKiB, _ = strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
		}
	}
	return u
}

// startCmd runs name argv as the agent process (its output in p.log); the
// cleanup stops it by PID.
func startCmd(t *testing.T, stateDir, name string, argv ...string) *agentProc {
	t.Helper()
	p := &agentProc{cmd: exec.Command(name, argv...), log: &livetest.Buffer{}, stateDir: stateDir, done: make(chan struct{})}
	p.cmd.Stderr, p.cmd.Stdout = p.log, p.log
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.err = p.cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		p.stop(t, syscall.SIGTERM)
		if t.Failed() {
			t.Logf("agent log:\n%s", p.log)
		}
	})
	return p
}
