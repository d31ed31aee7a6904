package setting

import (
	"sort"
	"strings"
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

// ScopeOf is what c belongs to (see Scope); unknown kinds belong to nothing.
func ScopeOf(c *Change) Scope {
	h, err := Lookup(c.Kind)
	if err != nil {
		return Scope{IRQ: -1}
	}
	_ = h.Check(c) // fills IRQ, Device and Queue from a path when missing
	return h.Scope(c)
}
