package apply

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/irqpilot/irqpilot/internal/host"
	"github.com/irqpilot/irqpilot/internal/kernel"
	"github.com/irqpilot/irqpilot/internal/setting"
)

// The breaks of issue 15 (items 1, 2 and 7), each reproduced: the tests
// failed on the code before the fix.

// applied applies sampleChanges to a fresh tree and returns the applier.
func applied(t *testing.T) (*Applier, map[string]string) {
	t.Helper()
	fs := tree(t, baseTree)
	before := snapshotFiles(t, fs, paths(baseTree))
	a := &Applier{Env: setting.Env{FS: fs}, StateDir: filepath.Join(t.TempDir(), "state")}
	res, err := a.Apply(sampleChanges(), Meta{PlanFile: "p.yaml"})
	if err != nil || res.Journal == nil {
		t.Fatalf("apply: %v %+v", err, res)
	}
	return a, before
}

// Item 1: a file in the journal directory that fails to parse made revert
// print "nothing to revert" and exit 0 with everything still applied.
func TestRevertWithUnreadableJournalFiles(t *testing.T) {
	for name, content := range map[string]string{
		"19990101T000000Z.json":   "",              // empty, older
		"19990101T000001Z.json":   "{\"id\": 12}",  // garbled, older
		"notes.json":              "not a journal", // not a journal name: ignored
		"20990101T000000Z.json.x": "",              // not a journal name
	} {
		t.Run(name, func(t *testing.T) {
			a, before := applied(t)
			if err := os.WriteFile(filepath.Join(journalDir(a.StateDir), name), []byte(content), 0o600); err != nil {
				t.Fatal(err)
			}
			j, err := a.Revert("", false)
			isJournal := strings.HasPrefix(name, "1999") && strings.HasSuffix(name, ".json")
			var herr *HistoryError
			switch {
			case isJournal && !errors.As(err, &herr):
				t.Fatalf("revert: %v, want the unreadable %s named", err, name)
			case isJournal && !strings.Contains(err.Error(), name):
				t.Errorf("error does not name the file: %v", err)
			case !isJournal && err != nil:
				t.Fatalf("revert: %v", err)
			}
			if j == nil || j.State != StateReverted {
				t.Fatalf("journal %+v not reverted", j)
			}
			if after := snapshotFiles(t, a.Env.FS, paths(baseTree)); !sameState(after, before) {
				t.Errorf("not restored:\n%v\n%v", before, after)
			}
		})
	}
}

