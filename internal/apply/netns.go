package apply

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/irqpilot/irqpilot/internal/kernel"
	"github.com/irqpilot/irqpilot/internal/setting"
)

// netns is the network namespace this applier writes in (nil when it cannot
// be told, or below a test root).
func (a *Applier) netns() *kernel.NetNS {
	n, err := a.Env.FS.CurrentNetNS()
	if err != nil || n.Inode == 0 {
		return nil
	}
	return &n
}

// NetNS is the network namespace this applier writes in (nil when it
// cannot be told): a printed revert command runs there.
func (a *Applier) NetNS() *kernel.NetNS { return a.netns() }

// WrongNetNSError: a journal holds settings of network devices that live in
// another network namespace than the one revert runs in; sysfs there shows
// other devices (or none of that name), so nothing was restored.
type WrongNetNSError struct {
	Journal string
	Devices []string     // the journal's network devices
	Want    kernel.NetNS // where the journal was applied
	Here    kernel.NetNS
	// StateDir is carried into the suggested command.
	StateDir string
	// Gone: the namespace no longer exists.
	Gone bool
	// Args are revert's arguments the suggested command repeats there
	// ("--session=ID" for a session's revert: --session takes its value
	// only after "=", as it has a default); nil is "--to" Journal.
	Args []string
}

func (e *WrongNetNSError) Error() string {
	what := "its settings are"
	switch {
	case len(e.Devices) == 1 && strings.HasPrefix(e.Devices[0], "net.core."):
		what = e.Devices[0] + " is"
	case len(e.Devices) == 1:
		what = "device " + e.Devices[0] + " is"
	case len(e.Devices) > 1:
		what = "devices " + strings.Join(e.Devices, ", ") + " are"
	}
	args := e.Args
	if args == nil {
		args = []string{"--to", e.Journal}
	}
	run := "run revert there: " + RevertCommand(e.StateDir, &e.Want, args...)
	if e.Want.Name == "" {
		run = "run revert there: nsenter --net=/proc/PID/ns/net " + RevertCommand(e.StateDir, nil, args...) + " (PID: any process in that namespace)"
	}
	here := "namespace " + e.Here.String()
	if e.Here.Initial {
		here = "the host's initial namespace"
	}
	if e.Gone {
		return fmt.Sprintf("%s in namespace %s, which no longer exists (journal %s was applied there): its devices' settings went with it. Nothing was changed; use --force to complete the journal (those settings are reported gone, never written; its IRQ and thread settings are restored)",
			what, e.Want.String(), e.Journal)
	}
	return fmt.Sprintf("%s in namespace %s (journal %s was applied there; this revert runs in %s); %s. Nothing was changed",
		what, e.Want.String(), e.Journal, here, run)
}

// checkNetNS refuses to revert a journal whose network-device settings
// belong to another network namespace: from here their sysfs files do not
// exist (or are another device's), and the journal would be left half
// restored. Journals without a namespace (older versions) are not checked.
//
// The namespace is told by its inode and, since the kernel reuses a
// deleted namespace's inode for the next one made, by its cookie or name
// too (kernel.NetNS.Same): a journal is never reverted into a newer
// namespace that took its inode.
//
// A namespace that no longer exists took its devices with it (veths die
// with it; physical devices return to the initial namespace, where their
// name may be another device's), so nothing of them can be restored: with
// force, those entries are marked gone, never written, and the rest of the
// journal (IRQs, threads) is restored; without, the refusal says so.
func (a *Applier) checkNetNS(j *Journal, force bool) error {
	if j.NetNS == nil || j.NetNS.Inode == 0 {
		return nil
	}
	here := a.netns()
	if here == nil || j.NetNS.Same(*here) {
		return nil
	}
	devs := journalNetDevices(j)
	if len(devs) == 0 {
		return nil
	}
	werr := &WrongNetNSError{Journal: j.ID, Devices: devs, Want: *j.NetNS, Here: *here, StateDir: a.StateDir}
	if a.Env.FS.NetNSAlive(*j.NetNS) {
		return werr
	}
	werr.Gone = true
	if !force {
		return werr
	}
	for i := range j.Entries {
		e := &j.Entries[i]
		if (e.Status == setting.StatusDone || e.Status == setting.StatusPending) && netScoped(e) {
			e.Status = setting.StatusGone
			e.Note = fmt.Sprintf("gone: network namespace %s no longer exists, and its devices' settings went with it; nothing written", j.NetNS)
		}
	}
	return nil
}

// netScoped reports whether e is a setting that lives in a network
// namespace (a device's, or a net.core sysctl).
func netScoped(e *setting.Change) bool {
	return setting.ScopeOf(e).NetDevice != "" || e.Kind == setting.KindSysctl
}

// journalNetDevices lists the network devices whose settings j changed.
func journalNetDevices(j *Journal) []string {
	seen := map[string]bool{}
	for i := range j.Entries {
		e := &j.Entries[i]
		if e.Status != setting.StatusDone && e.Status != setting.StatusPending {
			continue
		}
		if d := setting.ScopeOf(e).NetDevice; d != "" {
			seen[d] = true
		} else if e.Kind == setting.KindSysctl {
			seen["net.core."+e.Name()] = true
		}
	}
	return slices.Sorted(maps.Keys(seen))
}
