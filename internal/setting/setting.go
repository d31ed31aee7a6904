// Package setting is the registry of the kinds of kernel setting irqpilot
// changes. A Change is one desired setting with everything the pipeline
// learns about it (what is in force, what happened); a Handler, one per kind
// and one file per kind, knows how to read, write, compare, read back and
// restore values of that kind, which kernel objects may hold one (so a
// journal entry can be validated before revert acts on it), and what a
// change belongs to (so bench can keep a measurement to the devices under
// test).
//
// Layering: setting sits below plan (whose resolver builds Changes through
// the constructors here; plan imports setting, never the reverse) and apply
// (the converge pipeline that drives the handlers), and above kernel, the
// only package that touches the machine.
//
// To add a kind: write one file with a Handler (embed fileKind for a plain
// kernel file), add it to the list in registry.go, and test it.
package setting

import (
	"fmt"

	"github.com/irqpilot/irqpilot/internal/kernel"
)

// Kind names a kind of setting. The names are stable: they are stored in
// journals and printed in every --json output.
type Kind string

// Kinds of setting. Plan-level kinds (KindApp; KindIrqbalance with value
// "banned_cpus=…") are expanded into concrete changes by Expand.
const (
	KindIRQAffinity    Kind = "irq-affinity"    // proc/irq/N/smp_affinity_list (cpulist)
	KindRPSCPUs        Kind = "rps-cpus"        // sys/class/net/DEV/queues/rx-N/rps_cpus (hex mask)
	KindRPSFlowCnt     Kind = "rps-flow-cnt"    // sys/class/net/DEV/queues/rx-N/rps_flow_cnt (integer)
	KindXPSCPUs        Kind = "xps-cpus"        // sys/class/net/DEV/queues/tx-N/xps_cpus (hex mask)
	KindSysctl         Kind = "sysctl"          // proc/sys/net/core/… (integer)
	KindApp            Kind = "app-affinity"    // every thread of selected processes (cpulist); expands to thread-affinity
	KindThreadAffinity Kind = "thread-affinity" // sched_setaffinity on one thread (cpulist)
	KindCoalesce       Kind = "coalesce"        // ethtool -C on Device ("rx_usecs=8 adaptive_rx=off")
	KindIrqbalance     Kind = "irqbalance"      // the daemon: "running" or "stopped" ("banned_cpus=LIST" in a plan)
	KindIrqbalanceBan  Kind = "irqbalance-ban"  // IRQBALANCE_BANNED_CPULIST in Path (a cpulist; "" = unset)

	// NAPI: the device-wide sysfs files and, through the netdev netlink
	// family, one NAPI instance (Change.NAPI) of Device.
	KindDevThreaded           Kind = "dev-threaded"             // sys/class/net/DEV/threaded (0 or 1)
	KindDevDeferHardIRQs      Kind = "dev-defer-hard-irqs"      // sys/class/net/DEV/napi_defer_hard_irqs (count)
	KindDevGROFlushTimeout    Kind = "dev-gro-flush-timeout"    // sys/class/net/DEV/gro_flush_timeout (ns)
	KindNAPIThreaded          Kind = "napi-threaded"            // napi-set threaded (0 or 1)
	KindNAPIDeferHardIRQs     Kind = "napi-defer-hard-irqs"     // napi-set defer-hard-irqs (count)
	KindNAPIGROFlushTimeout   Kind = "napi-gro-flush-timeout"   // napi-set gro-flush-timeout (ns)
	KindNAPIIRQSuspendTimeout Kind = "napi-irq-suspend-timeout" // napi-set irq-suspend-timeout (ns)
)

// IsNAPI says whether k is an interrupt-mitigation setting of NAPI: a
// device-wide sysfs file or one NAPI instance's attribute.
func IsNAPI(k Kind) bool {
	switch k {
	case KindDevThreaded, KindDevDeferHardIRQs, KindDevGROFlushTimeout,
		KindNAPIThreaded, KindNAPIDeferHardIRQs, KindNAPIGROFlushTimeout, KindNAPIIRQSuspendTimeout:
		return true
	}
	return false
}

