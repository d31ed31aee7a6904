package setting

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/irqpilot/irqpilot/internal/cpuset"
	"github.com/irqpilot/irqpilot/internal/kernel"
)

const debianConf = "etc/default/irqbalance"

func TestIrqbalanceStateCheck(t *testing.T) {
	runCheck(t, irqbalanceState{}, []checkCase{
		{"running", Change{Value: "running"}, ""},
		{"stopped", Change{Value: "stopped"}, ""},
		{"plan ban", Change{Value: "banned_cpus=1-3"}, ""},
		{"plan ban bad", Change{Value: "banned_cpus=x"}, "x"},
		{"other state", Change{Value: "paused"}, "is not running or stopped"},
		{"empty", Change{Value: ""}, "is not running or stopped"},
		{"a path", Change{Path: "etc/shadow", Value: "stopped"}, "has no file"},
	})
	runSame(t, irqbalanceState{}, []sameCase{
		{a: "running", b: "running\n", same: true},
		{a: "running", b: "stopped", same: false},
	})
}

func TestIrqbalanceStateTree(t *testing.T) {
	h := irqbalanceState{}
	c := Change{Kind: KindIrqbalance, Target: "irqbalance", Value: "stopped", Old: "running"}
	for _, tc := range []struct {
		files map[string]string
		want  string
	}{
		{map[string]string{"proc/77/comm": "irqbalance\n", "proc/77/stat": statLine(77, "irqbalance", 10), "proc/1/comm": "init\n"}, "running"},
		{map[string]string{"proc/1/comm": "init\n", "proc/78/comm": "irqbalance-ui\n"}, "stopped"},
		{map[string]string{}, "stopped"},
	} {
		env := &Env{FS: tree(t, tc.files)}
		if got, err := h.Read(env, &c); err != nil || got != tc.want {
			t.Errorf("Read with %v = %q, %v; want %q", tc.files, got, err, tc.want)
		}
		// Never on a snapshot: the daemon is a live thing.
		errIs(t, "Write on a tree", h.Write(env, &c, "stopped"), kernel.ErrUnsupported)
		errIs(t, "Restore on a tree", h.Restore(env, &c), kernel.ErrUnsupported)
	}
	if pid := IrqbalancePID(tree(t, map[string]string{"proc/77/comm": "irqbalance\n"})); pid != 77 {
		t.Errorf("IrqbalancePID = %d, want 77", pid)
	}
}

func TestIrqbalanceBanCheck(t *testing.T) {
	runCheck(t, irqbalanceBan{}, []checkCase{
		{"debian", Change{Path: debianConf, Value: "1-3"}, ""},
		{"redhat", Change{Path: "etc/sysconfig/irqbalance", Value: "1-3"}, ""},
		{"unset", Change{Path: debianConf, Value: ""}, ""},
		{"with old", Change{Path: debianConf, Value: "1-3", Old: "0"}, ""},
		{"bad value", Change{Path: debianConf, Value: "1-"}, "value"},
		{"bad old", Change{Path: debianConf, Value: "1", Old: "zero"}, "old value"},
		{"no path", Change{Value: "1"}, "is not an irqbalance configuration file"},
		{"absolute", Change{Path: "/" + debianConf, Value: "1"}, "is not an irqbalance configuration file"},
		{"shadow", Change{Path: "etc/shadow", Value: "1"}, "is not an irqbalance configuration file"},
		{"dotdot", Change{Path: "etc/default/../shadow", Value: "1"}, "is not an irqbalance configuration file"},
		{"escape after", Change{Path: debianConf + "/../../shadow", Value: "1"}, "is not an irqbalance configuration file"},
		{"core_pattern", Change{Path: "proc/sys/kernel/core_pattern", Value: "1"}, "is not an irqbalance configuration file"},
		{"queue escape", Change{Path: "sys/class/net/eth0/queues/rx-0/../../../../etc/x", Value: "1"}, "is not an irqbalance configuration file"},
		{"value past the cap", Change{Path: debianConf, Value: longList}, "longer than"},
	})
	runSame(t, irqbalanceBan{}, []sameCase{
		{a: "1-3", b: "1,2,3", same: true},
		{a: "", b: "", same: true},
		{a: "", b: "0", same: false},
	})
}

