package agent

import (
	"slices"
	"strings"

	"github.com/irqpilot/irqpilot/internal/apply"
	"github.com/irqpilot/irqpilot/internal/setting"
)

// devTrack is what the agent knows of the network devices its plan names:
// which incarnation of each (its ifindex, new whenever the device is
// created) it enforces, and the journals it wrote that hold settings of
// device incarnations only.
type devTrack struct {
	index map[string]int // device → ifindex when last resolved
	// journals: journal ID → the incarnations (device → ifindex) whose
	// files it wrote, for journals that wrote nothing else.
	journals map[string]map[string]int
	// superseded: such journals whose every incarnation is gone, in the
	// order they went: nothing they wrote is in force (revert has no
	// object to restore), so beyond KeepJournals they are removed.
	superseded []string
	pruner     apply.Pruner
	// resolveErr: the plan as a whole did not resolve at the last
	// resolve (logged once per distinct error, kept as the last error).
	resolveErr string
}

// ifindex reads a network device's ifindex ("" device: none).
func (ag *Agent) ifindex(dev string) (int, bool) {
	v, err := ag.files.IfIndex(dev)
	return v, err == nil
}

// trackDevices notes the incarnation of every device the new changes
// touch. A device that is gone or was created anew (its ifindex changed,
// whether or not its link events were seen apart: a delete and re-add
// inside one settle time reach one pass) starts afresh: its settings are
// applied, not repaired, and they count no ping-pong.
func (ag *Agent) trackDevices(old, changes []setting.Change) {
	if ag.devs.index == nil {
		ag.devs.index = map[string]int{}
		ag.devs.journals = map[string]map[string]int{}
	}
	now := map[string]int{}
	for i := range changes {
		d := changes[i].Device
		if _, done := now[d]; done || d == "" {
			continue
		}
		if ix, ok := ag.ifindex(d); ok {
			now[d] = ix
		}
	}
	// A device whose every setting waits for an offline CPU is still
	// the same incarnation: keep it tracked, so its settings stay the
	// agent's (their return is a repair, not an apply).
	for k, out := range ag.heldForCPU {
		d := ag.keyDev[k]
		if _, ok := now[d]; !out || ok || d == "" {
			continue
		}
		if ix, ok := ag.ifindex(d); ok && ix == ag.devs.index[d] {
			now[d] = ix
		}
	}
	changed := map[string]bool{}
	for d, ix := range ag.devs.index {
		if now[d] != ix {
			changed[d] = true
		}
	}
	ag.devs.index = now
	if len(changed) == 0 {
		return
	}
	for _, list := range [][]setting.Change{old, changes} {
		for i := range list {
			if changed[list[i].Device] {
				ag.forgetKey(setting.Key(&list[i]))
			}
		}
	}
	for d := range changed {
		if _, ok := now[d]; ok {
			ag.log.Info("device created anew: its settings are applied again, not counted as drift", "device", d, "ifindex", now[d])
		}
	}
	for id, incs := range ag.devs.journals {
		gone := true
		for d, ix := range incs {
			gone = gone && now[d] != ix
		}
		if gone {
			ag.devs.superseded = append(ag.devs.superseded, id)
			delete(ag.devs.journals, id)
		}
	}
}

// devicesChanged reports whether a device the plan's settings touch is
// gone or was created anew since the last resolve (one read of its
// ifindex each, held open): the pass then resolves again before it
// diffs, so a re-created device is converged, not repaired.
func (ag *Agent) devicesChanged() bool {
	for d, ix := range ag.devs.index {
		if now, ok := ag.ifindex(d); !ok || now != ix {
			return true
		}
	}
	return false
}

// noteDeviceJournal records a journal this run wrote whose every written
// entry is a file of a network device's incarnation (/sys/class/net/DEV/,
// steering), so that it can be pruned once those incarnations are gone.
// An incarnation must read the same before (resolve) and after the write.
func (ag *Agent) noteDeviceJournal(id string, entries []setting.Change) {
	if ag.devs.journals == nil {
		return
	}
	incs := map[string]int{}
	for i := range entries {
		e := &entries[i]
		if e.Status != setting.StatusDone && e.Status != setting.StatusPending {
			continue
		}
		if e.Device == "" || !strings.HasPrefix(e.Path, setting.DevPath(e.Device, "")) {
			return
		}
		ix, known := ag.devs.index[e.Device]
		if !known {
			return
		}
		if _, seen := incs[e.Device]; !seen {
			if now, ok := ag.ifindex(e.Device); !ok || now != ix {
				return
			}
		}
		incs[e.Device] = ix
	}
	if len(incs) > 0 {
		ag.devs.journals[id] = incs
	}
}

// pruneSuperseded removes, beyond the newest KeepJournals, the journals
// of device incarnations that are gone (devTrack.superseded).
func (ag *Agent) pruneSuperseded() {
	removed := 0
	for len(ag.devs.superseded) > ag.o.KeepJournals {
		id := ag.devs.superseded[0]
		ag.devs.superseded = ag.devs.superseded[1:]
		if ag.adapt.cur != nil && slices.Contains(ag.adapt.journals, id) {
			continue
		}
		if err := apply.RemoveJournal(ag.o.StateDir, id); err != nil {
			// Reverted from outside meanwhile: PruneJournals bounds it.
			ag.log.Debug("journal retention: journal of a device that is gone not removed", "journal", id, "error", err)
			continue
		}
		ag.journals = slices.DeleteFunc(ag.journals, func(j string) bool { return j == id })
		ag.repairJournals = slices.DeleteFunc(ag.repairJournals, func(r repairJournal) bool { return r.id == id })
		removed++
	}
	if removed > 0 {
		ag.log.Info("journal retention: removed journals of device incarnations that are gone", "count", removed, "kept", ag.o.KeepJournals)
	}
}