// An unreadable journal newer than every readable applied one may be the
// one in force: revert refuses and writes nothing; with no readable applied
// journal at all, the error names the file instead of "nothing to revert".
func TestRevertRefusesWhenNewerJournalUnreadable(t *testing.T) {
	a, _ := applied(t)
	applied := snapshotFiles(t, a.Env.FS, paths(baseTree))
	bad := filepath.Join(journalDir(a.StateDir), "20991231T235959Z.json")
	if err := os.WriteFile(bad, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := a.Revert("", false)
	var ref *RefusedError
	if !errors.As(err, &ref) || !strings.Contains(err.Error(), "20991231T235959Z.json") {
		t.Fatalf("revert: %v, want a refusal naming the newer file", err)
	}
	if after := snapshotFiles(t, a.Env.FS, paths(baseTree)); !sameState(after, applied) {
		t.Error("revert wrote although it refused")
	}
	// Only unreadable journals: an error naming them, not "nothing to revert".
	b := &Applier{Env: a.Env, StateDir: filepath.Join(t.TempDir(), "s2")}
	if err := SecureStateDir(b.StateDir); err != nil {
		t.Fatal(err)
	}
	os.Mkdir(journalDir(b.StateDir), 0o700)
	os.WriteFile(filepath.Join(journalDir(b.StateDir), "20200101T000000Z.json"), []byte("{"), 0o600)
	_, err = b.Revert("", false)
	if err == nil || errors.Is(err, ErrNothingToRevert) || !strings.Contains(err.Error(), "20200101T000000Z.json") {
		t.Errorf("revert with only an unreadable journal: %v", err)
	}
	if _, err := History(b.StateDir); err == nil || !strings.Contains(err.Error(), "20200101T000000Z.json") {
		t.Errorf("history: %v, want the unreadable file named", err)
	}
}

// Item 2: a state directory another user can write is refused, before
// anything is read or written.
func TestStateDirWritableByOthersRefused(t *testing.T) {
	a, before := applied(t)
	// The journal as apply wrote it, but in a world-writable directory.
	if err := os.Chmod(a.StateDir, 0o777); err != nil {
		t.Fatal(err)
	}
	for what, f := range map[string]func() error{
		"revert":  func() error { _, err := a.Revert("", false); return err },
		"apply":   func() error { _, err := a.Apply(sampleChanges(), Meta{}); return err },
		"history": func() error { _, err := History(a.StateDir); return err },
	} {
		if err := f(); err == nil || !strings.Contains(err.Error(), "writable by group or others") {
			t.Errorf("%s in a world-writable state dir: %v", what, err)
		}
	}
	_ = before
	// Its parent too.
	parent := t.TempDir()
	os.Chmod(parent, 0o777)
	if err := SecureStateDir(filepath.Join(parent, "state")); err == nil || !strings.Contains(err.Error(), parent) {
		t.Errorf("state dir below a world-writable parent: %v", err)
	}
	// A sticky root-owned parent such as /tmp is fine (others cannot rename
	// or remove our directory) when we are root.
	if os.Geteuid() == 0 {
		sticky := t.TempDir()
		os.Chmod(sticky, os.ModeSticky|0o777)
		if err := SecureStateDir(filepath.Join(sticky, "state")); err != nil {
			t.Errorf("state dir below a sticky root-owned parent: %v", err)
		}
	}
}

// A forged journal — an irqbalance-ban entry whose file is /etc/passwd, an
// IRQ entry pointing elsewhere — is refused whole: revert writes nothing.
func TestForgedJournalRefused(t *testing.T) {
	for name, forge := range map[string]func(e *setting.Change){
		"ban entry on etc/passwd": func(e *setting.Change) {
			e.Kind, e.Path, e.Value, e.Old = setting.KindIrqbalanceBan, "etc/passwd", "1", ""
			s := "root::0:0::/:/bin/sh\n"
			e.OldFile = &s
		},
		"irq entry on another file": func(e *setting.Change) { e.Path = "proc/sys/kernel/core_pattern" },
		"path escaping":             func(e *setting.Change) { e.Path = "proc/irq/40/../../../etc/x" },
		"unknown kind":              func(e *setting.Change) { e.Kind = "exec" },
		"thread zero":               func(e *setting.Change) { e.Kind, e.Path, e.TID = setting.KindThreadAffinity, "", 0 },
		"unknown status":            func(e *setting.Change) { e.Status = "whatever" },
	} {
		t.Run(name, func(t *testing.T) {
			a, _ := applied(t)
			js, err := History(a.StateDir)
			if err != nil || len(js) != 1 {
				t.Fatal(err, js)
			}
			j := js[0]
			forge(&j.Entries[0])
			data, _ := json.Marshal(j)
			if err := os.WriteFile(j.path, data, 0o600); err != nil {
				t.Fatal(err)
			}
			state := snapshotFiles(t, a.Env.FS, paths(baseTree))
			_, err = a.Revert(j.ID, false)
			if err == nil || !strings.Contains(err.Error(), "refused") {
				t.Fatalf("revert of a forged journal: %v", err)
			}
			if after := snapshotFiles(t, a.Env.FS, paths(baseTree)); !sameState(after, state) {
				t.Error("revert wrote although the journal was refused")
			}
			if _, err := os.Stat(a.Env.FS.Path("etc/passwd")); err == nil {
				t.Error("forged ban entry created a file")
			}
		})
	}
}

// A lock symlink made apply truncate the file it pointed to.
func TestLockSymlinkRefused(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	if err := SecureStateDir(dir); err != nil {
		t.Fatal(err)
	}
	victim := filepath.Join(t.TempDir(), "victim")
	os.WriteFile(victim, []byte("precious\n"), 0o644)
	if err := os.Symlink(victim, filepath.Join(dir, "lock")); err != nil {
		t.Fatal(err)
	}
	a := &Applier{Env: setting.Env{FS: tree(t, baseTree)}, StateDir: dir}
	if _, err := a.Apply(sampleChanges(), Meta{}); err == nil || !strings.Contains(err.Error(), "symbolic link") {
		t.Errorf("apply with a lock symlink: %v", err)
	}
	if b, _ := os.ReadFile(victim); string(b) != "precious\n" {
		t.Errorf("victim now %q", b)
	}
	// A journal that is a symlink is refused too.
	jdir := journalDir(dir)
	os.Mkdir(jdir, 0o700)
	os.Symlink(victim, filepath.Join(jdir, "20200101T000000Z.json"))
	if _, err := LoadJournal(dir, "20200101T000000Z"); err == nil || !strings.Contains(err.Error(), "symbolic link") {
		t.Errorf("journal symlink: %v", err)
	}
}

// Item 7: when the journal cannot be written mid-apply, the kernel is
// restored and the error says so; the journal is never left claiming the
// changes are in force.
func TestJournalWriteFailureMidApply(t *testing.T) {
	fs := tree(t, baseTree)
	before := snapshotFiles(t, fs, paths(baseTree))
	a := &Applier{Env: setting.Env{FS: fs}, StateDir: filepath.Join(t.TempDir(), "state")}
	a.BeforeWrite = func(i int, e *setting.Change) {
		if i == 2 {
			// The journal directory vanishes and a file takes its place:
			// every later save fails (as on ENOSPC or a read-only disk).
			d := journalDir(a.StateDir)
			os.RemoveAll(d)
			os.WriteFile(d, nil, 0o600)
		}
	}
	res, err := a.Apply(sampleChanges(), Meta{})
	if err == nil || !strings.Contains(err.Error(), "every change already made was restored") {
		t.Fatalf("apply: %v", err)
	}
	if after := snapshotFiles(t, fs, paths(baseTree)); !sameState(after, before) {
		t.Errorf("kernel not restored:\n%v\n%v", before, after)
	}
	if res == nil || res.Changed != 0 {
		t.Errorf("result %+v claims changes in force", res)
	}
}

// sameState compares two snapshots of kernel files as the kernel would show
// them (a test tree keeps the trailing newline the tests wrote).
func sameState(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if strings.TrimSpace(v) != strings.TrimSpace(b[k]) {
			return false
		}
	}
	return true
}

