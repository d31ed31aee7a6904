package policy

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/irqpilot/irqpilot/internal/cpuset"
	"github.com/irqpilot/irqpilot/internal/host"
	"github.com/irqpilot/irqpilot/internal/load"
	"github.com/irqpilot/irqpilot/internal/plan"
)

// Options parameterise the policies. The zero value gives each policy its
// defaults.
type Options struct {
	// Housekeeping is dedicated-core's set of CPUs that take every movable
	// IRQ (default: the lowest online, non-isolated CPU — CPU 0 normally).
	Housekeeping cpuset.Set
	// AppCPUs overrides the CPUs a policy gives the application.
	AppCPUs *cpuset.Set
	// App selects the application to pin: "comm:NAME", "pid:N",
	// "unit:NAME.service" or "cgroup:PATH". Empty: nothing is pinned and the
	// plan only advises app_cpus.
	App string
	// AppPIDs are the processes App selects now, for auto to read their
	// measured threads: live callers resolve comm:, unit: and cgroup:
	// selectors (planning itself reads nothing); pid:N needs none.
	AppPIDs []int
	// Devices restricts the plan to these network interfaces (any kind,
	// veth included) and their lower devices: only their IRQs, queues and
	// coalescing are planned (see ScopeToDevices). Default (see
	// ScopeDefault): every physical NIC and the VLANs on them except the
	// interface that carries the default route, and only the IRQs of
	// device queues (network and storage).
	Devices []string
	// MachineWide keeps machine-wide settings (rps_sock_flow_entries,
	// irqbalance) in a plan restricted by Devices; without Devices it keeps
	// the IRQs that serve no device queue (serial ports, ACPI, a NIC's
	// control vector…), which the default scope leaves out.
	MachineWide bool
	// IncludeDefaultRoute keeps the interface that carries the default
	// route (and the devices below or above it) in a plan made without
	// Devices.
	IncludeDefaultRoute bool
	// IRQCores is per-queue's number of CPUs that take queue IRQs
	// (0: one per CPUsPerIRQCore usable CPUs, at least 1, at most one per queue).
	IRQCores int
	// CPUsPerIRQCore is per-queue's ratio of usable CPUs to IRQ CPUs and
	// the node size from which RPS spreads softirq work over a group
	// (default 8, which reproduces AWS Graviton memcached tuning's table).
	CPUsPerIRQCore int
	// SockFlowEntries overrides the RFS table size (dedicated-core 65536,
	// rps-spread 32768). Rounded down to a power of two.
	SockFlowEntries int
	// Irqbalance overrides the policy's irqbalance handling ("" keeps the
	// policy's default: stop it when the policy pins IRQs and it runs).
	Irqbalance plan.IrqbalanceMode
	// Load is the current per-CPU load, when known (auto uses it).
	Load *MeasuredLoad
}

// MeasuredLoad is what the policies may know about current load.
type MeasuredLoad struct {
	// IRQShare is, per CPU id, the fraction of time (0…1) spent in hardirq
	// and softirq context.
	IRQShare map[int]float64
	// Load is the whole measurement (per-CPU time split, per-IRQ rates,
	// softirqs, softnet, busy threads), when known. Auto decides from it.
	Load *load.Load
}

// Measured wraps a measurement for the policies.
func Measured(l *load.Load) *MeasuredLoad {
	if l == nil {
		return nil
	}
	share := map[int]float64{}
	for _, c := range l.CPUs {
		share[c.ID] = (c.IRQ + c.SoftIRQ) / 100
	}
	return &MeasuredLoad{IRQShare: share, Load: l}
}

// Policy builds a plan for a host. Policies are pure functions: they read
// only h and o.
type Policy func(h *host.Host, o Options) (*plan.Plan, error)

// Policies by name.
var Policies = map[string]Policy{
	"dedicated-core": DedicatedCore,
	"per-queue":      PerQueue,
	"colocate":       Colocate,
	"rps-spread":     RPSSpread,
	"auto":           Auto,
}

// PolicyNames lists the policies, sorted.
func PolicyNames() []string {
	return slices.Sorted(maps.Keys(Policies))
}

// Make runs the named policy and checks its output with the static rules.
func Make(name string, h *host.Host, o Options) (*plan.Plan, error) {
	pol, ok := Policies[name]
	if !ok {
		return nil, fmt.Errorf("unknown policy %q (known: %s)", name, strings.Join(PolicyNames(), ", "))
	}
	p, err := pol(h, o)
	if err != nil {
		return nil, fmt.Errorf("policy %s: %w", name, err)
	}
	if len(o.Devices) > 0 {
		plan.ScopeToDevices(p, h, o.Devices, o.MachineWide)
	} else {
		ScopeDefault(p, h, o)
	}
	// A setting this kernel cannot take is left out, with one note per
	// missing feature, so the plan applies on the machine it was made for.
	p.Notes = append(p.Notes, plan.DropUnsupported(p, h)...)
	attachPrediction(p, h, o)
	if err := plan.Check(p); err != nil {
		return nil, fmt.Errorf("policy %s produced an invalid plan (a bug): %w", name, err)
	}
	return p, nil
}
