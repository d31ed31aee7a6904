package apply

import (
	"errors"
	"fmt"
	"strings"

	"github.com/irqpilot/irqpilot/internal/host"
	"github.com/irqpilot/irqpilot/internal/kernel"
	"github.com/irqpilot/irqpilot/internal/plan"
)

// FromPlan turns resolved plan settings into changes for this machine.
// Kernel-file settings map one to one; an application placement becomes one
// thread-affinity change per thread of every selected process; irqbalance
// handling and NIC coalescing become changes of their own kinds. Settings the
// plan marks skipped (kernel-managed IRQs, irqbalance left alone) come back
// as entries with status skipped, so the report lists them.
func FromPlan(fs *kernel.FS, settings []plan.Setting) ([]Change, []Entry, error) {
	// irqbalance first: a running daemon would otherwise move IRQs pinned by
	// the entries before it was stopped.
	ordered := make([]plan.Setting, 0, len(settings))
	for _, s := range settings {
		if s.Kind == plan.KindIrqbalance {
			ordered = append(ordered, s)
		}
	}
	for _, s := range settings {
		if s.Kind != plan.KindIrqbalance {
			ordered = append(ordered, s)
		}
	}
	settings = ordered
	var changes []Change
	var skipped []Entry
	for _, s := range settings {
		if s.Skip != "" {
			skipped = append(skipped, Entry{Change: Change{Kind: Kind(s.Kind), Target: s.Target, Path: s.Path, Value: s.Value, Reason: s.Reason}, Old: s.Current, Status: StatusSkipped, Note: s.Skip})
			continue
		}
		switch s.Kind {
		case plan.KindIRQAffinity, plan.KindRPSCPUs, plan.KindRPSFlowCnt, plan.KindXPSCPUs, plan.KindSysctl:
			changes = append(changes, Change{Kind: Kind(s.Kind), Target: s.Target, Path: s.Path, Value: s.Value, Reason: s.Reason})
		case plan.KindApp:
			pids, err := selectProcesses(fs, s.App)
			if err != nil {
				return nil, nil, fmt.Errorf("plan line %d: app %s: %w", s.Line, s.Target, err)
			}
			if len(pids) == 0 {
				skipped = append(skipped, Entry{Change: Change{Kind: KindThreadAffinity, Target: s.Target, Value: s.Value, Reason: s.Reason}, Status: StatusSkipped, Note: "no running process matches " + s.Target})
				continue
			}
			for _, pid := range pids {
				name, _ := fs.Comm(pid)
				c, err := PinProcess(fs, pid, name, *s.CPUs, s.Reason)
				if errors.Is(err, kernel.ErrNoSuchTask) {
					continue // exited while we looked
				}
				if err != nil {
					return nil, nil, err
				}
				changes = append(changes, c...)
			}
		case plan.KindIrqbalance:
			c, err := irqbalanceChanges(fs, s)
			if err != nil {
				return nil, nil, fmt.Errorf("plan line %d: %w", s.Line, err)
			}
			changes = append(changes, c...)
		case plan.KindCoalesce:
			changes = append(changes, Change{Kind: KindCoalesce, Target: s.Target, Device: s.Device, Value: s.Value, Reason: s.Reason})
		default:
			return nil, nil, fmt.Errorf("plan line %d: %s: setting kind %q is not supported by this irqpilot", s.Line, s.Target, s.Kind)
		}
	}
	return changes, skipped, nil
}

// selectProcesses finds the PIDs an application entry names.
func selectProcesses(fs *kernel.FS, a *plan.AppEntry) ([]int, error) {
	switch {
	case a.PID != 0:
		if _, err := fs.Comm(a.PID); err != nil {
			return nil, nil // not running: reported as skipped
		}
		return []int{a.PID}, nil
	case a.Comm != "":
		pids, err := fs.PIDs()
		if err != nil {
			return nil, err
		}
		var out []int
		for _, p := range pids {
			if c, err := fs.Comm(p); err == nil && c == a.Comm {
				out = append(out, p)
			}
		}
		return out, nil
	case a.Unit != "":
		for _, slice := range []string{"system.slice", "user.slice", ""} {
			pids, err := fs.CgroupProcs(strings.TrimPrefix(slice+"/"+a.Unit, "/"))
			if err == nil {
				return pids, nil
			}
		}
		return nil, nil
	case a.Cgroup != "":
		pids, err := fs.CgroupProcs(a.Cgroup)
		if err != nil {
			return nil, nil
		}
		return pids, nil
	}
	return nil, fmt.Errorf("no process selector")
}

// Resolved loads a plan file, resolves it against the machine behind fs and
// returns the changes, the skipped entries and the plan.
func Resolved(fs *kernel.FS, h *host.Host, p *plan.Plan) ([]Change, []Entry, error) {
	settings, err := plan.Resolve(p, h)
	if err != nil {
		return nil, nil, err
	}
	return FromPlan(fs, settings)
}
