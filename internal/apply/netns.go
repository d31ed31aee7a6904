package apply

import (
	"fmt"
	"sort"
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
	cmd := "irqpilot revert --to " + e.Journal
	if e.StateDir != "" && e.StateDir != DefaultStateDir {
		cmd += " --state-dir " + e.StateDir
	}
	run := "run revert there: ip netns exec " + e.Want.Name + " " + cmd
	if e.Want.Name == "" {
		run = "run revert there: nsenter --net=/proc/PID/ns/net " + cmd + " (PID: any process in that namespace)"
	}
	here := "namespace " + e.Here.String()
	if e.Here.Initial {
		here = "the host's initial namespace"
	}
	return fmt.Sprintf("%s in namespace %s (journal %s was applied there; this revert runs in %s); %s. Nothing was changed",
		what, e.Want.String(), e.Journal, here, run)
}

// checkNetNS refuses to revert a journal whose network-device settings
// belong to another network namespace: from here their sysfs files do not
// exist (or are another device's), and the journal would be left half
// restored. Journals without a namespace (older versions) are not checked.
func (a *Applier) checkNetNS(j *Journal) error {
	if j.NetNS == nil || j.NetNS.Inode == 0 {
		return nil
	}
	here := a.netns()
	if here == nil || here.Inode == j.NetNS.Inode {
		return nil
	}
	devs := journalNetDevices(j)
	if len(devs) == 0 {
		return nil
	}
	return &WrongNetNSError{Journal: j.ID, Devices: devs, Want: *j.NetNS, Here: *here, StateDir: a.StateDir}
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
	out := make([]string, 0, len(seen))
	for d := range seen {
		out = append(out, d)
	}
	sort.Strings(out)
	return out
}
