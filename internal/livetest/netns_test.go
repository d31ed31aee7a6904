package livetest

import (
	"os"
	"strings"
	"testing"
)

// TestNetnsVeth makes a namespace with a 4-queue veth pair in it and checks,
// through the namespace's own /sys, that both ends have 4 RX queues and that
// the namespace is gone after cleanup.
func TestNetnsVeth(t *testing.T) {
	NeedRoot(t, "ip")
	ns := Name("irqp-lt-")
	t.Run("make", func(t *testing.T) {
		Netns(t, ns)
		Veth(t, ns, "lta0", "ltb0", 4)
		for _, dev := range []string{"lta0", "ltb0"} {
			out := Run(t, "ip", "netns", "exec", ns, "ls", "/sys/class/net/"+dev+"/queues")
			if n := strings.Count(out, "rx-"); n != 4 {
				t.Errorf("%s has %d rx queues, want 4:\n%s", dev, n, out)
			}
		}
		if out := Run(t, "ip", "-n", ns, "link", "show", "lo"); !strings.Contains(out, "UP") {
			t.Errorf("lo in %s is not up:\n%s", ns, out)
		}
	})
	if _, err := os.Stat("/run/netns/" + ns); !os.IsNotExist(err) {
		t.Errorf("namespace %s still exists after cleanup (stat: %v)", ns, err)
	}
	if _, err := os.Stat("/sys/class/net/lta0"); !os.IsNotExist(err) {
		t.Errorf("lta0 leaked into the host namespace")
	}
}
