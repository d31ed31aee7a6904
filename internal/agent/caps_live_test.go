package agent

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/irqpilot/irqpilot/internal/apply"
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
	needRoot(t)
	setpriv, err := exec.LookPath("setpriv")
	if err != nil {
		t.Skip("setpriv (util-linux) not installed")
	}
	bound, caps := unitCaps(t)
	t.Logf("unit capabilities: %v", caps)
	b := newBed(t, 2)
	irq, orig := movableIRQ(t)
	want := lastCPU(t)
	if want == orig {
		want = "0"
	}
	pf := writePlan(t, fmt.Sprintf(`version: 1
irqs:
  - irq: %d
    cpus: "%s"
    reason: agent capability test
rx_queues:
  - device: va0
    rps_cpus: "0"
    reason: agent capability test
`, irq, want))
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
	dir, err := os.MkdirTemp("", "irqp-agentsec-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	os.Chmod(dir, 0o755)
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
