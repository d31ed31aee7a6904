package kernel

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// NetNS identifies a network namespace: the inode of its nsfs file and, when
// `ip netns` named it, its name under /run/netns.
type NetNS struct {
	Inode uint64 `json:"inode"`
	Name  string `json:"name,omitempty"`
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
	return n, nil
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
	fi, err := os.Stat(p)
	if err != nil {
		return 0, err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, fmt.Errorf("%s: no inode", p)
	}
	return st.Ino, nil
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
