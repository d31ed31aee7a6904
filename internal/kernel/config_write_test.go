package kernel

import (
	"os"
	"path/filepath"
	"testing"
)

// WriteConfigFile puts a file in place whole with the mode asked for
// exactly, replaces a symbolic link at its name without writing through it,
// leaves no temporary file, and removes the file for nil Data.
func TestWriteConfigFile(t *testing.T) {
	root := t.TempDir()
	f := New(root)
	if err := os.MkdirAll(filepath.Join(root, "etc/default"), 0o755); err != nil {
		t.Fatal(err)
	}
	outside := filepath.Join(t.TempDir(), "shadow")
	if err := os.WriteFile(outside, []byte("secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(root, "etc/default/irqbalance")); err != nil {
		t.Fatal(err)
	}
	data := "IRQBALANCE_BANNED_CPULIST=1\n"
	if err := f.WriteConfigFile("etc/default/irqbalance", FileState{Data: &data, Mode: 0o640, UID: -1, GID: -1}); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(outside); string(b) != "secret\n" {
		t.Errorf("written through the link: %q", b)
	}
	full := filepath.Join(root, "etc/default/irqbalance")
	fi, err := os.Lstat(full)
	if err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm() != 0o640 {
		t.Fatalf("the file: %v %v, want a regular file with mode 0640", fi, err)
	}
	if b, _ := os.ReadFile(full); string(b) != data {
		t.Errorf("content %q", b)
	}
	if left, _ := filepath.Glob(filepath.Join(root, "etc/default/.*")); len(left) != 0 {
		t.Errorf("temporary files left: %v", left)
	}
	if err := f.WriteConfigFile("etc/default/irqbalance", FileState{}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(full); !os.IsNotExist(err) {
		t.Errorf("nil Data left the file: %v", err)
	}
}
