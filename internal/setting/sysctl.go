package setting

import (
	"fmt"
	"regexp"
	"strconv"
)

// sysctl: an integer below /proc/sys/net/core. Today the only one planned is
// net.core.rps_sock_flow_entries (the RFS socket flow table; the kernel
// rounds it up to a power of two), which exists only in the initial network
// namespace.
type sysctl struct{ fileKind }

// SockFlowPath is the file of net.core.rps_sock_flow_entries.
const SockFlowPath = "proc/sys/net/core/rps_sock_flow_entries"

var sysctlPathRE = regexp.MustCompile(`^proc/sys/net/core/[a-z0-9_]+$`)

var sysctlKind = sysctl{fileKind{
	kind: KindSysctl,
	same: sameInt,
	check: func(c *Change) error {
		if !sysctlPathRE.MatchString(c.Path) {
			return fmt.Errorf("path %q is not a net.core sysctl", c.Path)
		}
		if c.Path == SockFlowPath {
			return checkIntRange(c.Value, MaxSockFlowEntries, "rps_sock_flow_entries")
		}
		return checkIntRange(c.Value, 1<<31-1, "value")
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
