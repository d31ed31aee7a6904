package apply

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/irqpilot/irqpilot/internal/host"
	"github.com/irqpilot/irqpilot/internal/kernel"
	"github.com/irqpilot/irqpilot/internal/livetest"
	"github.com/irqpilot/irqpilot/internal/setting"
)

// tree builds a small kernel tree in a temp dir: files hold what a real
// kernel would print.
func tree(t *testing.T, files map[string]string) *kernel.FS {
	t.Helper()
	return kernel.New(livetest.WriteTree(t, files))
}

func snapshotFiles(t *testing.T, fs *kernel.FS, paths []string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, p := range paths {
		b, err := fs.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		out[p] = string(b)
	}
	return out
}

var baseTree = map[string]string{
	"proc/irq/40/smp_affinity_list":                "0-3\n",
	"proc/irq/40/effective_affinity_list":          "1\n",
	"proc/irq/41/smp_affinity_list":                "0-3\n",
	"sys/class/net/veth0/queues/rx-0/rps_cpus":     "00000000\n",
	"sys/class/net/veth0/queues/rx-0/rps_flow_cnt": "0\n",
	"sys/class/net/veth0/queues/tx-0/xps_cpus":     "00000000\n",
	"proc/sys/net/core/rps_sock_flow_entries":      "0\n",
	"sys/class/net/veth0/queues/rx-1/rps_cpus":     "00000000\n",
	"sys/class/net/veth0/queues/rx-1/rps_flow_cnt": "0\n",
}

func paths(m map[string]string) []string {
	var out []string
	for p := range m {
		out = append(out, p)
	}
	return out
}

func sampleChanges() []setting.Change {
	return []setting.Change{
		{Kind: setting.KindIRQAffinity, Target: "irq 40", Path: "proc/irq/40/smp_affinity_list", Value: "2"},
		{Kind: setting.KindIRQAffinity, Target: "irq 41", Path: "proc/irq/41/smp_affinity_list", Value: "0-3"}, // already so
		{Kind: setting.KindRPSCPUs, Target: "veth0 rx-0", Path: "sys/class/net/veth0/queues/rx-0/rps_cpus", Value: "e"},
		{Kind: setting.KindRPSFlowCnt, Target: "veth0 rx-0", Path: "sys/class/net/veth0/queues/rx-0/rps_flow_cnt", Value: "4096"},
		{Kind: setting.KindXPSCPUs, Target: "veth0 tx-0", Path: "sys/class/net/veth0/queues/tx-0/xps_cpus", Value: "1"},
		{Kind: setting.KindSysctl, Target: "rps_sock_flow_entries", Path: "proc/sys/net/core/rps_sock_flow_entries", Value: "32768"},
	}
}

func TestApplyReapplyRevert(t *testing.T) {
	fs := tree(t, baseTree)
	before := snapshotFiles(t, fs, paths(baseTree))
	a := &Applier{Env: setting.Env{FS: fs}, StateDir: t.TempDir()}

	res, err := a.Apply(sampleChanges(), Meta{PlanFile: "p.yaml", PlanHash: "abc"})
	if err != nil {
		t.Fatal(err)
	}
	if res.Changed != 5 || res.Unchanged != 1 || res.Journal == nil {
		t.Fatalf("changed=%d unchanged=%d journal=%v", res.Changed, res.Unchanged, res.Journal)
	}
	if got, _ := fs.ReadSettingFile("proc/irq/40/smp_affinity_list"); got != "2" {
		t.Errorf("irq 40 affinity = %q", got)
	}
	if got, _ := fs.ReadSettingFile("sys/class/net/veth0/queues/rx-0/rps_cpus"); got != "e" {
		t.Errorf("rps_cpus = %q", got)
	}
	// Written 2, still delivered to 1 (a tree never moves it): pending.
	if res.Entries[0].Note != "effective 1: move pending until its next interrupt" {
		t.Errorf("irq 40 note = %q, want the effective affinity and the pending move", res.Entries[0].Note)
	}

	// Re-applying changes nothing and writes no journal.
	res2, err := a.Apply(sampleChanges(), Meta{})
	if err != nil {
		t.Fatal(err)
	}
	if res2.Changed != 0 || res2.Unchanged != 6 || res2.Journal != nil {
		t.Fatalf("re-apply: changed=%d unchanged=%d journal=%v", res2.Changed, res2.Unchanged, res2.Journal)
	}

	hist, err := History(a.StateDir)
	if err != nil || len(hist) != 1 || hist[0].State != StateApplied || hist[0].PlanHash != "abc" {
		t.Fatalf("history = %+v, %v", hist, err)
	}

	j, err := a.Revert("", false)
	if err != nil {
		t.Fatal(err)
	}
	if j.State != StateReverted {
		t.Errorf("state after revert = %s", j.State)
	}
	after := snapshotFiles(t, fs, paths(baseTree))
	for p := range before {
		// The tree's files had a trailing newline, as the kernel prints;
		// revert writes the trimmed old value. Compare what the kernel would show.
		if strings.TrimSpace(before[p]) != strings.TrimSpace(after[p]) {
			t.Errorf("%s: before %q, after revert %q", p, before[p], after[p])
		}
	}
	if _, err := a.Revert(j.ID, false); err == nil || !strings.Contains(err.Error(), "already reverted") {
		t.Errorf("second revert of %s: err = %v", j.ID, err)
	}
}

