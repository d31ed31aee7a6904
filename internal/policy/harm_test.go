package policy

import (
	"strings"
	"testing"

	"github.com/irqpilot/irqpilot/internal/diagnose"
)

// Harm is auto's evidence of harm: seed 004 on two CPUs is harm whether
// the other CPU waits (load's interrupt-bound finding) or is busy too (the
// saturated-CPU path); an idle machine and a spread load (memcached on 2
// CPUs) are not. Auto plans exactly when Harm finds something.
func TestHarm(t *testing.T) {
	h := synth{CPUs: 2, NICs: []synthNIC{{Name: "vs1", Queues: 1, Kind: "veth", NoIRQs: true}}}.Build()
	for i := range h.NICs {
		h.NICs[i].Virtual = true
	}
	cases := []struct {
		name string
		prof map[int]cpuProfile
		want string // "" = no harm; else the id, on CPU 0, and a word of its summary
	}{
		{"seed 004, CPU 1 waits", map[int]cpuProfile{0: {user: 10, sys: 14, soft: 72}, 1: {user: 30, sys: 15}}, "interrupt-bound-cpu"},
		{"seed 004, CPU 1 busy", map[int]cpuProfile{0: {user: 10, sys: 14, soft: 72}, 1: {user: 60, sys: 36}}, "saturated"},
		{"idle", map[int]cpuProfile{0: {user: 2, sys: 1, soft: 1}}, ""},
		{"memcached spread on 2 CPUs", map[int]cpuProfile{0: {user: 30, sys: 20, soft: 25}, 1: {user: 30, sys: 20, soft: 25}}, ""},
		// Every CPU saturated by interrupt work: out of CPU for the
		// traffic, nothing to separate — no trigger that never clears.
		{"uniform interrupt saturation", map[int]cpuProfile{0: {user: 10, sys: 25, soft: 62}, 1: {user: 10, sys: 25, soft: 62}}, ""},
	}
	for _, c := range cases {
		l := synthLoad(h, c.prof, nil, nil)
		harm := Harm(h, l)
		p := mustMake(t, "auto", h, Options{Load: Measured(l), Devices: []string{"vs1"}, MachineWide: true})
		if c.want == "" {
			if len(harm) != 0 {
				t.Errorf("%s: harm %+v, want none", c.name, harm)
			}
			if !strings.Contains(p.Why, "no evidence of harm") {
				t.Errorf("%s: auto saw harm Harm did not: %s", c.name, p.Why)
			}
			continue
		}
		if len(harm) != 1 || harm[0].ID != diagnose.IDInterruptBound || len(harm[0].CPUs) != 1 || harm[0].CPUs[0] != 0 ||
			!strings.Contains(harm[0].ID+" "+harm[0].Summary, c.want) {
			t.Errorf("%s: harm %+v, want %s on CPU 0", c.name, harm, c.want)
		}
		if strings.Contains(p.Why, "no evidence of harm") {
			t.Errorf("%s: Harm found harm, auto did not: %s", c.name, p.Why)
		}
	}
	if Harm(h, nil) != nil {
		t.Error("harm without a measurement")
	}
}
