package setting

import (
	"fmt"
	"strconv"
)

// sysctl: an integer below /proc/sys/net/core. Today the only one planned is
// net.core.rps_sock_flow_entries (the RFS socket flow table; the kernel
// rounds it up to a power of two), which exists only in the initial network
// namespace.
type sysctl struct{ fileKind }

// SockFlowPath is the file of net.core.rps_sock_flow_entries.
const SockFlowPath = "proc/sys/net/core/rps_sock_flow_entries"

var sysctlKind = sysctl{fileKind{
	kind: KindSysctl,
	same: sameInt,
	// Only the sysctls irqpilot plans: a journal naming any other is refused.
	check: func(c *Change) error {
		if c.Path != SockFlowPath {
			return fmt.Errorf("path %q is not a net.core sysctl irqpilot sets (%s)", c.Path, SockFlowPath)
		}
		return nil
	},
	limit: func(v string, recorded bool) error {
		if recorded {
			return checkIntRange(v, 1<<29, "rps_sock_flow_entries") // the kernel's own limit
		}
		return checkIntRange(v, MaxSockFlowEntries, "rps_sock_flow_entries")
	},
	scope: func(*Change) Scope { return Scope{IRQ: -1, MachineWide: true} },
	globs: []string{SockFlowPath},
}}

func (s sysctl) Expected(c *Change) string {
	if c.Path == SockFlowPath {
		return roundPow2(c.Value)
	}
	return c.Value
}

// SockFlowEntries is the change that sizes the RFS socket flow table.
func SockFlowEntries(n int, reason string) Change {
	return Change{Kind: KindSysctl, Target: "net.core.rps_sock_flow_entries", Path: SockFlowPath,
		Value: strconv.Itoa(n), Reason: reason}
}
