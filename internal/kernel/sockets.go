package kernel

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"sort"
	"strconv"
	"strings"

	"github.com/prometheus/procfs"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// Which process consumes a device's traffic: the sockets of every network
// namespace that a process lives in (netlink sock_diag, through
// vishvananda/netlink), mapped to their owners by socket inode
// (/proc/PID/fd, through prometheus/procfs). Like the process scans in
// process.go, nothing here is recorded for a capture, and nothing is
// written: the netlink sockets only dump.

// ListenSocket is one socket that receives traffic for a process: a TCP
// socket listening, or a UDP socket bound to a service port and not
// connected.
type ListenSocket struct {
	Proto string         `json:"proto"` // "tcp" or "udp"
	Addr  netip.AddrPort `json:"addr"`  // the local address; unspecified for every address
	// Accepted counts the established TCP connections whose local end is
	// this address and port, owned by the same process: the connections it
	// serves.
	Accepted int `json:"accepted"`
}

// SocketOwner is a process that owns listening sockets.
type SocketOwner struct {
	PID   int    `json:"pid"`
	Comm  string `json:"comm"`
	NetNS NetNS  `json:"netns"`
	// Listening are its listening sockets, by protocol and address.
	Listening []ListenSocket `json:"listening"`
	// Devices are the network devices (loopback left out) that carry the
	// traffic of its listening sockets: the devices holding the address it
	// listens on, every device with an address for a wildcard. Named as
	// seen from the caller's network namespace when they live there, or
	// when they are one end of a veth pair whose other end lives there (the
	// caller's end is named, "veth0"); otherwise "dev@netns".
	Devices []string `json:"devices"`
}

// Serves reports whether the process serves connections it accepted (TCP)
// or listens on a UDP service port: it is the receiving end of its
// sockets' traffic, not a client of someone else's.
func (o *SocketOwner) Serves() bool {
	for _, l := range o.Listening {
		if l.Accepted > 0 || l.Proto == "udp" {
			return true
		}
	}
	return false
}

// SocketOwners lists the processes that own listening sockets, in every
// network namespace a process of the machine lives in, by ascending PID.
// Only on the live machine (a snapshot holds no sockets) and as root (other
// users' descriptors are unreadable); namespaces that cannot be entered are
// left out.
func (f *FS) SocketOwners() ([]SocketOwner, error) {
	if !f.IsLive() {
		return nil, errors.New("sockets: only on the live machine")
	}
	if os.Geteuid() != 0 {
		// Other users' /proc/PID/fd cannot be read: a server would look
		// like a process with no socket.
		return nil, errors.New("sockets: the owners of other users' sockets are known only to root")
	}
	pfs, err := procfs.NewFS(f.Path("proc"))
	if err != nil {
		return nil, fmt.Errorf("sockets: %w", err)
	}
	procs, err := pfs.AllProcs()
	if err != nil {
		return nil, fmt.Errorf("sockets: %w", err)
	}
	self, err := nsInode("/proc/self/ns/net")
	if err != nil {
		return nil, fmt.Errorf("sockets: network namespace: %w", err)
	}
	// Socket inodes → owning processes, and the namespaces to dump.
	owners := map[uint64][]int{}
	nsOf := map[int]uint64{}
	nsPID := map[uint64]int{} // one process per namespace, to enter it by
	comm := map[int]string{}
	for _, p := range procs {
		targets, err := p.FileDescriptorTargets()
		if err != nil {
			continue // exited, or not ours to read
		}
		owns := false
		for _, t := range targets {
			s, ok := strings.CutPrefix(t, "socket:[")
			if !ok {
				continue
			}
			ino, err := strconv.ParseUint(strings.TrimSuffix(s, "]"), 10, 64)
			if err != nil {
				continue
			}
			if pids := owners[ino]; len(pids) == 0 || pids[len(pids)-1] != p.PID {
				owners[ino] = append(pids, p.PID)
			}
			owns = true
		}
		if !owns {
			continue
		}
		ns, err := nsInode(fmt.Sprintf("%s/%d/ns/net", f.Path("proc"), p.PID))
		if err != nil {
			continue
		}
		nsOf[p.PID] = ns
		if _, ok := nsPID[ns]; !ok {
			nsPID[ns] = p.PID
		}
		if c, err := p.Comm(); err == nil {
			comm[p.PID] = c
		}
	}
	lo, hi := ephemeralPorts(f)
	byPID := map[int]*SocketOwner{}
	for ns, pid := range nsPID {
		socks, devs, err := dumpNetNS(ns == self, fmt.Sprintf("%s/%d/ns/net", f.Path("proc"), pid))
		if err != nil {
			continue // gone, or not ours to enter
		}
		name := netnsName(RunNetNSDir, ns)
		for _, l := range listeners(socks, owners, lo, hi) {
			for _, p := range owners[l.inode] {
				if nsOf[p] != ns {
					continue // inherited across setns: counted where it lives
				}
				o := byPID[p]
				if o == nil {
					o = &SocketOwner{PID: p, Comm: comm[p], NetNS: NetNS{Inode: ns, Name: name, Initial: ns == self}}
					byPID[p] = o
				}
				o.Listening = append(o.Listening, l.ListenSocket)
				for _, d := range devs.carrying(l.Addr.Addr()) {
					if !containsString(o.Devices, d) {
						o.Devices = append(o.Devices, d)
					}
				}
			}
		}
	}
	out := make([]SocketOwner, 0, len(byPID))
	for _, o := range byPID {
		sort.Strings(o.Devices)
		out = append(out, *o)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].PID < out[j].PID })
	return out, nil
}