func TestApplyRollsBackOnFailure(t *testing.T) {
	fs := tree(t, baseTree)
	before := snapshotFiles(t, fs, paths(baseTree))
	// The fourth write fails: its target is a directory, which the kernel
	// file write cannot open.
	bad := filepath.Join(fs.Root(), "sys/class/net/veth0/queues/rx-1/rps_cpus")
	changes := append(sampleChanges(), setting.Change{Kind: setting.KindRPSCPUs, Target: "veth0 rx-1", Path: "sys/class/net/veth0/queues/rx-1/rps_cpus", Value: "3"})
	a := &Applier{Env: setting.Env{FS: fs}, StateDir: t.TempDir(), BeforeWrite: func(i int, e *setting.Change) {
		if e.Target == "veth0 rx-1" {
			os.Remove(bad)
			os.Mkdir(bad, 0o755)
		}
	}}
	res, err := a.Apply(changes, Meta{})
	if err == nil {
		t.Fatal("apply succeeded although a write failed")
	}
	if !strings.Contains(err.Error(), "veth0 rx-1") || !strings.Contains(err.Error(), "restored") {
		t.Errorf("error does not name the change and the rollback: %v", err)
	}
	if res.Journal.State != StateRolledBack {
		t.Errorf("journal state = %s", res.Journal.State)
	}
	os.Remove(bad)
	os.WriteFile(bad, []byte(before["sys/class/net/veth0/queues/rx-1/rps_cpus"]), 0o644)
	after := snapshotFiles(t, fs, paths(baseTree))
	for p := range before {
		if strings.TrimSpace(before[p]) != strings.TrimSpace(after[p]) {
			t.Errorf("%s: before %q, after rollback %q", p, before[p], after[p])
		}
	}
}

func TestReadBackMismatchRollsBack(t *testing.T) {
	fs := tree(t, baseTree)
	// A hook that makes the kernel "ignore" the write: after the write to
	// irq 40 lands, the next entry's hook rewrites it, but verify runs right
	// after each write, so instead simulate a kernel that clamps: rewrite
	// before verify is not possible from outside; use a value the file will
	// not read back as equal — a flow count of 3 reads back as 3 in a plain
	// file, while the kernel would show 4.
	c := []setting.Change{{Kind: setting.KindRPSFlowCnt, Target: "veth0 rx-0", Path: "sys/class/net/veth0/queues/rx-0/rps_flow_cnt", Value: "3"}}
	a := &Applier{Env: setting.Env{FS: fs}, StateDir: t.TempDir()}
	_, err := a.Apply(c, Meta{})
	if err == nil || !strings.Contains(err.Error(), "read back") {
		t.Fatalf("want a read-back error, got %v", err)
	}
	if got, _ := fs.ReadSettingFile("sys/class/net/veth0/queues/rx-0/rps_flow_cnt"); got != "0" {
		t.Errorf("not rolled back: %q", got)
	}
}

