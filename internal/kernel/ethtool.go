package kernel

import (
	"fmt"
	"runtime"
	"unsafe"

	"github.com/safchain/ethtool"
	"golang.org/x/sys/unix"
)

// Ethtool issues SIOCETHTOOL ioctls (what ethtool(8) does without netlink)
// on one socket. The ioctls act on the network namespace the socket was
// created in, that is the calling thread's at OpenEthtool: a caller
// reading another namespace must lock its OS thread and enter that
// namespace first.
//
// Errors from the ioctls are the kernel's errno as is
// (unix.EOPNOTSUPP: "operation not supported"), so that callers can test
// them with errors.Is and show the driver's refusal verbatim.
//
// The request structures and command numbers are safchain/ethtool's, but
// the ioctl itself is issued here: that library puts the address of a
// stack variable into the request as a uintptr, so when the goroutine's
// stack moves before the syscall the kernel writes into stale memory (seen
// under -race as an empty driver name). Here every buffer the kernel fills
// lives on the heap and is referenced by a real pointer.
type Ethtool struct {
	fd int
}

// OpenEthtool opens the socket the ioctls go through; Close it after use.
func OpenEthtool() (*Ethtool, error) {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, unix.IPPROTO_IP)
	if err != nil {
		return nil, err
	}
	return &Ethtool{fd: fd}, nil
}

// Close closes the socket.
func (e *Ethtool) Close() error { return unix.Close(e.fd) }

// Driver returns the driver name of interface name (ETHTOOL_GDRVINFO,
// ethtool -i).
func (e *Ethtool) Driver(name string) (string, error) {
	d, err := unix.IoctlGetEthtoolDrvinfo(e.fd, name)
	if err != nil {
		return "", err
	}
	return unix.ByteSliceToString(d.Driver[:]), nil
}

// Channels returns the channel counts of interface name (ETHTOOL_GCHANNELS,
// ethtool -l).
func (e *Ethtool) Channels(name string) (*ethtool.Channels, error) {
	c := &ethtool.Channels{Cmd: ethtool.ETHTOOL_GCHANNELS}
	if err := e.ioctl(name, unsafe.Pointer(c)); err != nil {
		return nil, err
	}
	return c, nil
}

// Coalesce returns the coalescing settings of interface name
// (ETHTOOL_GCOALESCE, ethtool -c).
func (e *Ethtool) Coalesce(name string) (*ethtool.Coalesce, error) {
	k := &ethtool.Coalesce{Cmd: ethtool.ETHTOOL_GCOALESCE}
	if err := e.ioctl(name, unsafe.Pointer(k)); err != nil {
		return nil, err
	}
	return k, nil
}

// SetCoalesce writes every field of k as the coalescing settings of
// interface name (ETHTOOL_SCOALESCE, ethtool -C). k should be what Coalesce
// returned with some fields changed: the driver takes all of them.
func (e *Ethtool) SetCoalesce(name string, k *ethtool.Coalesce) error {
	req := *k // on the heap: its address goes into the request
	req.Cmd = ethtool.ETHTOOL_SCOALESCE
	return e.ioctl(name, unsafe.Pointer(&req))
}

// PerQueue issues an ETHTOOL_PERQUEUE request (struct ethtool_per_queue_op:
// cmd, sub_command, queue_mask, then room for one answer per queue), which
// the kernel fills in place. Building and reading req is the caller's job.
func (e *Ethtool) PerQueue(name string, req []byte) error {
	if len(req) < 8 {
		return fmt.Errorf("per-queue request for %s: %d bytes, want at least a header", name, len(req))
	}
	return e.ioctl(name, unsafe.Pointer(&req[0]))
}

// ifreqData is struct ifreq with the ifr_data member of its union: 16 bytes
// of name, then a 24-byte union on 64-bit platforms (16 on 32-bit).
type ifreqData struct {
	name [unix.IFNAMSIZ]byte
	data unsafe.Pointer
	_    [24 - unsafe.Sizeof(uintptr(0))]byte
}

// ioctl issues SIOCETHTOOL on interface name with the request at data
// (a heap object whose first field is the ethtool command).
func (e *Ethtool) ioctl(name string, data unsafe.Pointer) error {
	if len(name) >= unix.IFNAMSIZ {
		return fmt.Errorf("interface name %q too long", name)
	}
	ifr := &ifreqData{data: data}
	copy(ifr.name[:], name)
	_, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(e.fd), ethtool.SIOCETHTOOL, uintptr(unsafe.Pointer(ifr)))
	runtime.KeepAlive(ifr)
	runtime.KeepAlive(data)
	if errno != 0 {
		return errno
	}
	return nil
}
