package testbed

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/irqpilot/irqpilot/internal/kernel"
	"github.com/safchain/ethtool"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// The testbed's namespaces, devices, addresses and features are made with
// netlink (vishvananda/netlink, netns) and the ethtool ioctl
// (safchain/ethtool) instead of ip(8) and ethtool(8): errors name the
// object, and nothing depends on the tools' output format. `ip netns exec`
// stays where a process is started inside a namespace (see start).

// inNetns runs fn with a netlink handle (route and sock_diag) inside the
// named namespace.
func inNetns(name string, fn func(h *netlink.Handle) error) error {
	ns, err := netns.GetFromName(name)
	if err != nil {
		return fmt.Errorf("namespace %s: %w", name, err)
	}
	defer ns.Close()
	h, err := netlink.NewHandleAt(ns, unix.NETLINK_ROUTE, unix.NETLINK_INET_DIAG)
	if err != nil {
		return fmt.Errorf("namespace %s: netlink: %w", name, err)
	}
	defer h.Close()
	return fn(h)
}

// addVeth creates the veth pair with queues rx and tx queues per end: dev
// in namespace ns, peer in peerNS.
func addVeth(ns, dev, peerNS, peer string, queues int) error {
	pns, err := netns.GetFromName(peerNS)
	if err != nil {
		return fmt.Errorf("namespace %s: %w", peerNS, err)
	}
	defer pns.Close()
	return inNetns(ns, func(h *netlink.Handle) error {
		la := netlink.NewLinkAttrs()
		la.Name = dev
		la.NumTxQueues, la.NumRxQueues = queues, queues
		v := &netlink.Veth{LinkAttrs: la, PeerName: peer, PeerNamespace: netlink.NsFd(pns)}
		v.PeerNumTxQueues, v.PeerNumRxQueues = uint32(queues), uint32(queues)
		if err := h.LinkAdd(v); err != nil {
			return fmt.Errorf("veth %s (%s) / %s (%s): %w", dev, ns, peer, peerNS, err)
		}
		return nil
	})
}

// linkUp gives dev in namespace ns the address addr/24 and sets it and the
// namespace's loopback up.
func linkUp(ns, dev, addr string) error {
	return inNetns(ns, func(h *netlink.Handle) error {
		a, err := netlink.ParseAddr(addr + "/24")
		if err != nil {
			return err
		}
		l, err := h.LinkByName(dev)
		if err != nil {
			return fmt.Errorf("%s in %s: %w", dev, ns, err)
		}
		if err := h.AddrAdd(l, a); err != nil {
			return fmt.Errorf("%s in %s: address %s: %w", dev, ns, a, err)
		}
		lo, err := h.LinkByName("lo")
		if err != nil {
			return fmt.Errorf("lo in %s: %w", ns, err)
		}
		for _, x := range []netlink.Link{l, lo} {
			if err := h.LinkSetUp(x); err != nil {
				return fmt.Errorf("%s in %s: up: %w", x.Attrs().Name, ns, err)
			}
		}
		return nil
	})
}

// groFeatures are the features GRO turns on (see Options.GRO), by the
// kernel's names (ETH_SS_FEATURES strings; `ethtool -k` prints
// generic-receive-offload for rx-gro).
var groFeatures = map[string]bool{"rx-gro": true, "rx-udp-gro-forwarding": true}

// setFeatures turns features of dev in namespace ns on or off and reads
// them back. The ethtool ioctl acts in the namespace of its socket, so the
// socket is opened inside ns (kernel.InNetns).
func setFeatures(ns, dev string, features map[string]bool) error {
	var et *ethtool.Ethtool
	if err := kernel.InNetns(ns, func() (err error) { et, err = ethtool.NewEthtool(); return err }); err != nil {
		return fmt.Errorf("ethtool socket in %s: %w", ns, err)
	}
	defer et.Close()
	// A change the ioctl accepted has once read back unchanged on a
	// fresh veth (rx-gro, under a loaded make test): the kernel keeps a
	// wanted feature it could not turn on yet without an error. So the
	// change is made again, a bounded number of times, before it fails.
	var mismatch error
	for try := 0; try < 3; try++ {
		if try > 0 {
			time.Sleep(200 * time.Millisecond)
		}
		if err := et.Change(dev, features); err != nil {
			return fmt.Errorf("%s in %s: ethtool features %v: %w", dev, ns, features, err)
		}
		got, err := et.Features(dev)
		if err != nil {
			return fmt.Errorf("%s in %s: read features back: %w", dev, ns, err)
		}
		mismatch = nil
		for f, on := range features {
			if got[f] != on {
				mismatch = fmt.Errorf("%s in %s: feature %s reads %v after setting %v (%d tries)", dev, ns, f, got[f], on, try+1)
			}
		}
		if mismatch == nil {
			return nil
		}
	}
	return mismatch
}

// listening reports whether a socket of proto (unix.IPPROTO_TCP: a
// listening one; unix.IPPROTO_UDP: a bound one) is on addr:port in
// namespace ns, from the kernel's socket table (sock_diag).
func listening(ns string, proto int, addr string, port int) (bool, error) {
	want := net.ParseIP(addr)
	found := false
	err := inNetns(ns, func(h *netlink.Handle) error {
		var socks []*netlink.Socket
		var err error
		if proto == unix.IPPROTO_UDP {
			socks, err = h.SocketDiagUDP(unix.AF_INET)
		} else {
			socks, err = h.SocketDiagTCP(unix.AF_INET)
		}
		if err != nil && !errors.Is(err, netlink.ErrDumpInterrupted) {
			return err
		}
		for _, s := range socks {
			if (proto == unix.IPPROTO_UDP || s.State == netlink.TCP_LISTEN) &&
				int(s.ID.SourcePort) == port && s.ID.Source.Equal(want) {
				found = true
			}
		}
		return nil
	})
	return found, err
}

func nsExists(ns string) bool {
	_, err := os.Stat(filepath.Join(kernel.RunNetNSDir, ns))
	return err == nil
}
