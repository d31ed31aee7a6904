package apply

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/irqpilot/irqpilot/internal/setting"
)

func trimmed(m map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range m {
		out[k] = strings.TrimSpace(v)
	}
	return out
}

// planB keeps irq 40 (to another CPU) and nothing else of sampleChanges.
func planB() []setting.Change {
	return []setting.Change{{Kind: setting.KindIRQAffinity, Target: "irq 40", Path: "proc/irq/40/smp_affinity_list", Value: "3"}}
}

// Plan B over plan A: Leftovers lists what A set that B does not mention
// (and not what B sets, nor what A left as it was); ApplyReplacing restores
// them in B's journal; reverting B puts A's state back, reverting A the
// original.
func TestReplaceRestoresLeftoversInOneJournal(t *testing.T) {
	fs := tree(t, baseTree)
	orig := trimmed(snapshotFiles(t, fs, paths(baseTree)))
	a := &Applier{Env: setting.Env{FS: fs}, StateDir: t.TempDir()}
	if _, err := a.Apply(sampleChanges(), Meta{PlanFile: "a.yaml"}); err != nil {
		t.Fatal(err)
	}
	afterA := trimmed(snapshotFiles(t, fs, paths(baseTree)))

	left, err := a.Leftovers(planB())
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, c := range left {
		got[c.Path] = c.Value
		if c.Status != setting.StatusPending || !strings.Contains(c.Reason, "not in this plan") {
			t.Errorf("leftover %s: status %s reason %q", c.Target, c.Status, c.Reason)
		}
	}
	want := map[string]string{
		"sys/class/net/veth0/queues/rx-0/rps_cpus":     "00000000",
		"sys/class/net/veth0/queues/rx-0/rps_flow_cnt": "0",
		"sys/class/net/veth0/queues/tx-0/xps_cpus":     "00000000",
		"proc/sys/net/core/rps_sock_flow_entries":      "0",
	}
	if len(got) != len(want) {
		t.Errorf("leftovers %v, want %v", got, want)
	}
	for p, v := range want {
		if got[p] != v {
			t.Errorf("leftover %s restores to %q, want %q", p, got[p], v)
		}
	}

	res, kept, err := a.ApplyReplacing(planB(), Meta{PlanFile: "b.yaml"})
	if err != nil || len(kept) != 0 {
		t.Fatalf("replace: %v, kept %v", err, kept)
	}
	if res.Changed != 5 {
		t.Errorf("replace changed %d settings, want 5 (irq 40 and four leftovers)", res.Changed)
	}
	now := trimmed(snapshotFiles(t, fs, paths(baseTree)))
	for p, v := range want {
		if now[p] != strings.TrimSpace(orig[p]) {
			t.Errorf("after replace %s = %q, want %q", p, now[p], v)
		}
	}
	if now["proc/irq/40/smp_affinity_list"] != "3" {
		t.Errorf("irq 40 = %q, want plan B's 3", now["proc/irq/40/smp_affinity_list"])
	}
	if left, _ := a.Leftovers(planB()); len(left) != 0 {
		t.Errorf("after replace, leftovers %v", left)
	}
	if _, err := a.Revert("", false); err != nil {
		t.Fatal(err)
	}
	if now := trimmed(snapshotFiles(t, fs, paths(baseTree))); !sameState(now, afterA) {
		t.Errorf("after reverting B: %v, want A's %v", now, afterA)
	}
	if _, err := a.Revert("", false); err != nil {
		t.Fatal(err)
	}
	if now := trimmed(snapshotFiles(t, fs, paths(baseTree))); !sameState(now, orig) {
		t.Errorf("after reverting A: %v, want %v", now, orig)
	}
}

// A failure while --replace restores a leftover rolls back both the plan's
// writes and the restores already made: the machine is as plan A left it,
// A's journal still applied.
func TestReplaceFailureRollsBackBoth(t *testing.T) {
	fs := tree(t, baseTree)
	a := &Applier{Env: setting.Env{FS: fs}, StateDir: t.TempDir()}
	if _, err := a.Apply(sampleChanges(), Meta{PlanFile: "a.yaml"}); err != nil {
		t.Fatal(err)
	}
	afterA := trimmed(snapshotFiles(t, fs, paths(baseTree)))
	bad := filepath.Join(fs.Root(), "sys/class/net/veth0/queues/tx-0/xps_cpus")
	a.BeforeWrite = func(i int, e *setting.Change) {
		if e.Target == "veth0 tx-0" {
			os.Remove(bad)
			os.Mkdir(bad, 0o755)
		}
	}
	res, _, err := a.ApplyReplacing(planB(), Meta{PlanFile: "b.yaml"})
	if err == nil || !strings.Contains(err.Error(), "veth0 tx-0") {
		t.Fatalf("replace with a failing restore: err = %v", err)
	}
	if res == nil || res.Journal == nil || res.Journal.State != StateRolledBack {
		t.Fatalf("journal %+v", res)
	}
	os.Remove(bad)
	os.WriteFile(bad, []byte(afterA["sys/class/net/veth0/queues/tx-0/xps_cpus"]), 0o644)
	if now := trimmed(snapshotFiles(t, fs, paths(baseTree))); !sameState(now, afterA) {
		t.Errorf("after the failed replace: %v, want plan A's state %v", now, afterA)
	}
	hist, _ := History(a.StateDir)
	if len(hist) != 2 || hist[0].State != StateApplied {
		t.Errorf("history after failed replace: %d journals, first %s", len(hist), hist[0].State)
	}
}

// Reverting a journal that changed a device's queues in another network
// namespace is refused, naming the device, the namespace and the command.
func TestRevertWrongNetNSMessage(t *testing.T) {
	e := &WrongNetNSError{Journal: "20261122T103000Z", Devices: []string{"uxv1"}, StateDir: "/tmp/s"}
	e.Want.Name, e.Want.Inode = "ux-a", 7
	e.Here.Initial = true
	msg := e.Error()
	for _, want := range []string{"device uxv1 is in namespace ux-a", "ip netns exec ux-a irqpilot revert --to 20261122T103000Z --state-dir /tmp/s", "host's initial namespace"} {
		if !strings.Contains(msg, want) {
			t.Errorf("%q does not say %q", msg, want)
		}
	}
	j := &Journal{ID: "x", Entries: []setting.Change{
		{Kind: setting.KindRPSCPUs, Target: "uxv1 rx-0", Path: "sys/class/net/uxv1/queues/rx-0/rps_cpus", Device: "uxv1", Value: "1", Old: "0", Status: setting.StatusDone},
		{Kind: setting.KindIRQAffinity, Target: "irq 40", Path: "proc/irq/40/smp_affinity_list", Status: setting.StatusDone},
	}}
	if d := journalNetDevices(j); len(d) != 1 || d[0] != "uxv1" {
		t.Errorf("journal devices %v, want [uxv1]", d)
	}
}
