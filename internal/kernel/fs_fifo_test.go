package kernel

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// A FIFO (or any file that is not a regular one) in a --root tree is
// refused by name at once: opened as before, with no writer, it blocked the
// reader until it was killed.
func TestTreeRefusesFIFO(t *testing.T) {
	for _, rel := range []string{"proc/interrupts", "proc/cmdline", "irqpilot/" + ReadErrorsFile} {
		t.Run(rel, func(t *testing.T) {
			root := t.TempDir()
			if err := os.MkdirAll(filepath.Dir(filepath.Join(root, rel)), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := unix.Mkfifo(filepath.Join(root, rel), 0o644); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() {
				f := New(root) // reads irqpilot/read-errors.json
				var err error
				switch rel {
				case "proc/interrupts":
					_, err = f.Interrupts()
				case "proc/cmdline":
					_, err = f.Cmdline()
				default:
					_, err = f.ReadSynthetic(ReadErrorsFile)
				}
				done <- err
			}()
			select {
			case err := <-done:
				if err == nil {
					t.Fatal("a FIFO was read as a kernel file")
				}
				if !strings.Contains(err.Error(), "/"+rel) || !strings.Contains(err.Error(), "FIFO") {
					t.Errorf("error %q does not name /%s as a FIFO", err, rel)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("reading a FIFO in a tree blocked")
			}
		})
	}
}

// A directory where a file is expected is refused the same way, and a
// regular file still reads.
func TestTreeReadsRegularOnly(t *testing.T) {
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "proc/cmdline"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := New(root).Cmdline(); err == nil || !strings.Contains(err.Error(), "/proc/cmdline") {
		t.Fatalf("a directory as /proc/cmdline: %v", err)
	}
	if err := os.Remove(filepath.Join(root, "proc/cmdline")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "proc/cmdline"), []byte("quiet irqaffinity=0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	p, err := New(root).Cmdline()
	if err != nil || len(p) != 2 {
		t.Fatalf("regular /proc/cmdline: %v %v", p, err)
	}
}
