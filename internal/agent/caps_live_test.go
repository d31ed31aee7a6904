package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/irqpilot/irqpilot/internal/apply"
	"github.com/irqpilot/irqpilot/internal/kernel"
	"github.com/irqpilot/irqpilot/internal/livetest"
)

// unitCaps is the agent unit's CapabilityBoundingSet as setpriv's
// --bounding-set argument ("-all,+net_admin,+sys_nice").
func unitCaps(t *testing.T) (string, []string) {
	t.Helper()
	files, err := (&apply.Persistence{Binary: "/usr/bin/irqpilot", Agent: true, Packaged: true}).Files()
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(files[apply.PersistAgentUnitPath]), "\n") {
		if v, ok := strings.CutPrefix(l, "CapabilityBoundingSet="); ok {
			caps := strings.Fields(v)
			arg := "-all"
			for _, c := range caps {
				arg += ",+" + strings.ToLower(strings.TrimPrefix(c, "CAP_"))
			}
			return arg, caps
		}
	}
	t.Fatal("the agent's unit has no CapabilityBoundingSet")
	return "", nil
}

// The agent does its work with exactly the capabilities its unit leaves it
// (setpriv bounds them as CapabilityBoundingSet does, with no new
// privileges): applies and repairs RPS on a veth and an IRQ's affinity,
// and still sees root's irqbalance, whose /proc/PID/exe it may not read.
// Without CAP_NET_ADMIN the RPS write fails: the set is not larger than
// needed there.
func TestLiveAgentWithUnitCapabilities(t *testing.T) {
	livetest.NeedRoot(t, "setpriv")
	setpriv, _ := exec.LookPath("setpriv")
	bound, caps := unitCaps(t)
	t.Logf("unit capabilities: %v", caps)
	b := newBed(t, 2)
	irq, orig, want := irqToMove(t)
	pf := writePlan(t, irqAndVa0Plan(irq, want, "agent capability test"))
	sd := mkState(t)
	p := startCmd(t, sd, "ip", "netns", "exec", b.ns, setpriv, "--bounding-set", bound, "--inh-caps", "-all", "--no-new-privs",
		irqpilot(t), "agent", "--state-dir", sd, "--plan", pf, "--interval", "200ms", "--revert-on-exit")
	rps := "/sys/class/net/va0/queues/rx-0/rps_cpus"
	waitFor(t, 20*time.Second, "plan applied with the unit's capabilities", func() bool {
		select {
		case <-p.done:
			t.Fatalf("agent exited: %v\n%s", p.err, p.log)
		default:
		}
		return irqAffinity(t, irq) == want && strings.HasSuffix(b.read(t, rps), "1")
	})
	if st := procCaps(t, p.cmd.Process.Pid); st != "" {
		t.Logf("agent %s", st)
	}
	drifted := "0"
	if want == "0" {
		drifted = lastCPU(t)
	}
	b.write(t, rps, "0")
	setIRQAffinity(t, irq, drifted)
	waitFor(t, 20*time.Second, "drift repaired with the unit's capabilities", func() bool {
		return irqAffinity(t, irq) == want && strings.HasSuffix(b.read(t, rps), "1")
	})
	p.stop(t, syscall.SIGTERM)
	if got := irqAffinity(t, irq); got != orig {
		t.Errorf("irq %d affinity %q after --revert-on-exit, want %q", irq, got, orig)
	}

	// Root's irqbalance (a stand-in: a root-owned program of that name run
	// by root with every capability) is seen by the bounded agent.
	dir := openTempDir(t)
	fake := filepath.Join(dir, "irqbalance")
	data, err := os.ReadFile("/bin/sleep")
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(fake, data, 0o755)
	daemon := exec.Command(fake, "300")
	if err := daemon.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { daemon.Process.Kill(); daemon.Wait() })
	inv := func(bounding string) bool {
		out, err := exec.Command("ip", "netns", "exec", b.ns, setpriv, "--bounding-set", bounding, "--inh-caps", "-all", "--no-new-privs",
			irqpilot(t), "inventory", "--json").Output()
		if err != nil {
			t.Fatalf("inventory with capabilities %s: %v", bounding, err)
		}
		var h struct {
			Irqbalance struct {
				Running bool `json:"running"`
			} `json:"irqbalance"`
		}
		if err := json.Unmarshal(out, &h); err != nil {
			t.Fatal(err)
		}
		return h.Irqbalance.Running
	}
	waitFor(t, 10*time.Second, "irqbalance stand-in running", func() bool {
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", daemon.Process.Pid))
		return strings.TrimSpace(string(b)) == "irqbalance"
	})
	if !inv(bound) {
		t.Errorf("with the unit's capabilities the agent does not see root's irqbalance (pid %d)", daemon.Process.Pid)
	}

	// Without CAP_NET_ADMIN, RPS cannot be written (with it, it can).
	if out, err := exec.Command("ip", "netns", "exec", b.ns, setpriv, "--bounding-set", bound,
		"--inh-caps", "-all", "--no-new-privs", "sh", "-c", "echo 2 > "+rps).CombinedOutput(); err != nil {
		t.Fatalf("rps_cpus not written with the unit's capabilities: %v %s", err, out)
	}
	out, err := exec.Command("ip", "netns", "exec", b.ns, setpriv, "--bounding-set", strings.ReplaceAll(bound, ",+net_admin", ""),
		"--inh-caps", "-all", "--no-new-privs", "sh", "-c", "echo 2 > "+rps).CombinedOutput()
	if err == nil {
		t.Errorf("rps_cpus written without CAP_NET_ADMIN: the unit's set may be larger than needed")
	} else {
		t.Logf("without CAP_NET_ADMIN: %s", strings.TrimSpace(string(out)))
	}
}

// procCaps is the effective capability line of pid's status.
func procCaps(t *testing.T, pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return ""
	}
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "CapEff:") {
			return l
		}
	}
	return ""
}

// An unprivileged user floods the agent's metrics port with idle
// keep-alive connections, more than the agent has descriptors: the agent
// holds only its capped few, still repairs drift, and `status` answers
// during and after the flood. The agent runs with a descriptor limit of
// floodLimit (prlimit) in a namespace of the test's own, with the default
// --listen; the flood comes from this test binary re-executed as nobody
// inside that namespace.
func TestLiveFdFloodByUnprivilegedUser(t *testing.T) {
	livetest.NeedRoot(t)
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

	// A real scrape, with the DaemonSet probe's timeout, is answered
	// while the flood holds its connections idle.
	for i := range 3 {
		if err := scrapeIn(b.ns, "127.0.0.1:9477", 5*time.Second); err != nil {
			t.Errorf("scrape %d under the flood: %v", i, err)
		}
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

// scrapeIn GETs /metrics at addr from inside namespace ns (the socket is
// made there) within timeout.
func scrapeIn(ns, addr string, timeout time.Duration) error {
	dial := func(ctx context.Context, network, a string) (c net.Conn, err error) {
		err = kernel.InNetns(ns, func() error {
			c, err = (&net.Dialer{}).DialContext(ctx, network, a)
			return err
		})
		return c, err
	}
	client := &http.Client{Timeout: timeout, Transport: &http.Transport{DialContext: dial, DisableKeepAlives: true}}
	resp, err := client.Get("http://" + addr + "/metrics")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err == nil && (resp.StatusCode != http.StatusOK || !strings.Contains(string(b), "irqpilot_")) {
		err = fmt.Errorf("status %s, %d bytes without irqpilot metrics", resp.Status, len(b))
	}
	return err
}
