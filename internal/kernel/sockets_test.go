package kernel

import (
	"net"
	"testing"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// listeners tells a service from a client by its sockets: a TCP listener
// counts the established connections on its port that its owner holds (a
// client's connection to the same port, held by another process, is not
// its), and a UDP socket is a service's only when bound to a port outside
// the ephemeral range and not connected.
func TestListenersServiceVersusClient(t *testing.T) {
	ip := net.ParseIP("10.0.0.2").To4()
	peer := net.ParseIP("10.0.0.1").To4()
	sock := func(state uint8, src net.IP, sport uint16, dst net.IP, dport uint16, ino uint32) *netlink.Socket {
		return &netlink.Socket{State: state, INode: ino, ID: netlink.SocketID{Source: src, SourcePort: sport, Destination: dst, DestinationPort: dport}}
	}
	socks := []*netlink.Socket{
		sock(tcpListen, net.IPv4zero.To4(), 11211, net.IPv4zero.To4(), 0, 1), // server listens on every address
		sock(tcpEstablished, ip, 11211, peer, 40001, 2),                      // accepted by the server
		sock(tcpEstablished, ip, 11211, peer, 40002, 3),                      // accepted by the server
		sock(tcpEstablished, peer, 40001, ip, 11211, 4),                      // the client's end (same namespace)
		sock(unix.IPPROTO_UDP, ip, 53, net.IPv4zero.To4(), 0, 5),             // UDP service
		sock(unix.IPPROTO_UDP, ip, 45000, net.IPv4zero.To4(), 0, 6),          // ephemeral port: a client's
		sock(unix.IPPROTO_UDP, ip, 9000, peer, 9000, 7),                      // connected: a client's
		sock(tcpEstablished, ip, 11211, peer, 40003, 8),                      // another process's socket on the port
	}
	owners := map[uint64][]int{1: {10}, 2: {10}, 3: {10}, 4: {20}, 5: {30}, 6: {20}, 7: {20}, 8: {40}}
	got := listeners(socks, owners, 32768, 60999)
	if len(got) != 2 {
		t.Fatalf("listeners %+v, want the TCP listener and the UDP service", got)
	}
	if l := got[0]; l.Proto != "tcp" || l.Addr.String() != "0.0.0.0:11211" || l.Accepted != 2 || l.inode != 1 {
		t.Errorf("tcp listener %+v", l)
	}
	if l := got[1]; l.Proto != "udp" || l.Addr.String() != "10.0.0.2:53" || l.inode != 5 {
		t.Errorf("udp service %+v", l)
	}
	if o := (SocketOwner{Listening: []ListenSocket{{Proto: "tcp", Accepted: 0}}}); o.Serves() {
		t.Error("a listener with no connection serves nothing yet")
	}
}
