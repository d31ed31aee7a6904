package outfile

import (
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/irqpilot/irqpilot/internal/livetest/liveroot"
	"golang.org/x/sys/unix"
)

func readFile(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestWriteNewAndExisting(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "plan.yaml")
	if err := Write(p, []byte("one\n")); err != nil {
		t.Fatal(err)
	}
	fi, _ := os.Stat(p)
	if got := readFile(t, p); got != "one\n" || fi.Mode() != DefaultMode {
		t.Errorf("new file: %q mode %v, want %q mode %v", got, fi.Mode(), "one\n", DefaultMode)
	}
	// An existing file is replaced whole and keeps its permissions.
	if err := os.Chmod(p, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := Write(p, []byte("two\n")); err != nil {
		t.Fatal(err)
	}
	fi, _ = os.Stat(p)
	if got := readFile(t, p); got != "two\n" || fi.Mode() != 0o600 {
		t.Errorf("replaced file: %q mode %v, want %q mode 0600", got, fi.Mode(), "two\n")
	}
	if left, _ := filepath.Glob(filepath.Join(dir, ".*irqpilot-*")); len(left) != 0 {
		t.Errorf("temporary files left: %v", left)
	}
}

// A symbolic link is replaced, its target left alone: a link planted where
// root writes cannot redirect the output.
func TestWriteReplacesSymlink(t *testing.T) {
	dir := t.TempDir()
	target, link := filepath.Join(dir, "target"), filepath.Join(dir, "out.json")
	if err := os.WriteFile(target, []byte("keep\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	if err := Write(link, []byte("new\n")); err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, target); got != "keep\n" {
		t.Errorf("the link's target was written: %q", got)
	}
	fi, _ := os.Lstat(link)
	if !fi.Mode().IsRegular() || readFile(t, link) != "new\n" {
		t.Errorf("the link is not replaced by the file: %v", fi.Mode())
	}
}

// A FIFO is written to as it is and stays a FIFO.
func TestWriteFIFO(t *testing.T) {
	p := filepath.Join(t.TempDir(), "fifo")
	if err := unix.Mkfifo(p, 0o600); err != nil {
		t.Fatal(err)
	}
	got := make(chan string)
	go func() {
		f, err := os.Open(p)
		if err != nil {
			got <- err.Error()
			return
		}
		b, _ := io.ReadAll(f)
		f.Close()
		got <- string(b)
	}()
	if err := Write(p, []byte("through the pipe\n")); err != nil {
		t.Fatal(err)
	}
	if s := <-got; s != "through the pipe\n" {
		t.Errorf("reader got %q", s)
	}
	if fi, _ := os.Lstat(p); fi.Mode()&fs.ModeNamedPipe == 0 {
		t.Errorf("the FIFO became %v", fi.Mode())
	}
}

// A character device ("-o /dev/null") is written to and stays the device;
// a block device is refused. The nodes are made in a temporary directory
// (root only), never the machine's own.
func TestWriteDevices(t *testing.T) {
	liveroot.Need(t) // making device nodes needs root
	dir := t.TempDir()
	null := filepath.Join(dir, "null")
	if err := unix.Mknod(null, unix.S_IFCHR|0o666, int(unix.Mkdev(1, 3))); err != nil {
		t.Skipf("mknod: %v", err)
	}
	if err := Write(null, []byte("discarded\n")); err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Lstat(null); fi.Mode()&fs.ModeCharDevice == 0 {
		t.Errorf("the null device became %v", fi.Mode())
	}
	disk := filepath.Join(dir, "loop")
	if err := unix.Mknod(disk, unix.S_IFBLK|0o600, int(unix.Mkdev(7, 200))); err != nil {
		t.Skipf("mknod: %v", err)
	}
	if err := Write(disk, []byte("x")); err == nil || !strings.Contains(err.Error(), "block device") {
		t.Errorf("block device: %v", err)
	}
	if fi, _ := os.Lstat(disk); fi.Mode()&fs.ModeDevice == 0 || fi.Mode()&fs.ModeCharDevice != 0 {
		t.Errorf("the block device became %v", fi.Mode())
	}
}

func TestCreateAbortKeepsOld(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "cap.tar.gz")
	if err := os.WriteFile(p, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := Create(p)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write([]byte("half")); err != nil {
		t.Fatal(err)
	}
	f.Abort()
	if err := f.Close(); err != nil {
		t.Errorf("Close after Abort: %v", err)
	}
	if got := readFile(t, p); got != "old" {
		t.Errorf("aborted output changed the file: %q", got)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, ".*irqpilot-*")); len(left) != 0 {
		t.Errorf("temporary files left: %v", left)
	}
}

func TestWriteErrorsNameThePath(t *testing.T) {
	dir := t.TempDir()
	for _, p := range []string{dir, filepath.Join(dir, "absent", "x.json")} {
		if err := Write(p, []byte("x")); err == nil || !strings.Contains(err.Error(), p) {
			t.Errorf("Write(%s): %v", p, err)
		}
	}
}

// A stream is written in place: truncated when a regular file, refused
// when a link, written through when a pipe.
func TestOpenStream(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "rec.jsonl")
	if err := os.WriteFile(p, []byte("old old old\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := OpenStream(p)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("line\n")
	f.Close()
	if got := readFile(t, p); got != "line\n" {
		t.Errorf("stream over a file: %q", got)
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink(p, link); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenStream(link); err == nil || !strings.Contains(err.Error(), "symbolic link") {
		t.Errorf("stream to a link: %v", err)
	}
	if got := readFile(t, p); got != "line\n" {
		t.Errorf("the link's target changed: %q", got)
	}
	if _, err := OpenStream(dir); err == nil || !strings.Contains(err.Error(), "directory") {
		t.Errorf("stream to a directory: %v", err)
	}
	fresh := filepath.Join(dir, "new.jsonl")
	f, err = OpenStream(fresh)
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	// (Its permissions are DefaultMode less the umask, as any new file's.)
	if fi, err := os.Lstat(fresh); err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm()&^DefaultMode != 0 {
		t.Errorf("new stream file: %v %v", fi, err)
	}
}
