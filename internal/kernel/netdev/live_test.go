package netdev_test

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/irqpilot/irqpilot/internal/kernel"
	"github.com/irqpilot/irqpilot/internal/kernel/netdev"
	"github.com/irqpilot/irqpilot/internal/livetest"
)

// vethNamespace creates a namespace with veth vA/vB, 4 queues each, GRO on
// (which gives veth its NAPI instances), removed in Cleanup.
func vethNamespace(t *testing.T) string {
	t.Helper()
	livetest.NeedRoot(t, "ip", "ethtool")
	ns := livetest.Netns(t, livetest.Name("irqp-napi-"))
	livetest.Veth(t, ns, "vA", "vB", 4)
	for _, l := range []string{"vA", "vB"} {
		livetest.Run(t, "ip", "netns", "exec", ns, "ethtool", "-K", l, "gro", "on")
	}
	return ns
}

// inNetns runs fn on an OS thread inside the named namespace
// (livetest.InNetns; the thread is discarded afterwards).
func inNetns(t *testing.T, name string, fn func()) {
	t.Helper()
	if err := kernel.InNetns(name, func() error { fn(); return nil }); err != nil {
		t.Fatalf("namespace %s: %v", name, err)
	}
}

// napiThreads lists the kernel threads named napi/DEV-ID: the kernel's own
// account of the NAPI ids of a threaded device, and their PIDs.
func napiThreads(t *testing.T, dev string) map[uint32]int {
	t.Helper()
	out := map[uint32]int{}
	comms, _ := filepath.Glob("/proc/[0-9]*/comm")
	for _, p := range comms {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		id, ok := strings.CutPrefix(strings.TrimSpace(string(b)), "napi/"+dev+"-")
		if !ok {
			continue
		}
		n, err1 := strconv.ParseUint(id, 10, 32)
		pid, err2 := strconv.Atoi(filepath.Base(filepath.Dir(p)))
		if err1 == nil && err2 == nil {
			out[uint32(n)] = pid
		}
	}
	return out
}

// TestLiveVethNAPI: the dump lists one NAPI per veth rx queue; with the
// device threaded, their ids and PIDs are those of the napi/vA-ID kthreads;
// napi-set changes exactly what it names and the old values go back.
func TestLiveVethNAPI(t *testing.T) {
	ns := vethNamespace(t)
	ifindex, _ := strconv.Atoi(strings.TrimSpace(livetest.Run(t, "ip", "netns", "exec", ns, "cat", "/sys/class/net/vA/ifindex")))
	var before, threaded, after []netdev.NAPI
	var one netdev.NAPI
	var threads map[uint32]int
	var setErr, missingErr error
	inNetns(t, ns, func() {
		c, err := netdev.Open()
		if err != nil {
			t.Error(err)
			return
		}
		defer c.Close()
		if before, err = c.NAPIs(ifindex); err != nil {
			t.Error(err)
			return
		}
		// Make the device threaded through sysfs of this namespace, as a
		// process in it sees it.
		livetest.Run(t, "ip", "netns", "exec", ns, "sh", "-c", "echo 1 > /sys/class/net/vA/threaded")
		defer livetest.Run(t, "ip", "netns", "exec", ns, "sh", "-c", "echo 0 > /sys/class/net/vA/threaded")
		if threaded, err = c.NAPIs(ifindex); err != nil {
			t.Error(err)
			return
		}
		threads = napiThreads(t, "vA")
		if len(before) == 0 {
			return
		}
		id := before[0].ID
		d, g := uint32(3), uint64(40000)
		setErr = c.SetNAPI(netdev.NAPISet{ID: id, DeferHardIRQs: &d, GROFlushTimeout: &g})
		one, _ = c.NAPI(id)
		z, zz := uint32(0), uint64(0)
		if err := c.SetNAPI(netdev.NAPISet{ID: id, DeferHardIRQs: &z, GROFlushTimeout: &zz}); err != nil {
			t.Error(err)
		}
		_, missingErr = c.NAPI(1 << 30)
		after, _ = c.NAPIs(ifindex)
	})
	if len(before) != 4 {
		t.Fatalf("vA has %d NAPI instances, want 4: %+v", len(before), before)
	}
	for _, n := range threaded {
		if n.Threaded == nil || !*n.Threaded || n.PID == nil || threads[n.ID] != *n.PID {
			t.Errorf("napi %d threaded %v pid %v; kthreads %v", n.ID, n.Threaded, n.PID, threads)
		}
	}
	if len(threads) != 4 {
		t.Errorf("kthreads %v", threads)
	}
	if setErr != nil || *one.DeferHardIRQs != 3 || *one.GROFlushTimeout != 40000 || *one.IRQSuspendTimeout != 0 {
		t.Errorf("after napi-set: %+v (%v)", one, setErr)
	}
	if missingErr == nil || !strings.Contains(missingErr.Error(), netdev.ErrNoNAPI.Error()) {
		t.Errorf("unknown id: %v", missingErr)
	}
	for i := range after {
		a, b := after[i], before[i]
		if a.ID != b.ID || *a.DeferHardIRQs != *b.DeferHardIRQs || *a.GROFlushTimeout != *b.GROFlushTimeout {
			t.Errorf("not restored: %+v, was %+v", a, b)
		}
	}
}
