package apply

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/irqpilot/irqpilot/internal/kernel"
	"github.com/irqpilot/irqpilot/internal/setting"
)

// A journal whose device is gone used to make revert fail ("restore "0":
// … no such file or directory"), stay applied, block every later revert
// and refuse --to an older journal. The gone settings are now reported gone
// and the journal completes; the older one then reverts.
func TestRevertCompletesWhenDeviceGone(t *testing.T) {
	fs := tree(t, baseTree)
	clock := time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC)
	a := &Applier{Env: setting.Env{FS: fs}, StateDir: filepath.Join(t.TempDir(), "state"), Now: func() time.Time { return clock }}
	older, err := a.Apply([]setting.Change{
		{Kind: setting.KindIRQAffinity, Target: "irq 41", Path: "proc/irq/41/smp_affinity_list", Value: "1"},
	}, Meta{})
	if err != nil {
		t.Fatal(err)
	}
	clock = clock.Add(time.Minute)
	newer, err := a.Apply(sampleChanges(), Meta{})
	if err != nil {
		t.Fatal(err)
	}
	// The device goes away (a veth deleted with its namespace).
	if err := os.RemoveAll(fs.Path("sys/class/net/veth0")); err != nil {
		t.Fatal(err)
	}

	j, err := a.Revert("", false)
	if err != nil {
		t.Fatalf("revert with the device gone: %v", err)
	}
	if j.ID != newer.Journal.ID || j.State != StateReverted {
		t.Fatalf("reverted %s, state %s; want %s reverted", j.ID, j.State, newer.Journal.ID)
	}
	gone := 0
	for _, e := range j.Entries {
		switch {
		case strings.HasPrefix(e.Target, "veth0"):
			if e.Status != setting.StatusGone || !strings.Contains(e.Note, "no longer exists") {
				t.Errorf("%s %s: %s (%s), want gone", e.Target, e.Name(), e.Status, e.Note)
			}
			gone++
		case e.Target == "irq 40" || e.Target == "rps_sock_flow_entries":
			if e.Status != setting.StatusRestored {
				t.Errorf("%s: %s, want restored", e.Target, e.Status)
			}
		}
	}
	if gone != 3 {
		t.Errorf("%d veth0 entries gone, want 3", gone)
	}
	if got, _ := fs.ReadSettingFile("proc/irq/40/smp_affinity_list"); got != "0-3" {
		t.Errorf("irq 40 = %q after revert, want 0-3", got)
	}
	// The journal is no longer in the way of the older one.
	if j, err := a.Revert(older.Journal.ID, false); err != nil || j.State != StateReverted {
		t.Fatalf("revert --to the older journal: %v", err)
	}
	if got, _ := fs.ReadSettingFile("proc/irq/41/smp_affinity_list"); got != "0-3" {
		t.Errorf("irq 41 = %q after revert, want 0-3", got)
	}
	if _, err := a.Revert("", false); !errors.Is(err, ErrNothingToRevert) {
		t.Errorf("third revert: %v, want nothing to revert", err)
	}
}

// closeWrites counts the writes (IN_CLOSE_WRITE) to the files being watched
// while fn runs.
func closeWrites(t *testing.T, files []string, fn func()) map[string]int {
	t.Helper()
	fd, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
	if err != nil {
		t.Skip("no inotify:", err)
	}
	defer unix.Close(fd)
	wd := map[int32]string{}
	for _, f := range files {
		w, err := unix.InotifyAddWatch(fd, f, unix.IN_CLOSE_WRITE)
		if err != nil {
			t.Fatal(err)
		}
		wd[int32(w)] = f
	}
	fn()
	out := map[string]int{}
	buf := make([]byte, 1<<16)
	for {
		n, err := unix.Read(fd, buf)
		if n <= 0 || err != nil {
			break
		}
		for off := 0; off+unix.SizeofInotifyEvent <= n; {
			ev := (*unix.InotifyEvent)(unsafe.Pointer(&buf[off]))
			out[wd[ev.Wd]]++
			off += unix.SizeofInotifyEvent + int(ev.Len)
		}
	}
	return out
}

