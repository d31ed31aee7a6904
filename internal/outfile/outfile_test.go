package outfile

import (
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
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
	// A new file gets DefaultMode less the umask, as any file made with it.
	ref := filepath.Join(dir, "ref")
	if err := os.WriteFile(ref, nil, DefaultMode); err != nil {
		t.Fatal(err)
	}
	want, _ := os.Stat(ref)
	fi, _ := os.Stat(p)
	if got := readFile(t, p); got != "one\n" || fi.Mode() != want.Mode() {
		t.Errorf("new file: %q mode %v, want %q mode %v", got, fi.Mode(), "one\n", want.Mode())
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

// A symbolic link is written through, as os.WriteFile would: its target
// gets the data and the link stays. A link to nothing is refused.
func TestWriteThroughSymlink(t *testing.T) {
	dir := t.TempDir()
	target, link := filepath.Join(dir, "target"), filepath.Join(dir, "out.json")
	if err := os.WriteFile(target, []byte("old old old\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	if err := Write(link, []byte("new\n")); err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, target); got != "new\n" {
		t.Errorf("the link's target holds %q", got)
	}
	if fi, _ := os.Lstat(link); fi.Mode()&fs.ModeSymlink == 0 {
		t.Errorf("the link became %v", fi.Mode())
	}
	dangling := filepath.Join(dir, "dangling")
	if err := os.Symlink(filepath.Join(dir, "absent"), dangling); err != nil {
		t.Fatal(err)
	}
	if err := Write(dangling, []byte("x")); err == nil || !strings.Contains(err.Error(), "symbolic link to nothing") {
		t.Errorf("dangling link: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "absent")); err == nil {
		t.Error("a dangling link's target was created")
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
	// Named through a link, as /dev/stdout names the pipe a shell gave.
	link := filepath.Join(filepath.Dir(p), "stdout")
	if err := os.Symlink(p, link); err != nil {
		t.Fatal(err)
	}
	if err := Write(link, []byte("through the pipe\n")); err != nil {
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
// a block device is refused; a replaced file keeps its owner. The nodes are made in a temporary directory
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
	// An existing file another user owns keeps its owner and mode.
	owned := filepath.Join(dir, "owned.json")
	if err := os.WriteFile(owned, []byte("old"), 0o640); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(owned, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	if err := Write(owned, []byte("new")); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(owned); err != nil || fi.Mode() != 0o640 || fi.Sys().(*syscall.Stat_t).Uid != 65534 || fi.Sys().(*syscall.Stat_t).Gid != 65534 {
		t.Errorf("replaced file: %v %v", fi.Mode(), err)
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

// A stream is written in place: truncated when a regular file, written
// through when a link.
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
	f, err = OpenStream(link)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("through\n")
	f.Close()
	if got := readFile(t, p); got != "through\n" {
		t.Errorf("stream through a link: the target holds %q", got)
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
