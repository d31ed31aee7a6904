package kernel

import (
	"archive/tar"
	"os"
	"strings"
	"testing"
)

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
