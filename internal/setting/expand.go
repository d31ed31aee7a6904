package setting

import (
	"errors"
	"fmt"
	"strings"

	"github.com/irqpilot/irqpilot/internal/cpuset"
	"github.com/irqpilot/irqpilot/internal/kernel"
)

// Expand turns resolved plan changes into the concrete changes apply writes,
// in the order they must be written:
//   - irqbalance first: a running daemon would otherwise move IRQs pinned
//     by the changes before it was stopped; "banned_cpus=LIST" becomes an
//     irqbalance-ban change of its configuration file;
//   - an application placement becomes one thread-affinity change per
//     thread of every selected process (none running: a skipped entry);
//   - skipped changes (kernel-managed IRQs, irqbalance left alone) come
//     back in skipped, so the report lists them.
func Expand(fs *kernel.FS, resolved []Change) (changes, skipped []Change, err error) {
	ordered := make([]Change, 0, len(resolved))
	for _, c := range resolved {
		if c.Kind == KindIrqbalance {
			ordered = append(ordered, c)
		}
	}
	for _, c := range resolved {
		if c.Kind != KindIrqbalance {
			ordered = append(ordered, c)
		}
	}
	for _, c := range ordered {
		if c.Status == StatusSkipped {
			skipped = append(skipped, c)
			continue
		}
		switch c.Kind {
		case KindApp:
			pids, err := SelectProcesses(fs, c.App)
			if err != nil {
				return nil, nil, fmt.Errorf("plan line %d: app %s: %w", c.Line, c.Target, err)
			}
			if err := CheckMatches(fs, c.App, pids); err != nil {
				return nil, nil, fmt.Errorf("plan line %d: %w; nothing was changed", c.Line, err)
			}
			if len(pids) == 0 {
				s := c
				s.Kind, s.Status, s.Note = KindThreadAffinity, StatusSkipped, "no running process matches "+c.Target
				skipped = append(skipped, s)
				continue
			}
			cpus, err := cpuset.Parse(c.Value)
			if err != nil {
				return nil, nil, fmt.Errorf("plan line %d: app %s: %w", c.Line, c.Target, err)
			}
			for _, pid := range pids {
				name, _ := fs.Comm(pid)
				ch, err := PinProcess(fs, pid, name, cpus, c.Reason)
				if errors.Is(err, kernel.ErrNoSuchTask) {
					continue // exited while we looked
				}
				if err != nil {
					return nil, nil, err
				}
				for i := range ch {
					ch[i].Line = c.Line
				}
				changes = append(changes, ch...)
			}
		case KindIrqbalance:
			if list, ok := strings.CutPrefix(c.Value, "banned_cpus="); ok {
				cpus, err := cpuset.Parse(list)
				if err != nil {
					return nil, nil, fmt.Errorf("plan line %d: irqbalance: %w", c.Line, err)
				}
				ban := IrqbalanceBan(fs, cpus, c.Reason)
				ban.Line = c.Line
				changes = append(changes, ban)
				continue
			}
			changes = append(changes, Change{Kind: KindIrqbalance, Target: c.Target, Value: c.Value, Reason: c.Reason})
		default:
			if _, err := Lookup(c.Kind); err != nil {
				return nil, nil, fmt.Errorf("plan line %d: %s: %w", c.Line, c.Target, err)
			}
			n := c
			n.Old, n.Status = "", ""
			changes = append(changes, n)
		}
	}
	return changes, skipped, nil
}