func TestValidateRejectsBadInput(t *testing.T) {
	cases := map[string][]setting.Change{
		"both write": {
			{Kind: setting.KindIRQAffinity, Target: "irq 40", Path: "proc/irq/40/smp_affinity_list", Value: "1"},
			{Kind: setting.KindIRQAffinity, Target: "irq 40 again", Path: "proc/irq/40/smp_affinity_list", Value: "2"},
		},
		`value "zz"`:       {{Kind: setting.KindRPSCPUs, Target: "veth0 rx-0", Path: "sys/class/net/veth0/queues/rx-0/rps_cpus", Value: "zz"}},
		"not a cpu number": {{Kind: setting.KindIRQAffinity, Target: "irq 40", Path: "proc/irq/40/smp_affinity_list", Value: "a-b"}},
		"thread id":        {{Kind: setting.KindThreadAffinity, Target: "memcached", Value: "1"}},
		// Two selectors (comm: and pid:) pinning one thread name both lines.
		"plan lines 5 and 9 both set": {
			{Kind: setting.KindThreadAffinity, Target: "memcached pid 7 thread 7", TID: 7, Value: "1", Line: 5},
			{Kind: setting.KindThreadAffinity, Target: "memcached pid 7 thread 7", TID: 7, Value: "2", Line: 9},
		},
		// Each kind writes only its own kernel files.
		`path "x" is not an IRQ's smp_affinity_list`:      {{Kind: setting.KindIRQAffinity, Target: "irq 40", Path: "x", Value: "1"}},
		`is not a rx-N/rps_cpus file of a network device`: {{Kind: setting.KindRPSCPUs, Target: "t", Path: "sys/class/net/../../../etc/passwd/queues/rx-0/rps_cpus", Value: "1"}},
		`is not a net.core sysctl`:                        {{Kind: setting.KindSysctl, Target: "t", Path: "proc/sys/kernel/core_pattern", Value: "1"}},
		`is not an irqbalance configuration file`:         {{Kind: setting.KindIrqbalanceBan, Target: "t", Path: "etc/shadow", Value: "1"}},
		`rps_flow_cnt 536870912 is out of range`:          {{Kind: setting.KindRPSFlowCnt, Target: "t", Path: "sys/class/net/veth0/queues/rx-0/rps_flow_cnt", Value: "536870912"}},
		`setting kind "mystery" is not known`:             {{Kind: "mystery", Target: "t", Path: "proc/irq/40/smp_affinity_list", Value: "1"}},
	}
	for want, changes := range cases {
		fs := tree(t, baseTree)
		before := snapshotFiles(t, fs, paths(baseTree))
		a := &Applier{Env: setting.Env{FS: fs}, StateDir: t.TempDir()}
		_, err := a.Apply(changes, Meta{})
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: err = %v", want, err)
		}
		if after := snapshotFiles(t, fs, paths(baseTree)); fmt.Sprint(after) != fmt.Sprint(before) {
			t.Errorf("%s: files changed although the input was rejected", want)
		}
	}
}

