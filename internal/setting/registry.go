package setting

import (
	"fmt"
	"sort"
	"strings"

	"github.com/irqpilot/irqpilot/internal/kernel"
)

// registry holds every kind of setting irqpilot knows: one line per kind.
var registry = func() map[Kind]Handler {
	m := map[Kind]Handler{}
	for _, h := range []Handler{
		irqAffinityKind,
		rpsCPUsKind,
		rpsFlowCntKind,
		xpsCPUsKind,
		sysctlKind,
		app{},
		threadAffinity{},
		coalesce{},
		irqbalanceState{},
		irqbalanceBan{},
		devThreadedKind,
		devDeferKind,
		devGROFlushKind,
		napiThreadedKind,
		napiDeferKind,
		napiGROFlushKind,
		napiIRQSuspendKind,
	} {
		m[h.Kind()] = h
	}
	return m
}()

// Kinds lists the registered kinds, sorted.
func Kinds() []Kind {
	out := make([]Kind, 0, len(registry))
	for k := range registry {
		out = append(out, k)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

func knownKinds() string {
	var s []string
	for _, k := range Kinds() {
		s = append(s, string(k))
	}
	return strings.Join(s, ", ")
}

// Globber is a kind held in kernel files, with patterns for every such file
// on a machine.
type Globber interface{ Globs() []string }

// StateGlobs are the patterns of every kernel file a registered kind writes
// (bench reads them before and after a run to prove the machine restored).
func StateGlobs() []string {
	var out []string
	for _, k := range Kinds() {
		if g, ok := registry[k].(Globber); ok {
			out = append(out, g.Globs()...)
		}
	}
	return out
}

// ReadStateFiles reads every file of StateGlobs on fs's machine: its value,
// trimmed, by root-relative path ("/proc/irq/36/smp_affinity_list"), or
// "error: " and why when it could not be read. Bench compares two readings
// to prove the machine restored.
func ReadStateFiles(fs *kernel.FS) (map[string]string, error) {
	st := map[string]string{}
	for _, g := range StateGlobs() {
		names, err := fs.GlobSettingFiles(g)
		if err != nil {
			return nil, err
		}
		for _, n := range names {
			v, err := fs.ReadSettingFile(n)
			if err != nil {
				v = "error: " + err.Error()
			}
			st[n] = v
		}
	}
	return st, nil
}

// ScopeOf is what c belongs to (see Scope); unknown kinds belong to nothing.
func ScopeOf(c *Change) Scope {
	h, err := Lookup(c.Kind)
	if err != nil {
		return Scope{IRQ: -1}
	}
	// Check fills IRQ, Device and Queue from the path; a change that fails
	// it belongs to nothing (so bench drops it rather than trusting a
	// Device field that disagrees with the path).
	if h.Check(c) != nil {
		return Scope{IRQ: -1}
	}
	return h.Scope(c)
}

// RecordChecker is a Handler with rules of its own for journal entries.
type RecordChecker interface{ CheckRecorded(c *Change) error }

// CheckRecorded validates a journal entry before revert acts on it: the
// kind is known, the object and path are ones that kind may touch, and the
// values — above all Old, which revert writes — are valid and within the
// kernel's limits. irqpilot's own caps on new values do not apply: a
// journal of an older irqpilot must still revert.
func CheckRecorded(c *Change) error {
	h, err := Lookup(c.Kind)
	if err != nil {
		return err
	}
	if rc, ok := h.(RecordChecker); ok {
		return rc.CheckRecorded(c)
	}
	if err := h.Check(c); err != nil {
		return err
	}
	if c.Old != "" {
		if _, err := h.Same(c.Old, c.Old); err != nil {
			return fmt.Errorf("%s: old value %q: %w", c.Target, short(c.Old), err)
		}
	}
	return nil
}
