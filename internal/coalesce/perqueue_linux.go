//go:build linux

package coalesce

import (
	"fmt"
	"runtime"
	"unsafe"

	"github.com/safchain/ethtool"
	"golang.org/x/sys/unix"
)

// ifreqData is struct ifreq with its ifr_data member (host.ethtoolIoctl has
// the same; that one is not exported).
type ifreqData struct {
	name [unix.IFNAMSIZ]byte
	data unsafe.Pointer
	_    [24 - unsafe.Sizeof(uintptr(0))]byte
}

// PerQueueCoalesce reads the coalescing of the given queues of interface
// name with ETHTOOL_PERQUEUE/ETHTOOL_GCOALESCE (needs CAP_NET_ADMIN; drivers
// without get_per_queue_coalesce answer EOPNOTSUPP). It acts in the calling
// thread's network namespace.
func PerQueueCoalesce(name string, queues []int) ([]QueueCoalesce, error) {
	if len(name) >= unix.IFNAMSIZ {
		return nil, fmt.Errorf("interface name %q too long", name)
	}
	buf, err := PerQueueRequest(ethtool.ETHTOOL_GCOALESCE, queues)
	if err != nil {
		return nil, err
	}
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, unix.IPPROTO_IP)
	if err != nil {
		return nil, err
	}
	defer unix.Close(fd)
	ifr := &ifreqData{data: unsafe.Pointer(&buf[0])}
	copy(ifr.name[:], name)
	_, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), ethtool.SIOCETHTOOL, uintptr(unsafe.Pointer(ifr)))
	runtime.KeepAlive(ifr)
	runtime.KeepAlive(buf)
	if errno != 0 {
		return nil, fmt.Errorf("ethtool --per-queue %s --show-coalesce: %w", name, errno)
	}
	return ParsePerQueueCoalesce(buf)
}
