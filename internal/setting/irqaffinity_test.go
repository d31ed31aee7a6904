package setting

import (
	"strings"
	"testing"

	"github.com/irqpilot/irqpilot/internal/kernel"
)

// longList is a valid cpulist just past MaxCPUListLen ("0,0,0,…").
var longList = strings.Repeat("0,", MaxCPUListLen/2) + "0"

func TestIRQAffinityCheck(t *testing.T) {
	const p = "proc/irq/38/smp_affinity_list"
	runCheck(t, irqAffinityKind, []checkCase{
		{"valid", Change{Path: p, Value: "0-3"}, ""},
		{"valid with its IRQ", Change{Path: p, IRQ: intp(38), Value: "0,2"}, ""},
		{"valid with newline", Change{Path: p, Value: "1\n"}, ""},
		{"IRQ 0", Change{Path: "proc/irq/0/smp_affinity_list", Value: "0"}, ""},
		{"IRQ field mismatch", Change{Path: p, IRQ: intp(39), Value: "0"}, "is not IRQ 39's"},
		{"IRQ field negative", Change{Path: p, IRQ: intp(-1), Value: "0"}, "is not IRQ -1's"},
		{"empty cpulist", Change{Path: p, Value: ""}, "empty CPU list"},
		{"blank cpulist", Change{Path: p, Value: " \n"}, "empty CPU list"},
		{"no path", Change{Value: "0"}, "no kernel file"},
		{"dotdot", Change{Path: "proc/irq/38/../39/smp_affinity_list", Value: "0"}, "is not an IRQ's smp_affinity_list"},
		{"absolute", Change{Path: "/" + p, Value: "0"}, "is not an IRQ's smp_affinity_list"},
		{"escape after", Change{Path: p + "/../../../../etc/shadow", Value: "0"}, "is not an IRQ's"},
		{"core_pattern", Change{Path: "proc/sys/kernel/core_pattern", Value: "0"}, "is not an IRQ's"},
		{"shadow", Change{Path: "etc/shadow", Value: "0"}, "is not an IRQ's"},
		{"queue escape", Change{Path: "sys/class/net/eth0/queues/rx-0/../../../../etc/x", Value: "0"}, "is not an IRQ's"},
		{"smp_affinity mask file", Change{Path: "proc/irq/38/smp_affinity", Value: "f"}, "is not an IRQ's"},
		{"default_smp_affinity", Change{Path: "proc/irq/default_smp_affinity", Value: "f"}, "is not an IRQ's"},
		{"negative irq", Change{Path: "proc/irq/-1/smp_affinity_list", Value: "0"}, "is not an IRQ's"},
		{"huge irq", Change{Path: "proc/irq/99999999999/smp_affinity_list", Value: "0"}, "is not valid"},
		{"overflowing irq", Change{Path: "proc/irq/999999999999999999999999/smp_affinity_list", Value: "0"}, "is not valid"},
		{"trailing slash", Change{Path: p + "/", Value: "0"}, "is not an IRQ's"},
		{"bad value", Change{Path: p, Value: "0-3x"}, "value"},
		{"mask value", Change{Path: p, Value: "ff,ffffffff"}, "value"},
		{"value past the cap", Change{Path: p, Value: longList}, "longer than"},
	})
}

func TestIRQAffinityCheckFillsIRQ(t *testing.T) {
	c := Change{Kind: KindIRQAffinity, Target: "irq 38", Path: "proc/irq/38/smp_affinity_list", Value: "0"}
	if err := Check(&c); err != nil {
		t.Fatal(err)
	}
	if c.IRQ == nil || *c.IRQ != 38 {
		t.Errorf("IRQ = %v after Check, want 38 from the path", c.IRQ)
	}
	built := IRQAffinity(41, "irq 41", mustSet(t, "1-2"), "why")
	if err := Check(&built); err != nil {
		t.Errorf("IRQAffinity's own change is refused: %v", err)
	}
	if built.Path != kernel.IRQAffinityListPath(41) || built.Value != "1-2" || *built.IRQ != 41 || built.Reason != "why" {
		t.Errorf("IRQAffinity = %+v", built)
	}
}

