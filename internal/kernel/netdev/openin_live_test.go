package netdev_test

import (
	"errors"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/irqpilot/irqpilot/internal/kernel/netdev"
	"github.com/irqpilot/irqpilot/internal/livetest"
)

// TestLiveOpenInNamespace: a Client opened with OpenIn sees the devices of
// that namespace from a thread that never entered it, and its napi-set
// changes them there; the caller's own namespace is not touched.
func TestLiveOpenInNamespace(t *testing.T) {
	ns := vethNamespace(t)
	ifindex, _ := strconv.Atoi(strings.TrimSpace(livetest.Run(t, "ip", "netns", "exec", ns, "cat", "/sys/class/net/vA/ifindex")))
	self, err := os.Readlink("/proc/thread-self/ns/net")
	if err != nil {
		t.Fatal(err)
	}
	hostNAPIs := func() []netdev.NAPI {
		c, err := netdev.Open()
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		all, err := c.NAPIs(0)
		if err != nil {
			t.Fatal(err)
		}
		return all
	}
	hostBefore := hostNAPIs()

	c, err := netdev.OpenIn("/run/netns/" + ns)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if now, _ := os.Readlink("/proc/thread-self/ns/net"); now != self {
		t.Fatalf("OpenIn left this thread in %s (was %s)", now, self)
	}
	in, err := c.NAPIs(ifindex)
	if err != nil {
		t.Fatal(err)
	}
	if len(in) != 4 {
		t.Fatalf("vA in %s: %d NAPI instances, want 4 (one per rx queue with GRO on): %+v", ns, len(in), in)
	}
	n := in[0]
	if n.DeferHardIRQs == nil {
		t.Skip("kernel without per-NAPI defer-hard-irqs (6.13)")
	}
	old := *n.DeferHardIRQs
	v := old + 5
	if err := c.SetNAPI(netdev.NAPISet{ID: n.ID, DeferHardIRQs: &v}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.SetNAPI(netdev.NAPISet{ID: n.ID, DeferHardIRQs: &old}) })
	// Another Client in the same namespace reads the value back.
	c2, err := netdev.OpenIn("/run/netns/" + ns)
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	got, err := c2.NAPI(n.ID)
	if err != nil || got.DeferHardIRQs == nil || *got.DeferHardIRQs != v || got.Ifindex != ifindex {
		t.Fatalf("read back in %s: %+v %v, want defer-hard-irqs %d on ifindex %d", ns, got, err, v, ifindex)
	}
	if err := c.SetNAPI(netdev.NAPISet{ID: n.ID, DeferHardIRQs: &old}); err != nil {
		t.Fatal(err)
	}
	// The caller's namespace: the same id means nothing there, and its
	// own NAPI instances are as they were.
	hostAfter := hostNAPIs()
	if len(hostAfter) != len(hostBefore) {
		t.Errorf("host namespace: %d NAPI instances, was %d", len(hostAfter), len(hostBefore))
	}
	for i := range hostBefore {
		if i < len(hostAfter) && hostBefore[i].ID == n.ID {
			t.Errorf("NAPI id %d is listed in the caller's namespace too: %+v", n.ID, hostBefore[i])
		}
	}
	if _, err := netdev.OpenIn("/run/netns/irqpilot-no-such-namespace"); err == nil || !errors.Is(err, os.ErrNotExist) ||
		!strings.Contains(err.Error(), "irqpilot-no-such-namespace") {
		t.Errorf("missing namespace: %v", err)
	}
}