// Review finding: journals of the previous irqpilot, whose caps were wider,
// must still revert: a recorded rps_flow_cnt of 2^21 is within the
// kernel's limits even though a new plan may not ask for it.
func TestOldJournalAboveNewCapsStillReverts(t *testing.T) {
	a, _ := applied(t)
	js, err := History(a.StateDir)
	if err != nil || len(js) != 1 {
		t.Fatal(err)
	}
	j := js[0]
	for i := range j.Entries {
		if j.Entries[i].Kind == setting.KindRPSFlowCnt {
			j.Entries[i].Value = "2097152"
		}
	}
	data, _ := json.Marshal(j)
	os.WriteFile(j.path, data, 0o600)
	if _, err := a.Revert("", false); err != nil {
		t.Fatalf("revert of a journal above today's caps: %v", err)
	}
	// But a value revert would write past the kernel's own limit is refused.
	b, _ := applied(t)
	js, _ = History(b.StateDir)
	j = js[0]
	for i := range j.Entries {
		if j.Entries[i].Kind == setting.KindSysctl {
			j.Entries[i].Old = "-5"
		}
	}
	data, _ = json.Marshal(j)
	os.WriteFile(j.path, data, 0o600)
	if _, err := b.Revert("", false); err == nil || !strings.Contains(err.Error(), "out of range") {
		t.Errorf("revert of old value -5: %v", err)
	}
}

// fakeEthtool accepts a set but then cannot read the device back, as a NIC
// does while its driver resets after `ethtool -C`.
type fakeEthtool struct {
	cur  host.Coalesce
	sets int
}

func (f *fakeEthtool) Coalesce(dev string) (*host.Coalesce, error) {
	if f.sets > 0 {
		return nil, fmt.Errorf("%s: %w", dev, kernel.ErrUnsupported)
	}
	c := f.cur
	return &c, nil
}

func (f *fakeEthtool) SetCoalesce(dev string, m map[string]string) error {
	f.sets++
	if m["rx_usecs"] == "8" {
		f.cur.RxUsecs = 8
	}
	return nil
}

// Review finding: a write that succeeded but could not be read back was
// recorded as skipped, so revert restored nothing. It is a failure now,
// rolled back like any other.
func TestWrittenButUnreadableRollsBack(t *testing.T) {
	eth := &fakeEthtool{cur: host.Coalesce{RxUsecs: 3}}
	a := &Applier{Env: setting.Env{FS: tree(t, baseTree), Ethtool: eth}, StateDir: filepath.Join(t.TempDir(), "s")}
	c := setting.Change{Kind: setting.KindCoalesce, Target: "eth9 coalescing", Device: "eth9", Value: "rx_usecs=8"}
	res, err := a.Apply([]setting.Change{c}, Meta{})
	if err == nil || res == nil || res.Journal == nil {
		t.Fatalf("apply: %v %+v", err, res)
	}
	if got := res.Entries[0].Status; got != setting.StatusRestored && got != setting.StatusDone {
		t.Errorf("entry status %s, want it rolled back (restored)", got)
	}
	if eth.sets < 2 {
		t.Errorf("no restore was attempted (%d sets)", eth.sets)
	}
}

