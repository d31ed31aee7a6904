package agent

import (
	"reflect"

	"github.com/irqpilot/irqpilot/internal/cpuset"
	"github.com/irqpilot/irqpilot/internal/host"
	"github.com/irqpilot/irqpilot/internal/setting"
)

// logAttrs are slog's key/value pairs without those whose value is empty
// (a string, or a string type such as setting.Kind, that is ""): a log
// line names what the agent knows, never `culprit=""` or `device=""`.
func logAttrs(kv ...any) []any {
	out := make([]any, 0, len(kv))
	for i := 0; i+1 < len(kv); i += 2 {
		if v := reflect.ValueOf(kv[i+1]); v.Kind() == reflect.String && v.Len() == 0 {
			continue
		}
		out = append(out, kv[i], kv[i+1])
	}
	return out
}

// shown is a setting's value as the agent's log and status text show it: a
// cpulist for the kernel's hex masks (setting.Display), as every other
// output does.
func shown(k setting.Kind, v string) string { return setting.Display(k, v) }

// pendingNote is the write's note of an IRQ affinity whose interrupt still
// lands on its old CPU ("effective 5: move pending until its next
// interrupt"), "" otherwise: the setting is in force and the kernel moves
// the IRQ when it next fires; it is not drift.
func pendingNote(e *setting.Change) string {
	if setting.MovePending(e) {
		return e.Note
	}
	return ""
}

// maskList is v's cpulist when kind k holds the kernel's hex mask, for the
// status's JSON beside the kernel's form; nil for every other kind.
func maskList(k setting.Kind, v string) *string {
	if l, ok := setting.MaskCPUList(k, v); ok {
		return &l
	}
	return nil
}

// withCPUs fills in the cpulists of repairs of masks.
func withCPUs(rs []Repair) []Repair {
	for i := range rs {
		r := &rs[i]
		k := setting.Kind(r.Setting)
		r.OldCPUs, r.DriftedCPUs, r.RestoredCPUs = maskList(k, r.Old), maskList(k, r.Drifted), maskList(k, r.Restored)
	}
	return rs
}

// movePending says, for an IRQ affinity the agent enforces, that its
// interrupt still lands outside the CPUs in force (read now from
// effective_affinity_list): a move the kernel makes at the IRQ's next
// interrupt. The enforcement pass compares smp_affinity_list only, which
// shows the new CPUs as soon as they are written, so such an IRQ is in
// force — never drift, never re-written, never frozen.
func (ag *Agent) movePending(irq int, value string) string {
	want, err := cpuset.Parse(value)
	if err != nil {
		return ""
	}
	eff, err := ag.o.FS.ReadIRQEffectiveAffinity(irq)
	if err != nil || !host.MovePending(want, eff) {
		return ""
	}
	return host.MovePendingNote
}
