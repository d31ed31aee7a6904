package main

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/irqpilot/irqpilot/internal/cpuset"
	"github.com/irqpilot/irqpilot/internal/host"
)

// testdata/snapshots/pending-move.tar.gz is this project's 2-CPU VM
// captured (capture --redact) right after IRQ 24 (ACPI:Ged, IO-APIC, last
// fired on CPU 0) was written to CPU 1: x86 moves it at its next interrupt,
// so it is allowed on 1 and still lands on 0. inventory says the move is
// pending, for that IRQ only.
func TestInventoryPendingMove(t *testing.T) {
	snap := filepath.Join(snapshotsDir, "pending-move.tar.gz")
	h, _ := inventoryJSON(t, "--snapshot", snap)
	var pending []int
	for i := range h.IRQs {
		if h.IRQs[i].MovePending() {
			pending = append(pending, h.IRQs[i].Number)
		}
	}
	if len(pending) != 1 || pending[0] != 24 {
		t.Fatalf("IRQs with a pending move: %v, want [24]", pending)
	}
	text := string(invRun(t, "--snapshot", snap, "inventory"))
	var lines []string
	for _, l := range strings.Split(text, "\n") {
		if strings.Contains(l, host.MovePendingNote) {
			lines = append(lines, strings.TrimSpace(l))
		}
	}
	if len(lines) != 1 || !strings.HasPrefix(lines[0], "irq 24 ACPI:Ged  allowed 1  lands on 0 (move pending until its next interrupt)") {
		t.Errorf("lines saying a move is pending: %q, want irq 24's only\n%s", lines, text)
	}
}

// A group of like IRQs summarised on one line counts its pending moves; a
// device queue's row says it in its "lands" cell.
func TestInventoryPendingGroupAndRow(t *testing.T) {
	set := func(s string) *cpuset.Set { v := cpuset.MustParse(s); return &v }
	var qs []*host.IRQ
	for i := 0; i < 6; i++ {
		q := &host.IRQ{Number: 100 + i, Actions: []string{fmt.Sprintf("irdma-ceq%d", i)}, Chip: "PCI-MSIX", Affinity: set("0-3"), EffectiveAffinity: set("1")}
		if i < 2 {
			q.Affinity = set("2") // written, still on 1
		}
		qs = append(qs, q)
	}
	h := &host.Host{}
	for _, q := range qs {
		h.IRQs = append(h.IRQs, *q)
	}
	tx := &inventoryText{h: h}
	if got := tx.groupLine(qs); !strings.HasSuffix(got, "  2 moves pending until their next interrupt") {
		t.Errorf("group line %q does not count its 2 pending moves", got)
	}
	if got := tx.groupLine(qs[2:]); strings.Contains(got, "pending") {
		t.Errorf("group line %q: nothing is pending", got)
	}
	n := 100
	if cells := tx.irqCells(&n); cells[2] != "1 (move pending until its next interrupt)" {
		t.Errorf("queue row cells %q: the lands cell does not say the move is pending", cells)
	}
}
