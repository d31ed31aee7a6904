package setting

import (
	"fmt"
	"strconv"
	"strings"
)

// sysctl: an integer below /proc/sys/net/core, one of the few irqpilot
// plans (sysctlLimits): net.core.rps_sock_flow_entries (the RFS socket flow
// table; the kernel rounds it up to a power of two) and the busy-polling
// defaults net.core.busy_read and net.core.busy_poll (µs). All three exist
// only in the initial network namespace and are machine-wide.
type sysctl struct{ fileKind }

// SockFlowPath is the file of net.core.rps_sock_flow_entries.
const SockFlowPath = "proc/sys/net/core/rps_sock_flow_entries"

// BusyReadPath and BusyPollPath are net.core.busy_read (µs a blocking read
// busy-polls the device queue) and net.core.busy_poll (µs poll/select/epoll
// busy-poll); 0 turns busy polling off.
const (
	BusyReadPath = "proc/sys/net/core/busy_read"
	BusyPollPath = "proc/sys/net/core/busy_poll"
)

// MaxBusyPollUsecs bounds busy_read and busy_poll for a plan: 100 ms of
// spinning per call (the kernel's documentation suggests 50 µs).
const MaxBusyPollUsecs = 100_000

// sysctlLimit is one planned sysctl: irqpilot's cap on a new value and the
// kernel's own limit (for a journal's values).
type sysctlLimit struct {
	name              string
	newMax, kernelMax int64
}

var sysctlLimits = map[string]sysctlLimit{
	SockFlowPath: {"rps_sock_flow_entries", MaxSockFlowEntries, 1 << 29},
	BusyReadPath: {"busy_read", MaxBusyPollUsecs, 1<<31 - 1},
	BusyPollPath: {"busy_poll", MaxBusyPollUsecs, 1<<31 - 1},
}

// Each sysctl is its own feature: RFS's socket table needs CONFIG_RPS, the
// busy-polling defaults CONFIG_NET_RX_BUSY_POLL.
var sysctlFeatures = map[string]*feature{
	SockFlowPath: {name: "RFS socket flow table", probe: SockFlowPath, glob: SockFlowPath, evidence: "proc/sys/net/core", initialNetNS: true},
	BusyReadPath: {name: "busy polling of reads", probe: BusyReadPath, glob: BusyReadPath, evidence: "proc/sys/net/core", initialNetNS: true},
	BusyPollPath: {name: "busy polling of poll and epoll", probe: BusyPollPath, glob: BusyPollPath, evidence: "proc/sys/net/core", initialNetNS: true},
}

func (sysctl) features() []*feature {
	return []*feature{sysctlFeatures[SockFlowPath], sysctlFeatures[BusyReadPath], sysctlFeatures[BusyPollPath]}
}
func (sysctl) needs(c *Change) *feature { return sysctlFeatures[c.Path] }

func sysctlPaths() string {
	return strings.Join([]string{SockFlowPath, BusyReadPath, BusyPollPath}, ", ")
}

var sysctlKind = sysctl{fileKind{
	kind: KindSysctl,
	same: sameInt,
	// Only the sysctls irqpilot plans: a journal naming any other is refused.
	check: func(c *Change) error {
		if _, ok := sysctlLimits[c.Path]; !ok {
			return fmt.Errorf("path %q is not a net.core sysctl irqpilot sets (%s)", c.Path, sysctlPaths())
		}
		return nil
	},
	scope: func(*Change) Scope { return Scope{IRQ: -1, MachineWide: true} },
	globs: []string{SockFlowPath, BusyReadPath, BusyPollPath},
}}

// Check: the file rules of fileKind, then the value against that sysctl's
// cap.
func (s sysctl) Check(c *Change) error {
	if err := s.fileKind.Check(c); err != nil {
		return err
	}
	l := sysctlLimits[c.Path]
	if err := checkIntRange(c.Value, l.newMax, l.name); err != nil {
		return fmt.Errorf("%s (%s): %w", c.Target, s.kind, err)
	}
	return nil
}

// CheckRecorded: the file rules, and both values within the kernel's limit
// of that sysctl (not irqpilot's caps).
func (s sysctl) CheckRecorded(c *Change) error {
	if err := s.fileKind.CheckRecorded(c); err != nil {
		return err
	}
	l := sysctlLimits[c.Path]
	return recordedValues(c, func(name, v string) error {
		if err := checkIntRange(v, l.kernelMax, l.name); err != nil {
			return fmt.Errorf("%s (%s): %s: %w", c.Target, s.kind, name, err)
		}
		return nil
	})
}

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

// BusyRead is the change that sets net.core.busy_read (µs).
func BusyRead(usecs int, reason string) Change {
	return Change{Kind: KindSysctl, Target: "net.core.busy_read", Path: BusyReadPath, Value: strconv.Itoa(usecs), Reason: reason}
}

// BusyPoll is the change that sets net.core.busy_poll (µs).
func BusyPoll(usecs int, reason string) Change {
	return Change{Kind: KindSysctl, Target: "net.core.busy_poll", Path: BusyPollPath, Value: strconv.Itoa(usecs), Reason: reason}
}