// Status is where a change stands. One vocabulary for plans, dry runs,
// applies, journals and reverts.
type Status string

// Statuses.
const (
	// StatusUnknown: the current value is not known from the host model
	// (plan on a tree without that file); apply reads it.
	StatusUnknown Status = "unknown"
	// StatusPending: differs from what is in force and will be (or, in a
	// journal, is being) written.
	StatusPending   Status = "pending"
	StatusUnchanged Status = "unchanged" // already in force; nothing written
	StatusSkipped   Status = "skipped"   // not written for a known reason (Note says why)
	StatusDone      Status = "done"      // written and read back
	StatusFailed    Status = "failed"    // an unexpected failure: triggers rollback
	StatusRestored  Status = "restored"  // the old value was written back
	StatusGone      Status = "gone"      // the thread exited; nothing to restore
	// StatusNotAttempted: after a failure or a crash, a change that was
	// never written; nothing to restore.
	StatusNotAttempted Status = "not-attempted"
)

// Change is one desired setting on one machine and what became of it. The
// JSON names are the journal format and the `apply --json` entry format.
type Change struct {
	Kind   Kind   `json:"kind"`
	Target string `json:"target"`         // for people: "irq 38 (eth0 rx queue 0)", "eth0 rx-0"
	Path   string `json:"path,omitempty"` // root-relative kernel or config file
	// TID is the thread of a thread-affinity change and TIDStart its start
	// time (clock ticks after boot, /proc/TID/stat field 22): revert skips a
	// thread whose start time differs, a different thread that reused the id.
	TID      int    `json:"tid,omitempty"`
	TIDStart uint64 `json:"tid_start,omitempty"`
	Device   string `json:"device,omitempty"` // the device the setting belongs to
	IRQ      *int   `json:"irq,omitempty"`    // the IRQ an irq-affinity change moves
	Queue    *int   `json:"queue,omitempty"`  // the queue a steering change belongs to
	Value    string `json:"value"`            // desired, in the form the kernel file takes
	Reason   string `json:"reason,omitempty"` // why (from the plan)
	// Old is the value in force before the change: from the host model in a
	// plan (empty when unknown), read from the machine by apply.
	Old string `json:"old"`
	// OldFile is the whole previous content of a configuration file the
	// change edits (nil: the file did not exist), restored byte for byte.
	OldFile *string `json:"old_file,omitempty"`
	// OldMode and OldUID/OldGID are the file's permission bits and owner,
	// restored with it.
	OldMode uint32 `json:"old_mode,omitempty"`
	OldUID  *int   `json:"old_uid,omitempty"`
	OldGID  *int   `json:"old_gid,omitempty"`
	Status  Status `json:"status"`
	Note    string `json:"note,omitempty"` // why skipped, the error, effective affinity …
	// RestoredBy, set by a revert of several journals, names the older
	// journal whose entry for the same setting was restored instead of
	// this one: this entry's own value was not written back.
	RestoredBy string `json:"restored_by,omitempty"`

	// Line is the plan file line of the entry (0: generated plan); App the
	// process selector of an app-affinity setting.
	Line int          `json:"line,omitempty"`
	App  *AppSelector `json:"app,omitempty"`

	// NAPI is the NAPI instance of Device a napi-* change sets.
	NAPI *uint32 `json:"napi_id,omitempty"`
}

// AppSelector selects processes: exactly one of PID, Comm (the name in
// /proc/PID/comm), Unit (a systemd unit) or Cgroup (below /sys/fs/cgroup).
type AppSelector struct {
	PID    int    `json:"pid,omitempty"`
	Comm   string `json:"comm,omitempty"`
	Unit   string `json:"unit,omitempty"`
	Cgroup string `json:"cgroup,omitempty"`
	// All: a Comm may match more than one process (see CheckMatches).
	All bool `json:"all,omitempty"`
}

func (c Change) String() string {
	if c.Kind == KindThreadAffinity {
		return fmt.Sprintf("%s: thread %d → %s", c.Target, c.TID, c.Value)
	}
	return fmt.Sprintf("%s: %s → %s", c.Target, c.Name(), Display(c.Kind, c.Value))
}