// An agent session: its first journal moves IRQ 40; someone changes it
// again (drift); the agent's repair journal moves it back, journaling the
// drifted value as "old". Reverting journal by journal writes the drifted
// value on the way back (and takes one command per journal). revert
// --session undoes the session in one step and writes each setting once,
// with its value from before the session.
func TestRevertSessionRestoresPreSessionValues(t *testing.T) {
	fs, mk, tick := sessionAppliers(t)
	irq40 := setting.Change{Kind: setting.KindIRQAffinity, Target: "irq 40", Path: "proc/irq/40/smp_affinity_list", Value: "1"}
	rps := setting.Change{Kind: setting.KindRPSCPUs, Target: "veth0 rx-0", Path: "sys/class/net/veth0/queues/rx-0/rps_cpus", Value: "3"}

	// Before the session: another apply (a different session) holds irq 41.
	other := mk("other")
	if _, err := other.Apply([]setting.Change{{Kind: setting.KindIRQAffinity, Target: "irq 41", Path: "proc/irq/41/smp_affinity_list", Value: "2"}}, Meta{}); err != nil {
		t.Fatal(err)
	}
	agent := mk("agent-run-1")
	tick()
	if _, err := agent.Apply([]setting.Change{irq40}, Meta{PlanFile: "agent"}); err != nil {
		t.Fatal(err)
	}
	// Drift, then the agent's repair (which also adds RPS).
	if err := os.WriteFile(fs.Path("proc/irq/40/smp_affinity_list"), []byte("2-3\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tick()
	repair, err := agent.Apply([]setting.Change{irq40, rps}, Meta{PlanFile: "agent"})
	if err != nil || repair.Journal == nil {
		t.Fatalf("repair: %v", err)
	}
	if e := repair.Journal.Entries[0]; e.Old != "2-3" {
		t.Fatalf("repair journaled old %q, want the drifted 2-3", e.Old)
	}

	var js []*Journal
	writes := closeWrites(t, []string{fs.Path("proc/irq/40/smp_affinity_list"), fs.Path("proc/irq/41/smp_affinity_list")}, func() {
		js, err = mk("").RevertMany(Selection{}, false)
	})
	if err != nil {
		t.Fatalf("revert --session: %v", err)
	}
	if len(js) != 2 {
		t.Fatalf("reverted %d journals, want the session's 2", len(js))
	}
	for _, j := range js {
		if j.State != StateReverted || j.Session != "agent-run-1" {
			t.Errorf("journal %s: state %s, session %q", j.ID, j.State, j.Session)
		}
	}
	if got, _ := fs.ReadSettingFile("proc/irq/40/smp_affinity_list"); got != "0-3" {
		t.Errorf("irq 40 = %q, want 0-3 (from before the session)", got)
	}
	if got, _ := fs.ReadSettingFile("sys/class/net/veth0/queues/rx-0/rps_cpus"); got != "00000000" {
		t.Errorf("rps_cpus = %q, want 00000000", got)
	}
	if got, _ := fs.ReadSettingFile("proc/irq/41/smp_affinity_list"); got != "2" {
		t.Errorf("irq 41 = %q: another session's setting was touched", got)
	}
	if n := writes[fs.Path("proc/irq/40/smp_affinity_list")]; n != 1 {
		t.Errorf("irq 40 written %d times, want once (the drifted value must not be replayed)", n)
	}
	if n := writes[fs.Path("proc/irq/41/smp_affinity_list")]; n != 0 {
		t.Errorf("irq 41 written %d times, want 0", n)
	}
	if e := js[0].Entries[0]; e.Status != setting.StatusRestored || !strings.Contains(e.Note, "before journal") || e.RestoredBy != js[1].ID {
		t.Errorf("repair's irq 40 entry: %s %q, restored by %q (want %s)", e.Status, e.Note, e.RestoredBy, js[1].ID)
	}
	if e := js[1].Entries[0]; e.RestoredBy != "" {
		t.Errorf("the first journal's irq 40 entry made the write, yet says restored by %q", e.RestoredBy)
	}

	// --all then undoes what is left (the other session), in one step.
	js, err = mk("").RevertMany(Selection{All: true}, false)
	if err != nil || len(js) != 1 || js[0].Session != "other" {
		t.Fatalf("revert --all: %v, %d journals", err, len(js))
	}
	if got, _ := fs.ReadSettingFile("proc/irq/41/smp_affinity_list"); got != "0-3" {
		t.Errorf("irq 41 = %q after --all, want 0-3", got)
	}
	if _, err := mk("").RevertMany(Selection{All: true}, false); !errors.Is(err, ErrNothingToRevert) {
		t.Errorf("--all with nothing applied: %v", err)
	}
}

// A journal of another session, newer and holding the same setting, is in
// the way of revert --session, as it is of revert --to.
func TestRevertSessionRefusesNewerOutsider(t *testing.T) {
	fs, mk, tick := sessionAppliers(t)
	c := setting.Change{Kind: setting.KindIRQAffinity, Target: "irq 40", Path: "proc/irq/40/smp_affinity_list", Value: "1"}
	if _, err := mk("s1").Apply([]setting.Change{c}, Meta{}); err != nil {
		t.Fatal(err)
	}
	tick()
	c.Value = "2"
	if _, err := mk("s2").Apply([]setting.Change{c}, Meta{}); err != nil {
		t.Fatal(err)
	}
	_, err := mk("").RevertMany(Selection{Session: "s1"}, false)
	var ref *RefusedError
	if !errors.As(err, &ref) || !strings.Contains(err.Error(), "not part of this revert") {
		t.Fatalf("revert --session s1 under a newer s2: %v", err)
	}
	if got, _ := fs.ReadSettingFile("proc/irq/40/smp_affinity_list"); got != "2" {
		t.Errorf("irq 40 = %q after a refused revert", got)
	}
}

// The refusal for a journal of a namespace that is gone says so and names
// --force, instead of "run revert there: ip netns exec NS", which cannot
// work any more.
func TestWrongNetNSGoneMessage(t *testing.T) {
	e := &WrongNetNSError{Journal: "20261122T103000Z", Devices: []string{"vq0"}, Gone: true}
	e.Want.Name = "gone-ns"
	msg := e.Error()
	for _, want := range []string{"vq0", "gone-ns", "no longer exists", "--force", "Nothing was changed"} {
		if !strings.Contains(msg, want) {
			t.Errorf("%q does not say %s", msg, want)
		}
	}
	if strings.Contains(msg, "ip netns exec") {
		t.Errorf("%q suggests running in a namespace that is gone", msg)
	}
}

// sessionAppliers returns the base tree, a maker of appliers of a session
// on it, all with one state directory and a clock that stands still, and
// tick, which moves that clock on by a minute.
func sessionAppliers(t *testing.T) (fs *kernel.FS, mk func(session string) *Applier, tick func()) {
	fs = tree(t, baseTree)
	clock := time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC)
	state := filepath.Join(t.TempDir(), "state")
	mk = func(session string) *Applier {
		return &Applier{Env: setting.Env{FS: fs}, StateDir: state, Session: session, Now: func() time.Time { return clock }}
	}
	return fs, mk, func() { clock = clock.Add(time.Minute) }
}

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

// The command the refusal prints runs as printed whatever the namespace
// and state directory are called: both are quoted for the shell, as
// apply's undo line is.
func TestRevertWrongNetNSMessageQuoted(t *testing.T) {
	e := &WrongNetNSError{Journal: "20261122T103000Z", Devices: []string{"uxv1"}, StateDir: "/srv/st odd;x"}
	e.Want.Name, e.Want.Inode = "au4-$(id)", 7
	e.Here.Initial = true
	want := `ip netns exec 'au4-$(id)' irqpilot revert --to 20261122T103000Z --state-dir '/srv/st odd;x'`
	if msg := e.Error(); !strings.Contains(msg, want) {
		t.Errorf("%q does not say %q", msg, want)
	}
	// A session's revert is repeated there as a session's revert: one of
	// its journals alone would be refused while newer ones stay applied.
	e.Args = []string{"--session=s-1"}
	want = `ip netns exec 'au4-$(id)' irqpilot revert --session=s-1 --state-dir '/srv/st odd;x'`
	if msg := e.Error(); !strings.Contains(msg, want) {
		t.Errorf("%q does not say %q", msg, want)
	}
	for s, q := range map[string]string{"plain-name_1": "plain-name_1", "it's": `'it'\''s'`, "": "''"} {
		if got := ShellQuote(s); got != q {
			t.Errorf("ShellQuote(%q) = %s, want %s", s, got, q)
		}
	}
}
