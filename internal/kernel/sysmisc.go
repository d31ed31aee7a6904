package kernel

import (
	"fmt"
	"strconv"

	"github.com/irqpilot/irqpilot/internal/cpuset"
)

// Single-value kernel files other packages read: each a typed method, so
// their paths stay here (the door test holds the rest of the tree to it).

// Hostname reads /proc/sys/kernel/hostname.
func (f *FS) Hostname() (string, error) { return f.readString("proc/sys/kernel/hostname") }

// OSRelease reads /proc/sys/kernel/osrelease (uname -r).
func (f *FS) OSRelease() (string, error) { return f.readString("proc/sys/kernel/osrelease") }

// NetCorePath is the path of the net.core sysctl name, relative to the root
// ("proc/sys/net/core/busy_poll").
func NetCorePath(name string) string { return "proc/sys/net/core/" + name }

// NetCore reads the integer net.core sysctl name (rps_sock_flow_entries,
// busy_read, busy_poll).
func (f *FS) NetCore(name string) (int64, error) { return f.readInt(NetCorePath(name)) }

// IfIndex reads a network device's interface index
// (/sys/class/net/DEV/ifindex).
func (f *FS) IfIndex(dev string) (int, error) {
	p := "sys/class/net/" + dev + "/ifindex"
	s, err := f.readString(p)
	if err != nil {
		return 0, err
	}
	return parseIfIndex(p, s)
}

func parseIfIndex(p, s string) (int, error) {
	n, err := strconv.Atoi(s)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("/%s: %q is not an interface index", p, s)
	}
	return n, nil
}

// CPUDir is the directory of the CPUs' sysfs files, relative to the root.
const CPUDir = "sys/devices/system/cpu"

// OnlineCPUs reads /sys/devices/system/cpu/online.
func (f *FS) OnlineCPUs() (cpuset.Set, error) { return f.readCPUSet(CPUDir + "/online") }

// PossibleCPUs reads /sys/devices/system/cpu/possible.
func (f *FS) PossibleCPUs() (cpuset.Set, error) { return f.readCPUSet(CPUDir + "/possible") }

func (f *FS) readCPUSet(p string) (cpuset.Set, error) {
	s, err := f.readString(p)
	if err != nil {
		return cpuset.Set{}, err
	}
	set, err := cpuset.Parse(s)
	if err != nil {
		return cpuset.Set{}, fmt.Errorf("/%s: %w", p, err)
	}
	return set, nil
}
