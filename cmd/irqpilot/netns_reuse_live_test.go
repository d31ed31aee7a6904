package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/irqpilot/irqpilot/internal/kernel"
	"github.com/irqpilot/irqpilot/internal/livetest"
)

// nsInode is the nsfs inode of named namespace name.
func nsInode(t *testing.T, name string) uint64 {
	t.Helper()
	var st syscall.Stat_t
	if err := syscall.Stat(filepath.Join(kernel.RunNetNSDir, name), &st); err != nil {
		t.Fatal(err)
	}
	return st.Ino
}

// Live: a journal applied in a namespace that was then deleted, with
// another namespace now holding its inode (the kernel reuses them) and a
// device of the same name, is not reverted into the newcomer. The reuse
// is made certain by recording the newcomer's inode in the journal, with
// the old namespace's name (and cookie, where the kernel gives one); revert
// there refuses and writes nothing, and --force completes the journal
// (its device settings gone, never written) instead of pointing at a
// namespace that no longer exists.
func TestLiveRevertRefusesReusedNamespaceInode(t *testing.T) {
	livetest.NeedRoot(t, "ip")
	bin := livetest.Irqpilot(t)
	state := stateDir(t)
	old := &vethNamespace{name: livetest.Netns(t, livetest.Name("hd4-old-"))}
	old.exec = []string{"ip", "netns", "exec", old.name}
	livetest.Veth(t, old.name, "vq0", "vq1", 4)
	planFile := filepath.Join(t.TempDir(), "a.yaml")
	os.WriteFile(planFile, []byte("version: 1\nrx_queues:\n  - {device: vq0, queue: 0, rps_cpus: 1, reason: test}\n"), 0o644)
	if out, errOut, code := runIn(t, old, bin, "apply", "--state-dir", state, planFile); code != 0 {
		t.Fatalf("apply in %s: exit %d\n%s%s", old.name, code, out, errOut)
	}
	if err := kernel.DelNetns(old.name); err != nil {
		t.Fatal(err)
	}

	fresh := &vethNamespace{name: livetest.Netns(t, livetest.Name("hd4-new-"))}
	fresh.exec = []string{"ip", "netns", "exec", fresh.name}
	livetest.Veth(t, fresh.name, "vq0", "vq1", 4)
	// Unlike the journal's old value, so that a write there shows.
	livetest.Run(t, "ip", "netns", "exec", fresh.name, "sh", "-c", "echo 2 > /sys/class/net/vq0/queues/rx-0/rps_cpus")
	journals, _ := filepath.Glob(filepath.Join(state, "journal", "*.json"))
	if len(journals) != 1 {
		t.Fatalf("journals %v, want one", journals)
	}
	var j map[string]any
	data, err := os.ReadFile(journals[0])
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &j); err != nil {
		t.Fatal(err)
	}
	ns := j["netns"].(map[string]any)
	if ns["name"] != old.name {
		t.Fatalf("journal's namespace %v, want %s", ns, old.name)
	}
	ns["inode"] = nsInode(t, fresh.name) // the kernel reused the inode
	if data, err = json.MarshalIndent(j, "", "  "); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(journals[0], data, 0o600); err != nil {
		t.Fatal(err)
	}

	before := steeringState(t, fresh)
	_, errOut, code := runIn(t, fresh, bin, "revert", "--state-dir", state)
	if code != 2 || !strings.Contains(errOut, "no longer exists") || !strings.Contains(errOut, "--force") {
		t.Errorf("revert in the namespace that reused the inode: exit %d, %q; want 2, the namespace gone and --force", code, errOut)
	}
	if got := steeringState(t, fresh); got["/sys/class/net/vq0/queues/rx-0/rps_cpus"] != before["/sys/class/net/vq0/queues/rx-0/rps_cpus"] {
		t.Fatalf("revert wrote into %s: rx-0 rps_cpus %q, was %q", fresh.name, got["/sys/class/net/vq0/queues/rx-0/rps_cpus"], before["/sys/class/net/vq0/queues/rx-0/rps_cpus"])
	}
	out, errOut, code := runIn(t, fresh, bin, "--json", "revert", "--force", "--state-dir", state)
	var rev revertOut
	decodeJSON(t, out, &rev)
	if code != 0 || rev.State != "reverted" || countStatus(rev.Entries, "gone") == 0 {
		t.Errorf("revert --force: exit %d, %+v\n%s; want the journal completed, its setting gone", code, rev, errOut)
	}
	if got := steeringState(t, fresh); got["/sys/class/net/vq0/queues/rx-0/rps_cpus"] != before["/sys/class/net/vq0/queues/rx-0/rps_cpus"] {
		t.Errorf("revert --force wrote into %s: rx-0 rps_cpus %q, was %q", fresh.name, got["/sys/class/net/vq0/queues/rx-0/rps_cpus"], before["/sys/class/net/vq0/queues/rx-0/rps_cpus"])
	}
	if _, errOut, code := runIn(t, fresh, bin, "revert", "--state-dir", state); code == 2 {
		t.Errorf("the journal was not completed: a second revert still refuses: %s", errOut)
	}
}
