package setting

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/irqpilot/irqpilot/internal/cpuset"
	"github.com/irqpilot/irqpilot/internal/host"
	"github.com/irqpilot/irqpilot/internal/kernel"
)

// irqAffinity: /proc/irq/N/smp_affinity_list, a cpulist. After a write it
// notes where the interrupt is actually delivered (effective_affinity_list).
type irqAffinity struct{ fileKind }

var irqAffinityKind = irqAffinity{fileKind{
	kind:  KindIRQAffinity,
	same:  sameCPUList,
	globs: []string{"proc/irq/*/smp_affinity_list"},
	check: checkIRQAffinity,
	feat:  &featIRQAffinity,
	scope: func(c *Change) Scope {
		if c.IRQ == nil {
			return Scope{IRQ: -1}
		}
		return Scope{IRQ: *c.IRQ}
	},
}}

// featIRQAffinity is the affinity file itself; featEffective, where the
// kernel says an IRQ is actually delivered, only informs (apply's note
// after a write, doctor's view of a move the chip did not make).
var (
	featIRQAffinity = feature{name: "IRQ affinity", probe: "proc/irq/N/smp_affinity_list",
		glob: "proc/irq/[0-9]*/smp_affinity_list", evidence: "proc/irq/[0-9]*"}
	featEffective = feature{name: "effective IRQ affinity", probe: "proc/irq/N/effective_affinity_list",
		glob: "proc/irq/[0-9]*/effective_affinity_list", evidence: "proc/irq/[0-9]*/smp_affinity_list"}
)

func (irqAffinity) features() []*feature { return []*feature{&featIRQAffinity, &featEffective} }
func (irqAffinity) needed() []*feature   { return []*feature{&featIRQAffinity} }

var irqPathRE = regexp.MustCompile(`^proc/irq/([0-9]+)/smp_affinity_list$`)

func checkIRQAffinity(c *Change) error {
	m := irqPathRE.FindStringSubmatch(c.Path)
	if m == nil {
		return fmt.Errorf("path %q is not an IRQ's smp_affinity_list", c.Path)
	}
	n, err := strconv.Atoi(m[1])
	if err != nil || n > 1<<24 {
		return fmt.Errorf("path %q: IRQ %q is not valid", c.Path, m[1])
	}
	if c.IRQ != nil && *c.IRQ != n {
		return fmt.Errorf("path %q is not IRQ %d's", c.Path, *c.IRQ)
	}
	c.IRQ = &n
	if s, err := cpuset.Parse(strings.TrimSpace(c.Value)); err == nil && s.IsEmpty() {
		return fmt.Errorf("an empty CPU list is not a valid IRQ affinity")
	}
	return nil
}

// IRQAffinity is the change that places irq on cpus.
func IRQAffinity(irq int, target string, cpus cpuset.Set, reason string) Change {
	return Change{Kind: KindIRQAffinity, Target: target, Path: kernel.IRQAffinityListPath(irq),
		IRQ: &irq, Value: cpus.String(), Reason: reason}
}

// AfterWrite notes where the interrupt is delivered now, and when that is
// outside the CPUs just written, that the move is pending until the IRQ next
// fires (host.MovePending): the write is in force, the kernel moves the
// interrupt then.
func (irqAffinity) AfterWrite(env *Env, c *Change) string {
	m := irqPathRE.FindStringSubmatch(c.Path)
	if m == nil {
		return ""
	}
	irq, _ := strconv.Atoi(m[1])
	e, err := env.FS.ReadIRQEffectiveAffinity(irq)
	if err != nil {
		return ""
	}
	note := "effective " + e.String()
	a, aerr := cpuset.Parse(strings.TrimSpace(c.Value))
	if aerr == nil && host.MovePending(a, e) {
		note += ": " + host.MovePendingNote
	}
	return note
}

// MovePending reports whether c is an IRQ affinity in force (written now,
// or already so) whose move waits for the IRQ's next interrupt: its note
// says so (AfterWrite, or the caller for one already in force).
func MovePending(c *Change) bool {
	return c.Kind == KindIRQAffinity && (c.Status == StatusDone || c.Status == StatusUnchanged) &&
		strings.HasSuffix(c.Note, host.MovePendingNote)
}