func TestIRQAffinitySame(t *testing.T) {
	runSame(t, irqAffinityKind, []sameCase{
		{a: "0-3", b: "0,1,2,3\n", same: true},
		{a: "0-3", b: " 3,2,1,0 ", same: true},
		{a: "0-15:2/4", b: "0,1,4,5,8,9,12,13", same: true},
		{a: "0-3", b: "0-2", same: false},
		{a: "0", b: "", same: false},
		{a: "", b: "", same: true},
		{a: "0-3", b: "f", err: true},
		{a: "0-3", b: longList, err: true},
	})
	if got := irqAffinityKind.Expected(&Change{Value: "0-3"}); got != "0-3" {
		t.Errorf("Expected = %q, want the value", got)
	}
}

func TestIRQAffinityFile(t *testing.T) {
	const p = "proc/irq/38/smp_affinity_list"
	fs := tree(t, map[string]string{
		p:                                     "0-3\n",
		"proc/irq/38/effective_affinity_list": "2\n",
		"proc/irq/39/smp_affinity_list":       "0-3\n",
	})
	env := &Env{FS: fs}
	c := IRQAffinity(38, "irq 38", mustSet(t, "1"), "")

	readThenWrite(t, irqAffinityKind, env, &c, "0-3")
	if got, err := irqAffinityKind.Read(env, &c); err != nil || got != "1" {
		t.Errorf("Read after Write = %q, %v; want 1", got, err)
	}
	if got := fileContent(t, fs, p); got != "1" {
		t.Errorf("file holds %q after Write, want exactly the value", got)
	}
	// Written 1, delivered to 2: the kernel moves it at its next interrupt.
	if got := irqAffinityKind.AfterWrite(env, &c); got != "effective 2: move pending until its next interrupt" {
		t.Errorf("AfterWrite = %q, want the effective affinity and the pending move", got)
	}
	c.Status, c.Note = StatusDone, irqAffinityKind.AfterWrite(env, &c)
	if !MovePending(&c) {
		t.Errorf("MovePending(%q) = false", c.Note)
	}
	// Once it fired on 1 the move is done.
	if err := fs.WriteFile("proc/irq/38/effective_affinity_list", "1\n"); err != nil {
		t.Fatal(err)
	}
	if got := irqAffinityKind.AfterWrite(env, &c); got != "effective 1" {
		t.Errorf("AfterWrite = %q once delivered inside the new list, want only the effective affinity", got)
	}
	c.Note = irqAffinityKind.AfterWrite(env, &c)
	if MovePending(&c) {
		t.Errorf("MovePending(%q) = true", c.Note)
	}
	if err := irqAffinityKind.Restore(env, &c); err != nil {
		t.Fatal(err)
	}
	if got := fileContent(t, fs, p); got != "0-3" {
		t.Errorf("file holds %q after Restore, want Old 0-3", got)
	}
	if got := fileContent(t, fs, "proc/irq/39/smp_affinity_list"); got != "0-3\n" {
		t.Errorf("another IRQ's file changed: %q", got)
	}

	// An IRQ without effective_affinity_list notes nothing.
	c39 := IRQAffinity(39, "irq 39", mustSet(t, "1"), "")
	if got := irqAffinityKind.AfterWrite(env, &c39); got != "" {
		t.Errorf("AfterWrite without effective_affinity_list = %q", got)
	}

	// An IRQ the machine does not have.
	gone := IRQAffinity(40, "irq 40", mustSet(t, "1"), "")
	_, err := irqAffinityKind.Read(env, &gone)
	errIs(t, "Read of a missing file", err, kernel.ErrUnsupported)
	errIs(t, "Write of a missing file", irqAffinityKind.Write(env, &gone, "1"), kernel.ErrUnsupported)
	if fs.Exists(gone.Path) {
		t.Errorf("Write created %s", gone.Path)
	}
}