func containsString(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// ephemeralPorts is net.ipv4.ip_local_port_range: a UDP socket bound to a
// port in it is a client's, not a service's. The kernel's default when the
// file cannot be read.
func ephemeralPorts(f *FS) (lo, hi uint16) {
	lo, hi = 32768, 60999
	b, err := f.readUnrecorded("proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return lo, hi
	}
	v := strings.Fields(string(b))
	if len(v) == 2 {
		a, err1 := strconv.ParseUint(v[0], 10, 16)
		z, err2 := strconv.ParseUint(v[1], 10, 16)
		if err1 == nil && err2 == nil {
			return uint16(a), uint16(z)
		}
	}
	return lo, hi
}

type listener struct {
	ListenSocket
	inode uint64
}

// listeners picks the listening sockets out of one namespace's dump and
// counts the connections each accepted (established sockets on its local
// port, owned by the same processes).
func listeners(socks []*netlink.Socket, owners map[uint64][]int, lo, hi uint16) []listener {
	var out []listener
	for _, s := range socks {
		local := addrPort(s.ID.Source, s.ID.SourcePort)
		switch {
		case s.State == unix.IPPROTO_UDP: // marked by dumpNetNS, see there
			p := s.ID.SourcePort
			if p == 0 || (p >= lo && p <= hi) || s.ID.DestinationPort != 0 {
				continue // unbound, a client's port, or connected
			}
			out = append(out, listener{ListenSocket{Proto: "udp", Addr: local}, uint64(s.INode)})
		case s.State == tcpListen:
			out = append(out, listener{ListenSocket{Proto: "tcp", Addr: local}, uint64(s.INode)})
		}
	}
	for i := range out {
		l := &out[i]
		if l.Proto != "tcp" {
			continue
		}
		for _, s := range socks {
			if s.State != tcpEstablished || s.ID.SourcePort != l.Addr.Port() {
				continue
			}
			if a := addrPort(s.ID.Source, 0).Addr(); !l.Addr.Addr().IsUnspecified() && a != l.Addr.Addr() {
				continue
			}
			if sameOwner(owners[uint64(s.INode)], owners[l.inode]) {
				l.Accepted++
			}
		}
	}
	return out
}

// TCP states (include/net/tcp_states.h).
const (
	tcpEstablished = 1
	tcpListen      = 10
)

func sameOwner(a, b []int) bool {
	for _, x := range a {
		for _, y := range b {
			if x == y {
				return true
			}
		}
	}
	return false
}

func addrPort(ip net.IP, port uint16) netip.AddrPort {
	a, ok := netip.AddrFromSlice(ip)
	if !ok {
		a = netip.IPv4Unspecified()
	}
	return netip.AddrPortFrom(a.Unmap(), port)
}

// nsDevices are one namespace's devices by address, with the name each has
// for the caller.
type nsDevices struct {
	byAddr map[netip.Addr]string
	all    []string
}

// carrying names the devices that carry traffic for local address a.
func (d nsDevices) carrying(a netip.Addr) []string {
	if a.IsUnspecified() {
		return d.all
	}
	if n, ok := d.byAddr[a]; ok {
		return []string{n}
	}
	return nil
}

// dumpNetNS dumps the TCP and UDP sockets (IPv4 and IPv6) of the namespace
// at path, and its devices with addresses. UDP sockets come back with State
// set to IPPROTO_UDP (UDP has no states; the dump reports 7, "close", for
// every one) so that one slice carries both protocols.
func dumpNetNS(own bool, path string) ([]*netlink.Socket, nsDevices, error) {
	ns := netns.None()
	if !own {
		h, err := netns.GetFromPath(path)
		if err != nil {
			return nil, nsDevices{}, err
		}
		defer h.Close()
		ns = h
	}
	h, err := netlink.NewHandleAt(ns, unix.NETLINK_INET_DIAG, unix.NETLINK_ROUTE)
	if err != nil {
		return nil, nsDevices{}, err
	}
	defer h.Close()
	var out []*netlink.Socket
	for _, fam := range []uint8{unix.AF_INET, unix.AF_INET6} {
		tcp, err := h.SocketDiagTCP(fam)
		if err != nil && !errors.Is(err, netlink.ErrDumpInterrupted) {
			return nil, nsDevices{}, fmt.Errorf("%s: tcp sockets: %w", path, err)
		}
		out = append(out, tcp...)
		udp, err := h.SocketDiagUDP(fam)
		if err != nil && !errors.Is(err, netlink.ErrDumpInterrupted) {
			return nil, nsDevices{}, fmt.Errorf("%s: udp sockets: %w", path, err)
		}
		for _, s := range udp {
			s.State = unix.IPPROTO_UDP
		}
		out = append(out, udp...)
	}
	devs, err := devicesOf(h, own, ns)
	return out, devs, err
}

// devicesOf maps the namespace's addresses to device names (loopback left
// out), naming a veth whose peer lives in the caller's namespace by the
// peer's name there.
func devicesOf(h *netlink.Handle, own bool, ns netns.NsHandle) (nsDevices, error) {
	d := nsDevices{byAddr: map[netip.Addr]string{}}
	links, err := h.LinkList()
	if err != nil {
		return d, fmt.Errorf("devices: %w", err)
	}
	name := map[int]string{}
	for _, l := range links {
		a := l.Attrs()
		if a.Flags&net.FlagLoopback != 0 {
			continue
		}
		name[a.Index] = a.Name
	}
	renamed := map[int]bool{}
	if !own {
		// The caller's veth ends whose peers are in ns: their link
		// attributes name the peer's index and namespace id.
		if id, err := netlink.GetNetNsIdByFd(int(ns)); err == nil && id >= 0 {
			if mine, err := netlink.LinkList(); err == nil {
				for _, l := range mine {
					a := l.Attrs()
					if _, ok := l.(*netlink.Veth); ok && a.NetNsID == id {
						if _, in := name[a.ParentIndex]; in {
							name[a.ParentIndex] = a.Name
							renamed[a.ParentIndex] = true
						}
					}
				}
			}
		}
		nsName := netnsName(RunNetNSDir, mustInode(ns))
		if nsName == "" {
			nsName = fmt.Sprintf("net:[%d]", mustInode(ns))
		}
		for i, n := range name {
			if !renamed[i] {
				name[i] = n + "@" + nsName
			}
		}
	}
	addrs, err := h.AddrList(nil, netlink.FAMILY_ALL)
	if err != nil {
		return d, fmt.Errorf("addresses: %w", err)
	}
	for _, a := range addrs {
		n, ok := name[a.LinkIndex]
		if !ok {
			continue
		}
		if ip, ok := netip.AddrFromSlice(a.IP); ok {
			d.byAddr[ip.Unmap()] = n
		}
		if !containsString(d.all, n) {
			d.all = append(d.all, n)
		}
	}
	return d, nil
}

func mustInode(ns netns.NsHandle) uint64 {
	var st unix.Stat_t
	if err := unix.Fstat(int(ns), &st); err != nil {
		return 0
	}
	return st.Ino
}
