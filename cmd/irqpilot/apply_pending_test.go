package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/irqpilot/irqpilot/internal/host"
	"github.com/irqpilot/irqpilot/internal/hostgen"
	"github.com/irqpilot/irqpilot/internal/kernel"
)

// apply on a generated host (a tree never moves an interrupt, as an idle
// x86 IRQ is not moved until it fires): the write is done and said to be
// pending; applying again changes nothing and still says so.
func TestApplyPendingMove(t *testing.T) {
	root := t.TempDir()
	if err := hostgen.Generate(root, hostgen.Spec{CPUs: 8, Packages: 1, Nodes: 1, ThreadsPerCore: 2, Offline: hostgen.NoOffline,
		NICs: []hostgen.NICSpec{{Name: "eth0", Driver: "ice", Slot: 3, Queues: 4}}, NVMeQueues: -1}); err != nil {
		t.Fatal(err)
	}
	h, err := host.Read(kernel.New(root), host.Options{})
	if err != nil {
		t.Fatal(err)
	}
	q := h.IRQ(*h.NIC("eth0").RxQueues[3].IRQ)
	lands := *q.EffectiveAffinity
	want := 0
	for lands.Contains(want) {
		want++
	}
	plan := filepath.Join(t.TempDir(), "plan.yaml")
	if err := os.WriteFile(plan, []byte("version: 1\nirqs:\n  - device: eth0\n    queue: 3\n    cpus: \""+strconv.Itoa(want)+"\"\n    reason: test\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	state := filepath.Join(t.TempDir(), "state")
	note := "effective " + lands.String() + ": " + host.MovePendingNote
	summary := ": " + host.MovePendingNote + "; the kernel moves it when it next fires"
	for i, status := range []string{"done", "unchanged"} {
		out := string(invRun(t, "--root", root, "apply", "--state-dir", state, plan))
		var row string
		for _, l := range strings.Split(out, "\n") {
			if strings.Contains(l, "irq "+strconv.Itoa(q.Number)) && strings.Contains(l, "smp_affinity_list") {
				row = l
			}
		}
		if !strings.HasPrefix(row, status) || !strings.HasSuffix(strings.TrimSpace(row), note) {
			t.Errorf("apply %d: irq %d row %q, want %s noted %q\n%s", i+1, q.Number, row, status, note, out)
		}
		if !strings.Contains(out, summary) {
			t.Errorf("apply %d: no line saying the move is pending:\n%s", i+1, out)
		}
	}
}
