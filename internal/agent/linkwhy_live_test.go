package agent

import (
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/irqpilot/irqpilot/internal/livetest"
)

// When a veth pair is re-created, both ends appear in one burst (the peer
// first), and the agent re-applies va0's settings. Each "applied" line names
// the link whose setting it is: "link va0 appeared", never the peer vb0,
// which the first event of the burst named for every setting.
func TestLiveAppliedNamesItsLink(t *testing.T) {
	livetest.NeedRoot(t)
	b, sd, p := startVa0Agent(t, "link naming test", "1h")
	converged := func() bool {
		return strings.HasSuffix(b.read(t, "/sys/class/net/va0/queues/rx-1/rps_cpus"), "1")
	}
	waitFor(t, 10*time.Second, "plan applied", converged)
	before := len(p.log.String())
	// Removed, and its removal's pass over, before the pair comes back:
	// the peer's link event (the kernel registers the peer first) then
	// starts the burst that re-applies va0.
	run(t, "ip", "-n", b.ns, "link", "del", "va0")
	time.Sleep(300 * time.Millisecond)
	run(t, "ip", "netns", "exec", b.ns, "sh", "-c", "ip link add va0 numrxqueues 2 numtxqueues 2 type veth peer name vb0 numrxqueues 2 numtxqueues 2"+
		" && ip link set vb0 up && ip link set va0 up")
	waitFor(t, 10*time.Second, "re-creation converged", converged)
	time.Sleep(300 * time.Millisecond)
	log := p.log.String()[before:]
	applied := 0
	for _, l := range strings.Split(log, "\n") {
		if !strings.Contains(l, `msg=applied`) {
			continue
		}
		applied++
		if !strings.Contains(l, "device=va0") {
			t.Errorf("applied a setting of another device: %s", l)
		}
		if !strings.Contains(l, `why="link va0 appeared"`) {
			t.Errorf("applied line does not name va0 as the link that appeared: %s", l)
		}
	}
	if applied == 0 {
		t.Fatalf("no applied line after the re-creation:\n%s", log)
	}
	p.stop(t, syscall.SIGTERM)
	if out, err := exec.Command("ip", "netns", "exec", b.ns, irqpilot(t), "revert", "--state-dir", sd).CombinedOutput(); err != nil {
		t.Fatalf("revert: %v\n%s", err, out)
	}
}
