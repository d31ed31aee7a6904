package livetest

import (
	"crypto/rand"
	"encoding/hex"
	"testing"

	"github.com/irqpilot/irqpilot/internal/kernel"
	"github.com/irqpilot/irqpilot/internal/livetest/liveroot"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
)

// NeedRoot skips a live test: one that is not run as root, one run with
// -short, and one whose tools (looked up on PATH) are not installed. It is
// liveroot.Need, which host's tests call (they cannot import livetest).
func NeedRoot(t testing.TB, tools ...string) {
	t.Helper()
	liveroot.Need(t, tools...)
}

// Name is prefix with a random hex suffix: a namespace or device name no
// other test (or other run of this one) uses at the same time. Interface
// names must stay within 15 bytes, so keep prefix short.
func Name(prefix string) string {
	var b [3]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err)
	}
	return prefix + hex.EncodeToString(b[:])
}

// Netns creates a named network namespace (as `ip netns add` does, under
// /run/netns) whose loopback is up, and deletes it when the test ends.
// The calling goroutine's namespace is left as it was.
func Netns(t testing.TB, name string) string {
	t.Helper()
	// Registered first, so a namespace half made is removed too.
	t.Cleanup(func() {
		// Deleting the name lets the kernel free the namespace once the
		// last process in it exits.
		if err := kernel.DelNetns(name); err != nil {
			t.Logf("netns %s: delete: %v", name, err)
		}
	})
	if err := kernel.AddNetns(name); err != nil {
		t.Fatalf("netns %s: %v", name, err)
	}
	h, err := netns.GetFromName(name)
	if err != nil {
		t.Fatalf("netns %s: %v", name, err)
	}
	nh, err := netlink.NewHandleAt(h)
	h.Close()
	if err != nil {
		t.Fatalf("netns %s: netlink: %v", name, err)
	}
	defer nh.Close()
	lo, err := nh.LinkByName("lo")
	if err == nil {
		err = nh.LinkSetUp(lo)
	}
	if err != nil {
		t.Fatalf("netns %s: lo up: %v", name, err)
	}
	return name
}

// Veth adds a veth pair name/peer with queues RX and TX queues on each end
// (0: the kernel's default, one per possible CPU for veth, as `ip link add`
// without numrxqueues gives), both ends in the named namespace ns and up.
// Removing the namespace removes the pair.
func Veth(t testing.TB, ns, name, peer string, queues int) {
	t.Helper()
	h, err := netns.GetFromName(ns)
	if err != nil {
		t.Fatalf("veth %s: namespace %s: %v", name, ns, err)
	}
	defer h.Close()
	nh, err := netlink.NewHandleAt(h)
	if err != nil {
		t.Fatalf("veth %s: netlink in %s: %v", name, ns, err)
	}
	defer nh.Close()
	la := netlink.NewLinkAttrs()
	la.Name = name
	la.NumTxQueues, la.NumRxQueues = queues, queues
	v := &netlink.Veth{LinkAttrs: la, PeerName: peer}
	v.PeerNumTxQueues, v.PeerNumRxQueues = uint32(queues), uint32(queues)
	if err := nh.LinkAdd(v); err != nil {
		t.Fatalf("veth %s/%s in %s: %v", name, peer, ns, err)
	}
	for _, n := range []string{name, peer} {
		l, err := nh.LinkByName(n)
		if err == nil {
			err = nh.LinkSetUp(l)
		}
		if err != nil {
			t.Fatalf("veth %s in %s: up: %v", n, ns, err)
		}
	}
}
