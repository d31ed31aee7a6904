package kernel

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// NetNS identifies a network namespace: the inode of its nsfs file and, when
// `ip netns` named it, its name under /run/netns.
type NetNS struct {
	Inode uint64 `json:"inode"`
	Name  string `json:"name,omitempty"`
	// Cookie is the kernel's 64-bit namespace cookie (SO_NETNS_COOKIE,
	// Linux 5.14 and later; 0 where it cannot be read), never reused while
	// the system runs, unlike the inode.
	Cookie uint64 `json:"cookie,omitempty"`
	// Initial is true for the namespace of PID 1 (the host's).
	Initial bool `json:"-"`
}

// String names the namespace for people: its ip-netns name, or its inode.
func (n NetNS) String() string {
	if n.Name != "" {
		return n.Name
	}
	return fmt.Sprintf("net:[%d]", n.Inode)
}

// InitialNetNSOnly is a file that exists only in the initial network
// namespace.
const InitialNetNSOnly = "/proc/sys/net/core/rps_sock_flow_entries"

// RunNetNSDir is where `ip netns add` bind-mounts named namespaces.
const RunNetNSDir = "/run/netns"

// CurrentNetNS is the network namespace this process runs in, compared with
// PID 1's (the initial one). Some settings exist only in the initial
// namespace (net.core.rps_sock_flow_entries), and a device's queues are
// visible only inside its own namespace. When PID 1's namespace cannot be
// read (hidepid, a container's ptrace rules), the namespace is the initial
// one if net.core.rps_sock_flow_entries exists (the kernel registers it only
// there).
func (f *FS) CurrentNetNS() (NetNS, error) {
	if !f.IsLive() {
		return NetNS{Initial: true}, nil
	}
	self, err := nsInode("/proc/self/ns/net")
	if err != nil {
		return NetNS{Initial: true}, fmt.Errorf("network namespace: %w", err)
	}
	n := NetNS{Inode: self, Initial: true}
	if init, err := nsInode("/proc/1/ns/net"); err == nil {
		n.Initial = init == self
	} else if _, err := os.Stat(InitialNetNSOnly); err != nil {
		n.Initial = false
	}
	n.Name = netnsName(RunNetNSDir, self)
	n.Cookie = netnsCookie()
	return n, nil
}

// soNetnsCookie is SO_NETNS_COOKIE (asm-generic/socket.h; x86, arm and
// arm64 use the generic numbers), which golang.org/x/sys does not name.
const soNetnsCookie = 71

// netnsCookie is the cookie of the calling thread's network namespace, read
// from a socket made there (0 when the kernel has none).
func netnsCookie() uint64 {
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return 0
	}
	defer unix.Close(fd)
	var c uint64
	l := uint32(unsafe.Sizeof(c))
	if _, _, e := unix.Syscall6(unix.SYS_GETSOCKOPT, uintptr(fd), unix.SOL_SOCKET, soNetnsCookie, uintptr(unsafe.Pointer(&c)), uintptr(unsafe.Pointer(&l)), 0); e != 0 || l != 8 {
		return 0
	}
	return c
}

// Same reports whether n and o are one namespace. The inode alone does not
// say: the kernel reuses a deleted namespace's inode for the next one made.
// Where both carry a cookie it decides; otherwise the names under
// /run/netns must agree too when n has one.
func (n NetNS) Same(o NetNS) bool {
	if n.Inode != o.Inode {
		return false
	}
	if n.Cookie != 0 && o.Cookie != 0 {
		return n.Cookie == o.Cookie
	}
	return n.Name == "" || n.Name == o.Name
}

