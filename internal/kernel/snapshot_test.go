package kernel

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// tarEntry is one entry of a hand-made archive: a regular file unless link
// (symlink) or dir is set; typ overrides the type flag.
type tarEntry struct {
	name, body, link string
	dir              bool
	typ              byte
}

func writeTarGz(t *testing.T, entries []tarEntry) string {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for _, e := range entries {
		h := &tar.Header{Name: e.name, Mode: 0o644, Typeflag: tar.TypeReg, Size: int64(len(e.body))}
		switch {
		case e.typ != 0:
			h.Typeflag, h.Linkname, h.Size = e.typ, e.link, 0
		case e.link != "":
			h.Typeflag, h.Linkname, h.Size = tar.TypeSymlink, e.link, 0
		case e.dir:
			h.Typeflag, h.Mode, h.Size = tar.TypeDir, 0o755, 0
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if h.Size > 0 {
			tw.Write([]byte(e.body))
		}
	}
	tw.Close()
	gz.Close()
	p := filepath.Join(t.TempDir(), "snap.tar.gz")
	if err := os.WriteFile(p, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// sandbox points os.MkdirTemp at a fresh directory, so a test can check that
// nothing was written next to the snapshot's directory.
func sandbox(t *testing.T) string {
	t.Helper()
	d := t.TempDir()
	t.Setenv("TMPDIR", d)
	return d
}

// inside reports whether the OS, following every symlink, resolves p to a
// location inside root (or p does not resolve at all).
func inside(t *testing.T, root, p string) bool {
	t.Helper()
	real, err := filepath.EvalSymlinks(p)
	if err != nil {
		return true // dangling: nothing outside is reached
	}
	rroot, _ := filepath.EvalSymlinks(root)
	return real == rroot || strings.HasPrefix(real, rroot+"/")
}

func TestSnapshotDotDotNamesStayInside(t *testing.T) {
	box := sandbox(t)
	snap := writeTarGz(t, []tarEntry{
		{name: "../../evil", body: "x"},
		{name: "/abs-evil", body: "y"},
		{name: "proc/../../../proc/interrupts", body: "           CPU0\n  0:  1  IO-APIC 2-edge timer\n"},
	})
	f, cleanup, err := OpenSnapshot(snap)
	if err != nil {
		t.Fatal(err)
	}
	defer cleanup()
	ents, _ := os.ReadDir(box)
	if len(ents) != 1 || !strings.HasPrefix(ents[0].Name(), "irqpilot-snapshot-") {
		t.Fatalf("sandbox holds %v, want only the snapshot directory", ents)
	}
	if s, err := f.readString("evil"); err != nil || s != "x" {
		t.Errorf("../../evil unpacked to %q, %v; want it cleaned to <root>/evil", s, err)
	}
	if s, err := f.readString("abs-evil"); err != nil || s != "y" {
		t.Errorf("/abs-evil = %q, %v", s, err)
	}
	if s, _ := f.readString("proc/interrupts"); !strings.Contains(s, "timer") {
		t.Errorf("proc/interrupts = %q", s)
	}
}

func TestSnapshotSymlinksContained(t *testing.T) {
	sandbox(t)
	snap := writeTarGz(t, []tarEntry{
		{name: "sys/class/net/", dir: true},
		{name: "sys/class/net/eth0", link: "/etc"},               // absolute: the host's /etc
		{name: "sys/class/net/eth1", link: "../../../../../etc"}, // climbs out
		{name: "sys/class/net/eth2", link: "../../devices/virtual/net/eth2"},
		{name: "sys/devices/virtual/net/eth2/address", body: "aa:bb\n"},
		{name: "proc/self", link: "/proc/1"},
		{name: "passwd", typ: tar.TypeLink, link: "/etc/passwd"}, // hard link: skipped
		{name: "null", typ: tar.TypeChar},                        // device: skipped
	})
	f, cleanup, err := OpenSnapshot(snap)
	if err != nil {
		t.Fatal(err)
	}
	defer cleanup()
	root := f.Root()
	for _, l := range []string{"sys/class/net/eth0", "sys/class/net/eth1", "sys/class/net/eth2", "proc/self"} {
		p := f.Path(l)
		target, err := os.Readlink(p)
		if err != nil {
			t.Fatalf("%s: %v", l, err)
		}
		if filepath.IsAbs(target) {
			t.Errorf("%s → %s: absolute target kept", l, target)
		}
		if !inside(t, root, p) {
			t.Errorf("%s → %s leaves the snapshot", l, target)
		}
	}
	// eth0 → /etc and eth1 → ../../../../../etc both mean <root>/etc, which
	// does not exist: the host's /etc/passwd is never read.
	for _, p := range []string{"sys/class/net/eth0/passwd", "sys/class/net/eth1/passwd", "passwd", "null"} {
		if _, err := f.ReadFile(p); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s: err = %v, want not exist", p, err)
		}
	}
	if got, _ := os.Readlink(f.Path("sys/class/net/eth1")); got != "../../../etc" {
		t.Errorf("eth1 target rewritten to %q, want ../../../etc", got)
	}
	if s, err := f.readString("sys/class/net/eth2/address"); err != nil || s != "aa:bb" {
		t.Errorf("eth2/address through a contained link = %q, %v", s, err)
	}
	if r, err := f.resolve("sys/class/net/eth0"); err == nil {
		t.Errorf("Resolve(eth0) = %s, want an error (target absent in the snapshot)", r)
	}
}

// A link inside a symlinked directory would be resolved by the OS from the
// link's real directory, not the one containLink assumed: the classic escape
// a → ".", a/b/l → "../..", then a/b/l/evil is written one level above the
// snapshot. Such entries are refused.
func TestSnapshotEntryBelowSymlinkRefused(t *testing.T) {
	box := sandbox(t)
	for name, entries := range map[string][]tarEntry{
		"file below link": {
			{name: "a", link: "."},
			{name: "a/b/", dir: true},
			{name: "a/b/l", link: "../.."},
			{name: "a/b/l/evil", body: "pwned"},
		},
		"dir link then file": {
			{name: "x", link: "/tmp"},
			{name: "x/evil", body: "pwned"},
		},
	} {
		t.Run(name, func(t *testing.T) {
			_, _, err := OpenSnapshot(writeTarGz(t, entries))
			if err == nil || !strings.Contains(err.Error(), "below the symlink") {
				t.Fatalf("err = %v, want a refusal", err)
			}
			if _, err := os.Stat(filepath.Join(box, "evil")); err == nil {
				t.Fatal("evil written outside the snapshot")
			}
			if _, err := os.Stat("/tmp/evil"); err == nil {
				t.Fatal("/tmp/evil exists")
			}
			// The failed unpack removes its directory.
			ents, _ := os.ReadDir(box)
			for _, e := range ents {
				if strings.HasPrefix(e.Name(), "irqpilot-snapshot-") {
					t.Errorf("left behind: %s", e.Name())
				}
			}
		})
	}
}

func TestSnapshotNoWriteThroughLink(t *testing.T) {
	sandbox(t)
	_, _, err := OpenSnapshot(writeTarGz(t, []tarEntry{
		{name: "target", body: "original"},
		{name: "f", link: "target"},
		{name: "f", body: "overwrite through the link"},
	}))
	if err == nil || !strings.Contains(err.Error(), `entry "f"`) {
		t.Fatalf("err = %v, want refusal to write through the symlink", err)
	}
}

func TestSnapshotNotGzip(t *testing.T) {
	p := filepath.Join(t.TempDir(), "x.tar.gz")
	os.WriteFile(p, []byte("plain text"), 0o644)
	_, _, err := OpenSnapshot(p)
	if err == nil || !strings.Contains(err.Error(), p) || !strings.Contains(err.Error(), "not a gzip archive") {
		t.Errorf("err = %v", err)
	}
}

func TestContainLink(t *testing.T) {
	for _, c := range []struct{ name, target, want string }{
		{"/sys/class/net/eth0", "../../devices/pci0000:00/net/eth0", "../../devices/pci0000:00/net/eth0"},
		{"/sys/class/net/eth0", "/sys/devices/virtual/net/eth0", "../../devices/virtual/net/eth0"},
		{"/sys/class/net/eth0", "../../../../../../etc", "../../../etc"},
		{"/proc/self", "/proc/1", "1"},
		{"/a", "/", "."},
		{"/a/b", "../..", ".."},
		{"/a/b", "", "."},
	} {
		if got := containLink(c.name, c.target); got != c.want {
			t.Errorf("containLink(%s, %s) = %s, want %s", c.name, c.target, got, c.want)
		}
	}
}

const snapshotFixtures = "../../../shared/fixtures"

// Every real snapshot in the shared fixtures unpacks under the stricter
// rules, with its real values readable.
func TestOpenSnapshotFixtures(t *testing.T) {
	for _, c := range []struct{ file, path, want string }{
		{"ghw/linux-amd64-8581cf3a529e5d8b97ea876eade2f60d.tar.gz", "sys/devices/system/node/node1/cpulist", "1,3,5,7,9,11,13,15,17,19,21,23"},
		{"ghw/linux-amd64-8581cf3a529e5d8b97ea876eade2f60d.tar.gz", "sys/devices/system/cpu/cpu5/topology/core_id", "2"},
		{"ghw/linux-amd64-offlineCPUs.tar.gz", "sys/devices/system/cpu/offline", "2-3"},
		{"ghw/linux-amd64-415ee03b8c4d1c4f07ae2e9d8b3d3d6d.tar.gz", "sys/devices/system/cpu/cpu0/topology/physical_package_id", "0"},
		{"ghw/linux-amd64-61797caf7c0b6bca1725ad7975ed4773.tar.gz", "sys/class/net/enp3s0/addr_assign_type", "0"},
		{"ghw/linux-amd64-accel-nvidia.tar.gz", "proc/cpuinfo", ""},
		{"ghw/linux-amd64-accel.tar.gz", "proc/cpuinfo", ""},
		{"ghw/linux-arm64-c288e0776090cd558ef793b2a4e61939.tar.gz", "proc/cpuinfo", ""},
		{"cluster-node-tuning-operator/bare-metal-worker1.internal-sysinfo.tgz", "proc/irq/100/smp_affinity_list", "61"},
		{"cluster-node-tuning-operator/bare-metal-master.internal-sysinfo.tgz", "proc/interrupts", ""},
		{"cluster-node-tuning-operator/sno-sysinfo.tgz", "proc/interrupts", ""},
		{"pcp/bigsys-root-hpbl920gen8.tgz", "proc/stat", ""},
		{"pcp/sysfs-numa-001.tgz", "sys/devices/system/node/node3/cpulist", "6-7"},
	} {
		t.Run(filepath.Base(c.file)+"/"+c.path, func(t *testing.T) {
			f, cleanup, err := OpenSnapshot(filepath.Join(snapshotFixtures, c.file))
			if err != nil {
				t.Fatal(err)
			}
			defer cleanup()
			s, err := f.readString(c.path)
			if err != nil {
				t.Fatal(err)
			}
			if c.want != "" && s != c.want {
				t.Errorf("%s = %q, want %q", c.path, s, c.want)
			}
			if c.want == "" && s == "" {
				t.Errorf("%s is empty", c.path)
			}
		})
	}
}

// A snapshot's hard links, device files, FIFOs and absolute or ".." names
// were dropped or rewritten silently. Each kind is now a warning naming
// its entries; the regular files around them still unpack.
func TestSnapshotWarnsAboutDroppedEntries(t *testing.T) {
	sandbox(t)
	snap := writeTarGz(t, []tarEntry{
		{name: "proc/interrupts", body: "           CPU0\n  0:         12   IO-APIC   2-edge      timer\n"},
		{name: "proc/hardlink", link: "proc/interrupts", typ: tar.TypeLink},
		{name: "dev/null", typ: tar.TypeChar},
		{name: "dev/sda", typ: tar.TypeBlock},
		{name: "run/fifo", typ: tar.TypeFifo},
		{name: "../../escape", body: "x"},
		{name: "/abs/file", body: "y"},
		{name: "proc/cmdline", body: "quiet\n"},
	})
	fs, done, err := OpenSnapshot(snap)
	if err != nil {
		t.Fatal(err)
	}
	defer done()
	w := strings.Join(fs.SnapshotWarnings(), "\n")
	for _, want := range []string{
		`1 hard links`, `"proc/hardlink"`,
		`2 device files`, `"dev/null"`, `"dev/sda"`,
		`1 FIFOs`, `"run/fifo"`,
		`2 entries with an absolute name or ".."`, `"../../escape"`, `"/abs/file"`,
	} {
		if !strings.Contains(w, want) {
			t.Errorf("warnings do not say %s:\n%s", want, w)
		}
	}
	if strings.Contains(w, "interrupts\"") && !strings.Contains(w, "hardlink") || strings.Contains(w, "cmdline") {
		t.Errorf("a regular entry warned about:\n%s", w)
	}
	for _, p := range []string{"proc/interrupts", "proc/cmdline", "escape", "abs/file"} {
		if _, err := os.Stat(fs.Path(p)); err != nil {
			t.Errorf("%s not unpacked: %v", p, err)
		}
	}
	for _, p := range []string{"proc/hardlink", "dev/null", "dev/sda", "run/fifo"} {
		if _, err := os.Lstat(fs.Path(p)); err == nil {
			t.Errorf("%s unpacked", p)
		}
	}

	// A clean snapshot has no warning.
	clean := writeTarGz(t, []tarEntry{{name: "proc/cmdline", body: "quiet\n"}})
	fs2, done2, err := OpenSnapshot(clean)
	if err != nil {
		t.Fatal(err)
	}
	defer done2()
	if w := fs2.SnapshotWarnings(); len(w) != 0 {
		t.Errorf("clean snapshot warned: %q", w)
	}
}
