package lab

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ulikunitz/xz"
)

// Debian's kernels from 6.6 on ship their modules xz-compressed: the lab
// reads a .ko.xz as the ELF inside it (the guest's insmod takes plain ELF
// only) and names the module without the suffix; a corrupt one is an error
// that names the file. (Writing it into the initramfs under the plain name
// is checked only by booting such a kernel, not done here yet.)
func TestXZModuleReadAsELF(t *testing.T) {
	elfFile, err := os.ReadFile("/bin/true") // an ELF file of the machine's
	if err != nil {
		t.Skip("no /bin/true to stand for a module")
	}
	dir := t.TempDir()
	var z bytes.Buffer
	w, err := xz.NewWriter(&z)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(elfFile); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "e1000e.ko.xz")
	if err := os.WriteFile(p, z.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := readModule(p)
	if err != nil || !bytes.Equal(got, elfFile) {
		t.Fatalf("readModule(.ko.xz): %d bytes, %v; want the %d bytes compressed", len(got), err, len(elfFile))
	}
	if deps, err := modDepends(p); err != nil || deps != nil {
		t.Errorf("modDepends of an ELF without .modinfo: %v, %v", deps, err)
	}
	if n := modName("e1000e.ko.xz"); n != "e1000e" {
		t.Errorf("modName: %q", n)
	}
	bad := filepath.Join(dir, "bad.ko.xz")
	if err := os.WriteFile(bad, []byte("not xz"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := readModule(bad); err == nil || !strings.Contains(err.Error(), "bad.ko.xz") {
		t.Errorf("a corrupt .ko.xz: %v, want an error naming it", err)
	}
}