// NetNSAlive reports whether namespace n still exists: named under
// /run/netns or entered by some process, and the same namespace (Same), not
// a newer one that took its inode. In doubt (nothing can be read) it says
// yes, so that a caller marks nothing gone.
func (f *FS) NetNSAlive(n NetNS) bool {
	if !f.IsLive() {
		return true
	}
	paths, seen := netnsCandidates(n.Inode)
	if seen == 0 {
		return true
	}
	for _, p := range paths {
		c := NetNS{Inode: n.Inode, Name: netnsName(RunNetNSDir, n.Inode)}
		if n.Cookie != 0 {
			c.Cookie = cookieAt(p)
		}
		if n.Same(c) {
			return true
		}
	}
	return false
}

// netnsCandidates lists the /run/netns entries and /proc/PID/ns/net links
// whose namespace has inode ino, and how many namespace files it could
// read at all.
func netnsCandidates(ino uint64) (paths []string, seen int) {
	check := func(p string) {
		if i, err := nsInode(p); err == nil {
			seen++
			if i == ino {
				paths = append(paths, p)
			}
		}
	}
	if ents, err := os.ReadDir(RunNetNSDir); err == nil {
		for _, e := range ents {
			check(filepath.Join(RunNetNSDir, e.Name()))
		}
	}
	if procs, err := os.ReadDir("/proc"); err == nil {
		for _, p := range procs {
			if _, err := strconv.Atoi(p.Name()); err == nil {
				check("/proc/" + p.Name() + "/ns/net")
			}
		}
	}
	return paths, seen
}

// cookieAt is the cookie of the namespace of nsfs file p, read on a thread
// that enters it and returns (0 when it cannot be read).
func cookieAt(p string) uint64 {
	fh, err := os.Open(p)
	if err != nil {
		return 0
	}
	defer fh.Close()
	var c uint64
	_ = onOwnThread(func() error {
		if err := unix.Setns(int(fh.Fd()), unix.CLONE_NEWNET); err != nil {
			return err
		}
		c = netnsCookie()
		return nil
	})
	return c
}

// netnsName finds the /run/netns entry whose namespace has inode ino.
func netnsName(dir string, ino uint64) string {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return ""
	}
	for _, e := range ents {
		if i, err := nsInode(filepath.Join(dir, e.Name())); err == nil && i == ino {
			return e.Name()
		}
	}
	return ""
}

func nsInode(p string) (uint64, error) {
	id, err := nsID(p)
	return id[1], err
}

// nsID is the device and inode of an nsfs file: equal for two files of the
// same namespace. This is the one namespace lookup by inode in irqpilot.
func nsID(p string) ([2]uint64, error) {
	var st syscall.Stat_t
	if err := syscall.Stat(p, &st); err != nil {
		return [2]uint64{}, &os.PathError{Op: "stat", Path: p, Err: err}
	}
	return [2]uint64{uint64(st.Dev), st.Ino}, nil
}

// NetnsPIDs lists the processes running in the named network namespace
// (/run/netns/NAME), this one excepted: those whose /proc/PID/ns/net is
// the same nsfs file, as `ip netns pids` finds them. Live machine only.
func NetnsPIDs(name string) []int {
	want, err := nsID(filepath.Join(RunNetNSDir, name))
	if err != nil {
		return nil
	}
	ents, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		if id, err := nsID(filepath.Join("/proc", e.Name(), "ns/net")); err == nil && id == want {
			pids = append(pids, pid)
		}
	}
	return pids
}

// ProcNetNS is the network namespace of process pid (live only).
func (f *FS) ProcNetNS(pid int) (NetNS, error) {
	if !f.IsLive() {
		return NetNS{}, ErrUnsupported
	}
	ino, err := nsInode(fmt.Sprintf("/proc/%d/ns/net", pid))
	if err != nil {
		return NetNS{}, err
	}
	n := NetNS{Inode: ino, Name: netnsName(RunNetNSDir, ino)}
	if init, err := nsInode("/proc/1/ns/net"); err == nil {
		n.Initial = init == ino
	} else if self, err := f.CurrentNetNS(); err == nil && self.Inode == ino {
		n.Initial = self.Initial
	}
	return n, nil
}