// Review finding: `revert --to OLD` silently undid what a newer, unreadable
// journal may have changed.
func TestRevertToOlderRefusedWhenNewerUnreadable(t *testing.T) {
	a, _ := applied(t)
	js, _ := History(a.StateDir)
	os.WriteFile(filepath.Join(journalDir(a.StateDir), "20991231T235959Z.json"), []byte("{"), 0o600)
	if _, err := a.Revert(js[0].ID, false); err == nil || !strings.Contains(err.Error(), "20991231T235959Z.json") {
		t.Fatalf("revert --to older: %v", err)
	}
	if _, err := a.Revert(js[0].ID, true); err != nil {
		t.Errorf("revert --to older --force: %v", err)
	}
}

// Review finding: a journal from an earlier boot names IRQ numbers and
// thread ids that now mean other things: revert refuses it without --force,
// and with --force never re-pins a thread.
func TestJournalFromEarlierBoot(t *testing.T) {
	files := map[string]string{"proc/sys/kernel/random/boot_id": "boot-A\n"}
	for k, v := range baseTree {
		files[k] = v
	}
	fs := tree(t, files)
	a := &Applier{Env: setting.Env{FS: fs}, StateDir: filepath.Join(t.TempDir(), "s")}
	res, err := a.Apply(sampleChanges(), Meta{})
	if err != nil || res.Journal.BootID != "boot-A" {
		t.Fatalf("apply: %v, boot %q", err, res.Journal.BootID)
	}
	// A thread entry, as if an app had been pinned.
	j, _ := LoadJournal(a.StateDir, res.Journal.ID)
	j.Entries = append(j.Entries, setting.Change{Kind: setting.KindThreadAffinity, Target: "t", TID: 4242, Value: "1", Old: "0-3", Status: setting.StatusDone})
	j.save()
	os.WriteFile(fs.Path("proc/sys/kernel/random/boot_id"), []byte("boot-B\n"), 0o644)
	if _, err := a.Revert("", false); !errors.Is(err, ErrNothingToRevert) || !strings.Contains(err.Error(), "earlier boot") {
		t.Fatalf("revert after a reboot: %v", err)
	}
	if _, err := a.Revert(j.ID, false); err == nil || !strings.Contains(err.Error(), "earlier boot") {
		t.Fatalf("revert --to after a reboot: %v", err)
	}
	got, err := a.Revert(j.ID, true)
	if err != nil {
		t.Fatalf("revert --force: %v", err)
	}
	for _, e := range got.Entries {
		if e.Kind == setting.KindThreadAffinity && e.Status != setting.StatusGone {
			t.Errorf("thread entry %+v after a forced cross-boot revert", e)
		}
	}
}

// The lock's error names the process that holds it now — here flock(1),
// which writes no pid — never this process, whose pid an earlier hold left
// behind; a released lock file names nobody.
func TestAcquireLockNamesTheHolder(t *testing.T) {
	flock, err := exec.LookPath("flock")
	if err != nil {
		t.Skip("flock(1) not installed (util-linux)")
	}
	dir := filepath.Join(t.TempDir(), "state")
	l, err := AcquireLock(dir)
	if err != nil {
		t.Fatal(err)
	}
	l.Release()
	p := filepath.Join(dir, "lock")
	if b, _ := os.ReadFile(p); len(b) != 0 {
		t.Errorf("released lock file still names %q", b)
	}
	// An earlier irqpilot's pid left in the file (a crash before Release)
	// is not trusted either when it is our own.
	os.WriteFile(p, []byte(fmt.Sprintf("%d\n", os.Getpid())), 0o600)

	cmd := exec.Command(flock, p, "sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	var lerr error
	for deadline := time.Now().Add(10 * time.Second); ; {
		l, lerr = AcquireLock(dir)
		if lerr != nil {
			break
		}
		l.Release()
		if time.Now().After(deadline) {
			t.Fatal("flock(1) never took the lock")
		}
		time.Sleep(10 * time.Millisecond)
	}
	msg := lerr.Error()
	if want := fmt.Sprintf("(pid %d, flock)", cmd.Process.Pid); !strings.Contains(msg, want) {
		t.Errorf("error %q does not name the holder %s", msg, want)
	}
	if strings.Contains(msg, fmt.Sprintf("pid %d", os.Getpid())) {
		t.Errorf("error %q names this process, which does not hold the lock", msg)
	}
}
