package livetest

import (
	"os"
	"runtime"
	"strings"
	"testing"

	"github.com/irqpilot/irqpilot/internal/kernel"
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

// TestAddNetnsLeavesCallerAlone: creating a namespace whose name is taken
// fails with the name in the error, and neither that nor a success moves
// the calling thread out of its namespace; /run/netns is a shared mount
// afterwards, as iproute2 leaves it.
func TestAddNetnsLeavesCallerAlone(t *testing.T) {
	NeedRoot(t)
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	// This thread's namespace and the process's first thread's, which
	// /proc/self/ns/net shows and the creating goroutine may have run on.
	self := func() string {
		var s string
		for _, p := range []string{"/proc/thread-self/ns/net", "/proc/self/ns/net"} {
			l, err := os.Readlink(p)
			if err != nil {
				t.Fatal(err)
			}
			s += p + "=" + l + " "
		}
		return s
	}
	before := self()
	var ns string
	for i := 0; i < 8; i++ {
		ns = Netns(t, Name("irqp-lt-"))
		if got := self(); got != before {
			t.Fatalf("after creating %s: %s, was %s", ns, got, before)
		}
	}
	err := kernel.AddNetns(ns)
	if err == nil || !strings.Contains(err.Error(), ns) {
		t.Errorf("creating %s again: err = %v, want an error naming it", ns, err)
	}
	if got := self(); got != before {
		t.Fatalf("after the failed create: %s, was %s", got, before)
	}
	mi, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	shared := false
	for _, l := range strings.Split(string(mi), "\n") {
		f := strings.Fields(l)
		if len(f) > 6 && f[4] == kernel.RunNetNSDir && strings.Contains(l, " shared:") {
			shared = true
		}
	}
	if !shared {
		t.Errorf("%s is not a shared mount after AddNetns", kernel.RunNetNSDir)
	}
}
