package livetest

import (
	"os"
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
// fails with the name in the error, and neither that nor 32 successes
// move the process out of its namespace (a creator that retired its
// thread instead of switching back moved the first thread here within a
// few creations); /run/netns is a shared mount afterwards, as iproute2
// leaves it.
func TestAddNetnsLeavesCallerAlone(t *testing.T) {
	NeedRoot(t)
	// The process's first thread's namespace, which /proc/self/ns/net
	// shows and socket owners and namespace PIDs compare with. This test
	// does not lock its own thread, so the creating goroutine may run on
	// that first thread, as it would in the tool.
	self := func() string {
		l, err := os.Readlink("/proc/self/ns/net")
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	before := self()
	var ns string
	for i := 0; i < 32; i++ {
		ns = Netns(t, Name("irqp-lt-"))
		if got := self(); got != before {
			t.Fatalf("after creating %s: %s, was %s", ns, got, before)
		}
	}
	// InNetns runs fn inside the namespace and leaves the process where it
	// was, as many times as it is called.
	for i := 0; i < 32; i++ {
		var in string
		if err := kernel.InNetns(ns, func() error {
			var err error
			in, err = os.Readlink("/proc/thread-self/ns/net")
			return err
		}); err != nil {
			t.Fatal(err)
		}
		if in == before {
			t.Fatalf("InNetns(%s) ran in %s (process: %s)", ns, in, before)
		}
		if got := self(); got != before {
			t.Fatalf("after InNetns(%s): %s, was %s", ns, got, before)
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
