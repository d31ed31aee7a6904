package agent

import (
	"slices"
	"time"

	"github.com/irqpilot/irqpilot/internal/apply"
	"github.com/irqpilot/irqpilot/internal/setting"
)

// record notes what one Apply did: journals, settings now established,
// drift repaired (counted towards ping-pong), settings applied.
func (ag *Agent) record(res *apply.Result, why string, now time.Time, drift map[string]setting.Change, culprit string) {
	if res != nil {
		_ = ag.ap.RecordManaged(ag.hostModel.Load(), res.Entries)
		jid := ""
		if res.Journal != nil {
			jid = res.Journal.ID
			ag.journals = append(ag.journals, jid)
			ag.adapt.noteJournal(jid)
			if res.Journal.State == apply.StateApplied {
				ag.noteDeviceJournal(jid, res.Entries)
			}
		}
		var done []string
		repairOnly := true
		for i := range res.Entries {
			e := &res.Entries[i]
			k := setting.Key(e)
			if e.Status == setting.StatusDone && jid != "" {
				done = append(done, k)
				if ag.firstWriter[k] == "" {
					ag.firstWriter[k] = jid
				}
			}
			if e.Status != setting.StatusDone {
				if e.Status == setting.StatusSkipped {
					ag.established[k] = true // nothing to enforce; do not retry every pass
				}
				continue
			}
			ag.established[k] = true
			if e.Kind == setting.KindDevThreaded {
				// Turning threaded NAPI on creates the NAPI threads a plan
				// places: read the host again next pass, not in minutes.
				ag.needResolve = true
			}
			if d, ok := drift[k]; ok {
				who := culpritFor(e, culprit)
				if held, ok := ag.heldForCPU[k]; ok && !held {
					// The kernel moved it off a CPU that went offline.
					who = "kernel: CPU offline"
					delete(ag.heldForCPU, k)
				} else {
					ag.repairTimes[k] = append(ag.repairTimes[k], now)
				}
				r := Repair{Time: now, Setting: string(e.Kind), Target: e.Target, Device: e.Device,
					Old: e.Value, Drifted: d.Old, Restored: e.Value, Culprit: who, Journal: jid}
				ag.repairs = appendRecent(ag.repairs, r)
				if ag.m != nil {
					ag.m.DriftRepairs.WithLabelValues(string(e.Kind), e.Device).Inc()
				}
				ag.log.Warn("drift repaired", logAttrs("setting", e.Kind, "target", e.Target, "device", e.Device,
					"old", shown(e.Kind, r.Old), "drifted", shown(e.Kind, r.Drifted), "restored", shown(e.Kind, r.Restored),
					"culprit", r.Culprit, "note", pendingNote(e), "journal", jid)...)
			} else {
				repairOnly = false
				if ag.m != nil {
					ag.m.Applied.WithLabelValues(string(e.Kind), e.Device).Inc()
				}
				ag.log.Info("applied", logAttrs("why", ag.entryWhy(why, e), "setting", e.Kind, "target", e.Target, "device", e.Device,
					"was", shown(e.Kind, e.Old), "now", shown(e.Kind, e.Value), "note", pendingNote(e), "journal", jid)...)
			}
		}
		if repairOnly && len(done) > 0 {
			ag.repairJournals = append(ag.repairJournals, repairJournal{id: jid, keys: done})
		}
		ag.prune()
	}
}

// repairJournal is a journal that holds drift repairs only.
type repairJournal struct {
	id   string
	keys []string
}

// pruneRepairs bounds the journals drift repairs write (one per pass that
// repairs): beyond the newest KeepJournals, a repair journal is removed
// when every setting it wrote was first written in this run by an older
// journal that is kept — reverting every journal newest first (revert,
// --revert-on-exit) then still ends at the values from before the agent.
// A repair journal that was the first to write a setting (one found in
// force at start, then drifted) is kept, as are journals an adaptation is
// being verified with.
func (ag *Agent) pruneRepairs() {
	removed := 0
	for len(ag.repairJournals) > ag.o.KeepJournals {
		r := ag.repairJournals[0]
		ag.repairJournals = ag.repairJournals[1:]
		if ag.adapt.cur != nil && slices.Contains(ag.adapt.journals, r.id) {
			continue
		}
		superseded := true
		for _, k := range r.keys {
			w := ag.firstWriter[k]
			superseded = superseded && w != "" && w != r.id && slices.Contains(ag.journals, w) && ag.stillApplied(w)
		}
		if !superseded {
			continue
		}
		if err := apply.RemoveJournal(ag.o.StateDir, r.id); err != nil {
			ag.log.Warn("journal retention: superseded repair journal not removed", "journal", r.id, "error", err)
			continue
		}
		ag.journals = slices.DeleteFunc(ag.journals, func(id string) bool { return id == r.id })
		removed++
	}
	if removed > 0 {
		ag.log.Info("journal retention: removed superseded drift-repair journals", "count", removed, "kept", ag.o.KeepJournals)
	}
}

// stillApplied: journal id is on disk and applied — not reverted from
// outside (`irqpilot revert` while the agent runs), in which case a later
// repair journal may be the only record of a setting's original value.
func (ag *Agent) stillApplied(id string) bool {
	j, err := apply.LoadJournal(ag.o.StateDir, id)
	return err == nil && j.State == apply.StateApplied
}

// prune bounds the journal directory: reverted, rolled-back and no-change
// journals beyond KeepJournals are removed, and so are superseded drift
// repairs (pruneRepairs) and the journals of device incarnations that are
// gone (pruneSuperseded); no other applied journal is.
func (ag *Agent) prune() {
	ag.pruneSuperseded()
	ag.pruneRepairs()
	removed, err := ag.devs.pruner.Prune(ag.o.StateDir, ag.o.KeepJournals)
	if err != nil {
		ag.log.Warn("journal retention", "error", err)
	}
	if len(removed) > 0 {
		// This run's own (rolled back) journals among them are gone too:
		// --revert-on-exit has nothing to revert there.
		ag.journals = slices.DeleteFunc(ag.journals, func(id string) bool { return slices.Contains(removed, id) })
		ag.log.Info("journal retention: removed old finished journals", "count", len(removed))
	}
}