func TestIrqbalanceBanConstructor(t *testing.T) {
	if c := IrqbalanceBan(tree(t, nil), cpuset.Of(1, 2, 3), "r"); c.Path != debianConf || c.Value != "1-3" || c.Kind != KindIrqbalanceBan {
		t.Errorf("IrqbalanceBan on a machine without a file = %+v, want %s", c, debianConf)
	}
	fs := tree(t, map[string]string{"etc/sysconfig/irqbalance": "IRQBALANCE_ARGS=\n"})
	c := IrqbalanceBan(fs, cpuset.Of(1), "r")
	if c.Path != "etc/sysconfig/irqbalance" {
		t.Errorf("IrqbalanceBan path = %q, want the file that exists", c.Path)
	}
	if err := Check(&c); err != nil {
		t.Errorf("IrqbalanceBan's own change refused: %v", err)
	}
}

// owner returns a config file's mode and owner.
func owner(t *testing.T, fs *kernel.FS, rel string) (os.FileMode, int, int) {
	t.Helper()
	fi, err := os.Lstat(fs.Path(rel))
	if err != nil {
		t.Fatal(err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	return fi.Mode(), int(st.Uid), int(st.Gid)
}

func TestIrqbalanceBanRead(t *testing.T) {
	h := irqbalanceBan{}
	for _, tc := range []struct {
		name, file string
		want       string
		err        bool
	}{
		{"list", "IRQBALANCE_BANNED_CPULIST=\"0,1,2,3\"\n", "0-3", false},
		{"mask", "IRQBALANCE_BANNED_CPUS=f\n", "0-3", false},
		{"list wins", "IRQBALANCE_BANNED_CPUS=f\nIRQBALANCE_BANNED_CPULIST=5\n", "5", false},
		{"export", "export IRQBALANCE_BANNED_CPULIST=2\n", "2", false},
		{"commented", "#IRQBALANCE_BANNED_CPULIST=2\n", "", false},
		{"unset", "IRQBALANCE_ARGS=\n", "", false},
		{"garbage", "IRQBALANCE_BANNED_CPULIST=two\n", "", true},
	} {
		fs := tree(t, map[string]string{debianConf: tc.file})
		c := Change{Kind: KindIrqbalanceBan, Target: "ban", Path: debianConf}
		got, err := h.Read(&Env{FS: fs}, &c)
		if (err != nil) != tc.err || got != tc.want {
			t.Errorf("%s: Read = %q, %v; want %q (error %v)", tc.name, got, err, tc.want, tc.err)
		}
	}
	// No file: nothing banned (a config file, not a kernel setting).
	c := Change{Kind: KindIrqbalanceBan, Target: "ban", Path: debianConf}
	if got, err := h.Read(&Env{FS: tree(t, nil)}, &c); err != nil || got != "" {
		t.Errorf("Read without a file = %q, %v; want nothing banned", got, err)
	}
}

const debianStock = `# irqbalance is a daemon process that distributes interrupts across
# CPUS on SMP systems.
#IRQBALANCE_ONESHOT=
#IRQBALANCE_BANNED_CPULIST=
IRQBALANCE_ARGS="--policyscript=/usr/local/bin/x"
`

func TestIrqbalanceBanWrite(t *testing.T) {
	for _, tc := range []struct {
		name, file, value, want string
	}{
		{"stock", debianStock, "1-3", debianStock +
			"# Set by irqpilot (revert with 'irqpilot revert').\nIRQBALANCE_BANNED_CPULIST=\"1-3\"\n"},
		{"replace in place", "A=1\nIRQBALANCE_BANNED_CPULIST=\"0\"\nB=2\n", "1-3",
			"A=1\nIRQBALANCE_BANNED_CPULIST=\"1-3\"\nB=2\n"},
		{"two lines", "IRQBALANCE_BANNED_CPULIST=0\nA=1\nIRQBALANCE_BANNED_CPULIST=1\n", "2",
			"IRQBALANCE_BANNED_CPULIST=\"2\"\nA=1\n"},
		{"no final newline", "A=1", "2",
			"A=1\n# Set by irqpilot (revert with 'irqpilot revert').\nIRQBALANCE_BANNED_CPULIST=\"2\"\n"},
		{"unset", "A=1\nIRQBALANCE_BANNED_CPULIST=\"0\"\nB=2\n", "", "A=1\nB=2\n"},
		{"export", "A=1\nexport IRQBALANCE_BANNED_CPULIST=0\n", "1", "A=1\nIRQBALANCE_BANNED_CPULIST=\"1\"\n"},
		{"export unset", "export IRQBALANCE_BANNED_CPULIST=0\nA=1\n", "", "A=1\n"},
		{"spaced unset", "  IRQBALANCE_BANNED_CPULIST = \"0\"\nA=1\n", "", "A=1\n"},
		{"mask kept", "IRQBALANCE_BANNED_CPUS=f\n", "4",
			"IRQBALANCE_BANNED_CPUS=f\n# Set by irqpilot (revert with 'irqpilot revert').\nIRQBALANCE_BANNED_CPULIST=\"4\"\n"},
		{"comment kept", "#IRQBALANCE_BANNED_CPULIST=0\n", "4",
			"#IRQBALANCE_BANNED_CPULIST=0\n# Set by irqpilot (revert with 'irqpilot revert').\nIRQBALANCE_BANNED_CPULIST=\"4\"\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs := tree(t, map[string]string{debianConf: tc.file})
			env := &Env{FS: fs}
			h := irqbalanceBan{}
			c := Change{Kind: KindIrqbalanceBan, Target: "ban", Path: debianConf, Value: tc.value}
			if err := h.Write(env, &c, c.Value); err != nil {
				t.Fatal(err)
			}
			if got := fileContent(t, fs, debianConf); got != tc.want {
				t.Errorf("file after Write:\n%s\nwant:\n%s", got, tc.want)
			}
			got, err := h.Read(env, &c)
			if same, _ := h.Same(got, h.Expected(&c)); err != nil || !same {
				t.Errorf("Read after Write = %q, %v; want %q", got, err, h.Expected(&c))
			}
		})
	}
}

// TestIrqbalanceBanKeepRestore: the file's bytes, mode and owner survive a
// Write and come back exactly with Restore.
func TestIrqbalanceBanKeepRestore(t *testing.T) {
	fs := tree(t, map[string]string{debianConf: debianStock})
	full := fs.Path(debianConf)
	if err := os.Chmod(full, 0o640); err != nil {
		t.Fatal(err)
	}
	uid, gid := os.Getuid(), os.Getgid()
	if os.Geteuid() == 0 {
		uid, gid = 1234, 5678
		if err := os.Chown(full, uid, gid); err != nil {
			t.Fatal(err)
		}
	}
	env := &Env{FS: fs}
	h := irqbalanceBan{}
	c := IrqbalanceBan(fs, cpuset.Of(1, 2, 3), "")
	if err := h.Keep(env, &c); err != nil {
		t.Fatal(err)
	}
	if c.OldFile == nil || *c.OldFile != debianStock || c.OldMode != 0o640 ||
		c.OldUID == nil || *c.OldUID != uid || c.OldGID == nil || *c.OldGID != gid {
		t.Fatalf("Keep recorded file %v mode %o uid %s gid %s; want the file, 0640, %d:%d",
			c.OldFile != nil, c.OldMode, showInt(c.OldUID), showInt(c.OldGID), uid, gid)
	}
	if err := h.Write(env, &c, c.Value); err != nil {
		t.Fatal(err)
	}
	if m, u, g := owner(t, fs, debianConf); m != 0o640 || u != uid || g != gid {
		t.Errorf("after Write: mode %v owner %d:%d, want 0640 %d:%d", m, u, g, uid, gid)
	}
	// Restore after the ban variable alone changed again (an admin or
	// irqbalance tooling rewrote it): the exact old bytes, mode and owner.
	if err := os.WriteFile(full, []byte(strings.Replace(fileContent(t, fs, debianConf), `"1-3"`, `"1"`, 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(full, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := h.Restore(env, &c); err != nil {
		t.Fatal(err)
	}
	if got := fileContent(t, fs, debianConf); got != debianStock {
		t.Errorf("after Restore the file is\n%s\nwant the old bytes", got)
	}
	if m, u, g := owner(t, fs, debianConf); m != 0o640 || u != uid || g != gid {
		t.Errorf("after Restore: mode %v owner %d:%d, want 0640 %d:%d", m, u, g, uid, gid)
	}
	// Restore after the administrator edited other lines since the apply:
	// their edit, mode and owner stay; only the ban goes back (to none).
	if err := h.Write(env, &c, c.Value); err != nil {
		t.Fatal(err)
	}
	edited := strings.Replace(fileContent(t, fs, debianConf), "/usr/local/bin/x", "/usr/local/bin/y", 1) + "IRQBALANCE_ONESHOT=1\n"
	if err := os.WriteFile(full, []byte(edited), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(full, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := h.Restore(env, &c); err != nil {
		t.Fatal(err)
	}
	want := strings.Replace(debianStock, "/usr/local/bin/x", "/usr/local/bin/y", 1) + "IRQBALANCE_ONESHOT=1\n"
	if got := fileContent(t, fs, debianConf); got != want {
		t.Errorf("after Restore over an admin's edit the file is\n%s\nwant their edit without the ban:\n%s", got, want)
	}
	if m, _, _ := owner(t, fs, debianConf); m != 0o600 {
		t.Errorf("after Restore over an admin's edit: mode %v, want theirs (0600)", m)
	}
	if leftovers, _ := filepath.Glob(filepath.Join(filepath.Dir(full), ".irqbalance*")); len(leftovers) > 0 {
		t.Errorf("temporary files left behind: %v", leftovers)
	}
}

// TestIrqbalanceBanCreated: a file apply created is removed by Restore.
func TestIrqbalanceBanCreated(t *testing.T) {
	fs := tree(t, nil)
	env := &Env{FS: fs}
	h := irqbalanceBan{}
	c := IrqbalanceBan(fs, cpuset.Of(2), "")
	if err := h.Keep(env, &c); err != nil {
		t.Fatal(err)
	}
	if c.OldFile != nil || c.OldMode != 0 || c.OldUID != nil || c.OldGID != nil {
		t.Fatalf("Keep of a missing file recorded %+v", c)
	}
	if err := h.Write(env, &c, c.Value); err != nil {
		t.Fatal(err)
	}
	if got, err := h.Read(env, &c); err != nil || got != "2" {
		t.Errorf("Read after Write = %q, %v", got, err)
	}
	if m, _, _ := owner(t, fs, debianConf); m != 0o644 {
		t.Errorf("a new file has mode %v, want 0644", m)
	}
	if err := h.Restore(env, &c); err != nil {
		t.Fatal(err)
	}
	if fs.Exists(debianConf) {
		t.Errorf("Restore left the file apply created")
	}
	// Restoring twice (a revert run again) is harmless.
	if err := h.Restore(env, &c); err != nil {
		t.Errorf("second Restore: %v", err)
	}
	// A file apply created that the administrator added to since stays,
	// without the ban.
	if err := h.Write(env, &c, c.Value); err != nil {
		t.Fatal(err)
	}
	full := fs.Path(debianConf)
	if err := os.WriteFile(full, []byte(fileContent(t, fs, debianConf)+"IRQBALANCE_ARGS=\"--foreground\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := h.Restore(env, &c); err != nil {
		t.Fatal(err)
	}
	if got := fileContent(t, fs, debianConf); got != "IRQBALANCE_ARGS=\"--foreground\"\n" {
		t.Errorf("Restore of a created file an admin added to left\n%s", got)
	}
}

// TestIrqbalanceBanSymlink: a symlink at the configuration file's place is
// never followed: Read, Keep and Write refuse it, Restore replaces the link
// itself; the file it points to is never touched.
func TestIrqbalanceBanSymlink(t *testing.T) {
	const victim = "etc/shadow"
	fs := tree(t, map[string]string{victim: "root:x:0:0\n", "etc/default/.keep": ""})
	if err := os.Symlink("../shadow", fs.Path(debianConf)); err != nil {
		t.Fatal(err)
	}
	env := &Env{FS: fs}
	h := irqbalanceBan{}
	c := Change{Kind: KindIrqbalanceBan, Target: "ban", Path: debianConf, Value: "1"}
	if _, err := h.Read(env, &c); err == nil {
		t.Error("Read followed a symlink")
	}
	if err := h.Keep(env, &c); err == nil {
		t.Error("Keep followed a symlink")
	}
	if err := h.Write(env, &c, "1"); err == nil {
		t.Error("Write through a symlink succeeded")
	}
	if got := fileContent(t, fs, victim); got != "root:x:0:0\n" {
		t.Fatalf("the symlink's target changed: %q", got)
	}
	if fi, err := os.Lstat(fs.Path(debianConf)); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Errorf("Write removed the symlink it refused: %v %v", fi, err)
	}

	// A journal's Restore writes a file in the link's place.
	old := "IRQBALANCE_ARGS=\n"
	c.OldFile, c.OldMode = &old, 0o644
	if err := h.Restore(env, &c); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Lstat(fs.Path(debianConf)); err != nil || !fi.Mode().IsRegular() {
		t.Errorf("after Restore %s is %v, %v; want a regular file", debianConf, fi, err)
	}
	if got := fileContent(t, fs, debianConf); got != old {
		t.Errorf("after Restore the file holds %q", got)
	}
	if got := fileContent(t, fs, victim); got != "root:x:0:0\n" {
		t.Errorf("Restore wrote through the symlink: %q", got)
	}

	// A journal saying the file did not exist removes the link, not its target.
	if err := os.Remove(fs.Path(debianConf)); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../shadow", fs.Path(debianConf)); err != nil {
		t.Fatal(err)
	}
	c.OldFile = nil
	if err := h.Restore(env, &c); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(fs.Path(debianConf)); !os.IsNotExist(err) {
		t.Errorf("Restore of a missing file left %s: %v", debianConf, err)
	}
	if got := fileContent(t, fs, victim); got != "root:x:0:0\n" {
		t.Errorf("Restore removed or changed the symlink's target: %q", got)
	}
}

func TestIrqbalanceBanNotRegular(t *testing.T) {
	fs := tree(t, map[string]string{debianConf + "/x": ""}) // a directory
	c := Change{Kind: KindIrqbalanceBan, Target: "ban", Path: debianConf, Value: "1"}
	if _, err := (irqbalanceBan{}).Read(&Env{FS: fs}, &c); err == nil {
		t.Error("Read of a directory succeeded")
	}
	if d := cmp.Diff(Scope{IRQ: -1, MachineWide: true}, ScopeOf(&c)); d != "" {
		t.Errorf("Scope (-want +got):\n%s", d)
	}
}

func showInt(p *int) string {
	if p == nil {
		return "nil"
	}
	return strconv.Itoa(*p)
}
