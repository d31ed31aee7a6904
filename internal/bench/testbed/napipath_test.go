package testbed

import (
	"net/netip"
	"testing"

	"github.com/irqpilot/irqpilot/internal/kernel"
	"github.com/irqpilot/irqpilot/internal/livetest"
	"golang.org/x/sys/unix"
)

// socketIn creates a UDP socket inside network namespace ns (a socket
// stays in the namespace it was created in).
func socketIn(t *testing.T, ns string) int {
	t.Helper()
	var fd int
	if err := kernel.InNetns(ns, func() (err error) {
		fd, err = unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	return fd
}

// incomingNAPI sends a few datagrams from the client namespace to the
// server and returns the NAPI id the server socket saw them arrive on
// (SO_INCOMING_NAPI_ID; 0: not through a NAPI instance).
func incomingNAPI(t *testing.T, tb *Testbed) int {
	t.Helper()
	srv, cli := socketIn(t, tb.ServerNS), socketIn(t, tb.ClientNS)
	addr := netip.MustParseAddr(ServerAddr).As4()
	if err := unix.Bind(srv, &unix.SockaddrInet4{Port: 9300, Addr: addr}); err != nil {
		t.Fatal(err)
	}
	if err := unix.Connect(cli, &unix.SockaddrInet4{Port: 9300, Addr: addr}); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 100)
	for range 20 {
		if _, err := unix.Write(cli, buf); err != nil {
			t.Fatal(err)
		}
		if _, _, err := unix.Recvfrom(srv, buf, 0); err != nil {
			t.Fatal(err)
		}
	}
	id, err := unix.GetsockoptInt(srv, unix.SOL_SOCKET, unix.SO_INCOMING_NAPI_ID)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// With GRO (Options.GRO) UDP from a local socket is received through the
// server veth's NAPI instance — which needs rx-udp-gro-forwarding besides
// GRO (veth_skb_is_eligible_for_gro) — so busy polling and the NAPI knobs
// act on it; without GRO it takes the per-CPU backlog (no NAPI id).
func TestUDPTakesNAPIPathWithGRO(t *testing.T) {
	livetest.NeedRoot(t, "ip")
	for _, gro := range []bool{true, false} {
		tb, err := Up(Options{FS: live, Queues: 1, GRO: gro, StateDir: t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		id := incomingNAPI(t, tb)
		if err := tb.Down(); err != nil {
			t.Error(err)
		}
		if gro && id == 0 {
			t.Errorf("GRO on: UDP datagrams did not arrive through the veth's NAPI (SO_INCOMING_NAPI_ID 0)")
		}
		if !gro && id != 0 {
			t.Errorf("GRO off: NAPI id %d, want 0 (backlog)", id)
		}
		t.Logf("gro %v: SO_INCOMING_NAPI_ID %d", gro, id)
	}
}