func TestLockExcludesSecondApply(t *testing.T) {
	dir := t.TempDir()
	l, err := AcquireLock(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release()
	a := &Applier{Env: setting.Env{FS: tree(t, baseTree)}, StateDir: dir}
	_, err = a.Apply(sampleChanges(), Meta{})
	if err == nil || !strings.Contains(err.Error(), "pid "+strconv.Itoa(os.Getpid())) {
		t.Fatalf("second apply while locked: %v", err)
	}
}

// TestCrashBetweenWrites kills a real process between two writes (through
// the BeforeWrite hook) and checks that revert restores everything from the
// journal it left behind.
func TestCrashBetweenWrites(t *testing.T) {
	if os.Getenv("IRQPILOT_CRASH_CHILD") != "" {
		crashChild()
		return
	}
	for _, at := range []int{1, 3, 4} {
		t.Run(fmt.Sprintf("killed-before-write-%d", at), func(t *testing.T) {
			fs := tree(t, baseTree)
			state := t.TempDir()
			before := snapshotFiles(t, fs, paths(baseTree))
			cmd := exec.Command(os.Args[0], "-test.run", "^TestCrashBetweenWrites$")
			cmd.Env = append(os.Environ(), "IRQPILOT_CRASH_CHILD=1", "ROOT="+fs.Root(), "STATE="+state, "AT="+strconv.Itoa(at))
			out, err := cmd.CombinedOutput()
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.Exited() {
				t.Fatalf("child was not killed by a signal (%v): %s", err, out)
			}
			changed := 0
			for p, v := range snapshotFiles(t, fs, paths(baseTree)) {
				if strings.TrimSpace(v) != strings.TrimSpace(before[p]) {
					changed++
				}
			}
			if changed != at {
				t.Fatalf("child killed before write %d left %d files changed, want %d", at, changed, at)
			}
			hist, err := History(state)
			if err != nil || len(hist) != 1 || hist[0].State != StateApplying {
				t.Fatalf("journal after crash: %+v %v", hist, err)
			}
			a := &Applier{Env: setting.Env{FS: fs}, StateDir: state}
			if _, err := a.Revert("", false); err != nil {
				t.Fatal(err)
			}
			for p, v := range snapshotFiles(t, fs, paths(baseTree)) {
				if strings.TrimSpace(v) != strings.TrimSpace(before[p]) {
					t.Errorf("%s: %q after revert, want %q", p, v, before[p])
				}
			}
		})
	}
}

func crashChild() {
	at, _ := strconv.Atoi(os.Getenv("AT"))
	a := &Applier{Env: setting.Env{FS: kernel.New(os.Getenv("ROOT"))}, StateDir: os.Getenv("STATE"), BeforeWrite: func(i int, e *setting.Change) {
		if i == at {
			p, _ := os.FindProcess(os.Getpid())
			p.Kill() // SIGKILL: no deferred code, no cleanup, like a crash
			select {}
		}
	}}
	a.Apply(sampleChanges(), Meta{})
	os.Exit(0)
}

// A failure in the middle: what was written is restored, what came after
// was never attempted and is neither written nor "restored".
func TestFailureMidListLeavesLaterChangesUntouched(t *testing.T) {
	fs := tree(t, baseTree)
	before := snapshotFiles(t, fs, paths(baseTree))
	bad := filepath.Join(fs.Root(), "sys/class/net/veth0/queues/rx-0/rps_cpus")
	a := &Applier{Env: setting.Env{FS: fs}, StateDir: t.TempDir(), BeforeWrite: func(i int, e *setting.Change) {
		if e.Target == "veth0 rx-0" && e.Kind == setting.KindRPSCPUs {
			os.Remove(bad)
			os.Mkdir(bad, 0o755) // the write of change 3 fails
		}
	}}
	res, err := a.Apply(sampleChanges(), Meta{})
	if err == nil {
		t.Fatal("apply succeeded although change 3 failed")
	}
	os.Remove(bad)
	os.WriteFile(bad, []byte(before["sys/class/net/veth0/queues/rx-0/rps_cpus"]), 0o644)
	want := []setting.Status{setting.StatusRestored, setting.StatusUnchanged, setting.StatusFailed, setting.StatusNotAttempted, setting.StatusNotAttempted, setting.StatusNotAttempted}
	for i, e := range res.Entries {
		if e.Status != want[i] {
			t.Errorf("entry %d (%s %s): status %s, want %s", i, e.Target, e.Kind, e.Status, want[i])
		}
	}
	for p, v := range snapshotFiles(t, fs, paths(baseTree)) {
		if strings.TrimSpace(v) != strings.TrimSpace(before[p]) {
			t.Errorf("%s: %q after rollback, want %q", p, v, before[p])
		}
	}
}

// When the rollback itself fails, the journal says so and revert — the
// command the error message recommends — finishes the job later.
func TestRollbackIncompleteCanBeReverted(t *testing.T) {
	fs := tree(t, baseTree)
	a40 := filepath.Join(fs.Root(), "proc/irq/40/smp_affinity_list")
	rx := filepath.Join(fs.Root(), "sys/class/net/veth0/queues/rx-0/rps_cpus")
	a := &Applier{Env: setting.Env{FS: fs}, StateDir: t.TempDir(), BeforeWrite: func(i int, e *setting.Change) {
		if i == 1 { // after irq 40 was written: break both files
			os.Remove(a40)
			os.Mkdir(a40, 0o755)
			os.Remove(rx)
			os.Mkdir(rx, 0o755)
		}
	}}
	res, err := a.Apply(sampleChanges(), Meta{})
	if err == nil || !strings.Contains(err.Error(), "ROLLBACK INCOMPLETE") {
		t.Fatalf("want an incomplete rollback, got %v", err)
	}
	if res.Journal.State != StateRollbackIncomplete {
		t.Fatalf("journal state %s", res.Journal.State)
	}
	// The operator repairs the cause; revert restores irq 40.
	os.Remove(a40)
	os.WriteFile(a40, []byte("2\n"), 0o644)
	os.Remove(rx)
	os.WriteFile(rx, []byte("00000000\n"), 0o644)
	if _, err := a.Revert("", false); err != nil {
		t.Fatal(err)
	}
	if got, _ := fs.ReadSettingFile("proc/irq/40/smp_affinity_list"); got != "0-3" {
		t.Errorf("irq 40 = %q after revert, want 0-3", got)
	}
}

// Reverting an older apply whose settings a newer apply changed again is
// refused: it would silently undo the newer one.
func TestRevertOlderJournalRefused(t *testing.T) {
	fs := tree(t, baseTree)
	a := &Applier{Env: setting.Env{FS: fs}, StateDir: t.TempDir()}
	p := "proc/irq/40/smp_affinity_list"
	r1, err := a.Apply([]setting.Change{{Kind: setting.KindIRQAffinity, Target: "irq 40", Path: p, Value: "2"}}, Meta{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Apply([]setting.Change{{Kind: setting.KindIRQAffinity, Target: "irq 40", Path: p, Value: "3"}}, Meta{}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Revert(r1.Journal.ID, false); err == nil || !strings.Contains(err.Error(), "revert that one first") {
		t.Fatalf("older revert: %v", err)
	}
	if got, _ := fs.ReadSettingFile(p); got != "3" {
		t.Fatalf("refused revert changed irq 40 to %q", got)
	}
	if _, err := a.Revert("", false); err != nil { // the newer one: back to 2
		t.Fatal(err)
	}
	if _, err := a.Revert(r1.Journal.ID, false); err != nil {
		t.Fatal(err)
	}
	if got, _ := fs.ReadSettingFile(p); got != "0-3" {
		t.Errorf("irq 40 = %q after both reverts, want 0-3", got)
	}
}

// The irqbalance ban edits a configuration file; revert restores it byte
// for byte (comments, other variables) or removes it when it did not exist.
func TestIrqbalanceBanFileRestoredExactly(t *testing.T) {
	const cfg = "# irqbalance options\nIRQBALANCE_ONESHOT=0\nexport IRQBALANCE_BANNED_CPULIST=\"3\" # old\nOPTIONS=\"--policyscript=/x\"\n"
	for name, initial := range map[string]*string{"existing": ptrTo(cfg), "absent": nil} {
		t.Run(name, func(t *testing.T) {
			files := map[string]string{"proc/irq/40/smp_affinity_list": "0-3\n"}
			if initial != nil {
				files["etc/default/irqbalance"] = *initial
			}
			fs := tree(t, files)
			a := &Applier{Env: setting.Env{FS: fs}, StateDir: t.TempDir()}
			c := []setting.Change{{Kind: setting.KindIrqbalanceBan, Target: "irqbalance banned CPUs", Path: "etc/default/irqbalance", Value: "0-1"}}
			if _, err := a.Apply(c, Meta{}); err != nil {
				t.Fatal(err)
			}
			got, _ := fs.ReadFile("etc/default/irqbalance")
			if set, found, err := host.BannedInConfig(got); err != nil || !found || set.String() != "0-1" {
				t.Fatalf("after apply the file bans %v (found %v, %v):\n%s", set, found, err, got)
			}
			if _, err := a.Revert("", false); err != nil {
				t.Fatal(err)
			}
			after, err := os.ReadFile(filepath.Join(fs.Root(), "etc/default/irqbalance"))
			switch {
			case initial == nil && !os.IsNotExist(err):
				t.Errorf("file created by apply survives revert: %q %v", after, err)
			case initial != nil && string(after) != *initial:
				t.Errorf("after revert:\n%q\nwant\n%q", after, *initial)
			}
		})
	}
}

func ptrTo(s string) *string { return &s }

// DiffWith returns what Diff returns, pass after pass, while the kernel
// values change behind it (drift, and back); changed changes are validated
// again, so a bad change is refused even after good passes.
func TestDiffWithMemoMatchesDiff(t *testing.T) {
	fs := tree(t, baseTree)
	a := New(fs, t.TempDir())
	changes := sampleChanges()
	var m DiffMemo
	check := func(step string) {
		t.Helper()
		want, err := a.Diff(changes)
		if err != nil {
			t.Fatalf("%s: Diff: %v", step, err)
		}
		got, err := a.DiffWith(changes, &m)
		if err != nil {
			t.Fatalf("%s: DiffWith: %v", step, err)
		}
		if d := cmp.Diff(want, got); d != "" {
			t.Fatalf("%s: DiffWith differs from Diff (-Diff +DiffWith):\n%s", step, d)
		}
	}
	check("first")
	check("again")
	write := func(p, v string) {
		if err := os.WriteFile(filepath.Join(fs.Root(), p), []byte(v), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("proc/irq/41/smp_affinity_list", "2\n") // drifted
	check("irq 41 drifted")
	write("proc/irq/41/smp_affinity_list", "0-3\n") // back
	check("irq 41 back")
	write("proc/irq/40/smp_affinity_list", "2\n") // now as wanted
	check("irq 40 in force")
	os.Remove(filepath.Join(fs.Root(), "sys/class/net/veth0/queues/tx-0/xps_cpus")) // skipped
	check("xps gone")
	changes[1].Value = "1"
	check("a change edited")
	changes = append(changes, setting.Change{Kind: setting.KindRPSCPUs, Target: "veth0 rx-1", Path: "sys/class/net/veth0/queues/rx-1/rps_cpus", Value: "zz"})
	if _, err := a.DiffWith(changes, &m); err == nil || !strings.Contains(err.Error(), `value "zz"`) {
		t.Errorf("a bad change after good passes: %v", err)
	}
	changes = changes[:len(changes)-1]
	check("bad change removed")
}