// Name is the knob a change sets, for people: the kernel file's name
// ("rps_flow_cnt", "smp_affinity_list"), else the kind.
func (c Change) Name() string {
	if c.Path != "" {
		for i := len(c.Path) - 1; i >= 0; i-- {
			if c.Path[i] == '/' {
				return c.Path[i+1:]
			}
		}
		return c.Path
	}
	return string(c.Kind)
}

// Scope is what a change belongs to, so that a measurement can be kept to
// the devices under test.
type Scope struct {
	IRQ         int    // the IRQ moved; -1 for none
	NetDevice   string // the network device whose queue it steers or whose coalescing it sets
	TID         int    // the thread placed; 0 for none
	MachineWide bool   // a machine-wide setting (sysctl, irqbalance)
}

// Env is the machine a handler reads and writes.
type Env struct {
	FS *kernel.FS
	// Ethtool reads and sets NIC coalescing; nil = the live device (ioctls).
	Ethtool Ethtool
	// Services starts and stops daemons; nil = the system's service manager.
	Services kernel.ServiceManager
	// NAPI reads and sets NAPI instances; nil = the live kernel (netlink in
	// the calling thread's network namespace).
	NAPI NAPIConn
}

// Handler is one kind of setting.
type Handler interface {
	Kind() Kind
	// Key identifies what a change writes: two changes with one key collide.
	Key(c *Change) string
	// Check validates a change's own fields — target object, path shape,
	// value — before anything is read, so a forged or garbled journal entry
	// is refused before revert acts on it.
	Check(c *Change) error
	// Read returns the value in force, in the form Value takes. A setting
	// the machine does not have is kernel.ErrUnsupported.
	Read(env *Env, c *Change) (string, error)
	// Write puts value in force.
	Write(env *Env, c *Change, value string) error
	// Same compares two values by meaning ("0-3" and "0,1,2,3").
	Same(a, b string) (bool, error)
	// Expected is what Read returns after writing c.Value (the kernel
	// rounds flow-table sizes up to a power of two).
	Expected(c *Change) string
	// Restore puts the old value back (c.Old, or c.OldFile for a file).
	Restore(env *Env, c *Change) error
	// Scope says what the change belongs to.
	Scope(c *Change) Scope
}

// Keeper is a Handler that saves more than the value before a write (a
// whole configuration file) into c.OldFile/OldMode/….
type Keeper interface {
	Keep(env *Env, c *Change) error
}

// Noter is a Handler with something to say after a successful write (an
// IRQ's effective affinity).
type Noter interface {
	AfterWrite(env *Env, c *Change) string
}

// Lookup returns the handler of kind k.
func Lookup(k Kind) (Handler, error) {
	h, ok := registry[k]
	if !ok {
		return nil, fmt.Errorf("setting kind %q is not known to this irqpilot (known: %s)", k, knownKinds())
	}
	return h, nil
}

// Same compares two values of kind k by meaning.
func Same(k Kind, a, b string) (bool, error) {
	h, err := Lookup(k)
	if err != nil {
		return false, err
	}
	return h.Same(a, b)
}

// Check validates c with its kind's handler; unknown kinds are errors.
func Check(c *Change) error {
	h, err := Lookup(c.Kind)
	if err != nil {
		return err
	}
	return h.Check(c)
}

// Key is c's key with its kind's handler (the path for unknown kinds).
func Key(c *Change) string {
	if h, err := Lookup(c.Kind); err == nil {
		return h.Key(c)
	}
	return "path:" + c.Path
}

// StatusFor compares a resolved change with its Old value from the host
// model: skipped stays skipped, an empty Old is unknown.
func StatusFor(c *Change) Status {
	switch {
	case c.Status == StatusSkipped:
		return StatusSkipped
	case c.Old == "":
		return StatusUnknown
	}
	if same, err := Same(c.Kind, c.Old, c.Value); err == nil && same {
		return StatusUnchanged
	}
	return StatusPending
}
