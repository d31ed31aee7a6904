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
	if got, _ := fs.ReadString("proc/irq/40/smp_affinity_list"); got != "0-3" {
		t.Errorf("irq 40 = %q after revert, want 0-3", got)
	}
	// The journal is no longer in the way of the older one.
	if j, err := a.Revert(older.Journal.ID, false); err != nil || j.State != StateReverted {
		t.Fatalf("revert --to the older journal: %v", err)
	}
	if got, _ := fs.ReadString("proc/irq/41/smp_affinity_list"); got != "0-3" {
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
	if got, _ := fs.ReadString("proc/irq/40/smp_affinity_list"); got != "0-3" {
		t.Errorf("irq 40 = %q, want 0-3 (from before the session)", got)
	}
	if got, _ := fs.ReadString("sys/class/net/veth0/queues/rx-0/rps_cpus"); got != "00000000" {
		t.Errorf("rps_cpus = %q, want 00000000", got)
	}
	if got, _ := fs.ReadString("proc/irq/41/smp_affinity_list"); got != "2" {
		t.Errorf("irq 41 = %q: another session's setting was touched", got)
	}
	if n := writes[fs.Path("proc/irq/40/smp_affinity_list")]; n != 1 {
		t.Errorf("irq 40 written %d times, want once (the drifted value must not be replayed)", n)
	}
	if n := writes[fs.Path("proc/irq/41/smp_affinity_list")]; n != 0 {
		t.Errorf("irq 41 written %d times, want 0", n)
	}
	if e := js[0].Entries[0]; e.Status != setting.StatusRestored || !strings.Contains(e.Note, "before journal") {
		t.Errorf("repair's irq 40 entry: %s %q", e.Status, e.Note)
	}

	// --all then undoes what is left (the other session), in one step.
	js, err = mk("").RevertMany(Selection{All: true}, false)
	if err != nil || len(js) != 1 || js[0].Session != "other" {
		t.Fatalf("revert --all: %v, %d journals", err, len(js))
	}
	if got, _ := fs.ReadString("proc/irq/41/smp_affinity_list"); got != "0-3" {
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
	if got, _ := fs.ReadString("proc/irq/40/smp_affinity_list"); got != "2" {
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
