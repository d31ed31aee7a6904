package kernel

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

const snapChildEnv = "IRQPILOT_SNAPSHOT_RLIMIT_CHILD"

// A 200 KB snapshot holding a 164 MB /proc/interrupts was refused by the
// parser (after 351 MB RSS), but under a 2 GiB address-space limit the Go
// runtime died of a fatal out-of-memory reading it, leaving the unpacked
// directory behind. A child process (this test binary again) lowers
// RLIMIT_AS to its current size plus 768 MiB, opens that snapshot and reads
// its /proc/interrupts as inventory does: the snapshot is refused at the
// member's tar header with an error naming the limit, the child exits
// normally, and no snapshot directory is left.
func TestSnapshotMemberCapUnderAddressSpaceLimit(t *testing.T) {
	if os.Getenv(snapChildEnv) != "" {
		snapChild(t, os.Getenv(snapChildEnv))
		return
	}
	if testing.Short() {
		t.Skip("unpacks hundreds of MB")
	}
	box := sandbox(t)
	snap, size := hugeInterruptsSnapshot(t, 8192, 10000)
	if fi, _ := os.Stat(snap); fi.Size() > 1<<20 || size < 160e6 {
		t.Fatalf("test archive: %d bytes holding %d", fi.Size(), size)
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "-test.run=^TestSnapshotMemberCapUnderAddressSpaceLimit$", "-test.v")
	cmd.Env = append(os.Environ(), snapChildEnv+"="+snap, "TMPDIR="+box)
	out, err := cmd.CombinedOutput()
	if strings.Contains(string(out), "fatal error") {
		t.Fatalf("ran out of memory under the limit:\n%.3000s", out)
	}
	if err != nil || !strings.Contains(string(out), "limit set") || !strings.Contains(string(out), "refused:") {
		t.Fatalf("child: %v\n%.3000s", err, out)
	}
	t.Logf("%s", out)
	assertNoSnapshotDirs(t, box)
}

func snapChild(t *testing.T, snap string) {
	vm := procVmSize(t)
	lim := vm + 768<<20
	if err := unix.Setrlimit(unix.RLIMIT_AS, &unix.Rlimit{Cur: lim, Max: lim}); err != nil {
		t.Fatal(err)
	}
	t.Logf("limit set: RLIMIT_AS %d MiB (VmSize %d MiB)", lim>>20, vm>>20)
	fs, done, err := OpenSnapshot(snap)
	if err != nil {
		if !strings.Contains(err.Error(), "limit") {
			t.Errorf("error does not name the limit: %v", err)
		}
		t.Logf("refused: %v", err)
		return
	}
	defer done()
	// What inventory does: several readers each read and parse it.
	for range 3 {
		data, err := fs.ReadFile("proc/interrupts")
		if err == nil {
			_, err = parseInterrupts("/proc/interrupts", data)
		}
		t.Logf("read: %v", err)
	}
	t.Errorf("a %s snapshot with a huge /proc/interrupts was unpacked", snap)
}

func procVmSize(t *testing.T) uint64 {
	fh, err := os.Open("/proc/self/status")
	if err != nil {
		t.Skip(err)
	}
	defer fh.Close()
	sc := bufio.NewScanner(fh)
	for sc.Scan() {
		if f := strings.Fields(sc.Text()); len(f) >= 2 && f[0] == "VmSize:" {
			if kb, err := strconv.ParseUint(f[1], 10, 64); err == nil {
				return kb << 10
			}
		}
	}
	t.Skip("no VmSize")
	return 0
}

// A --root tree (not unpacked from an archive, so not checked at a tar
// header) is held to the same per-file limit, checked by size before the
// file is read.
func TestRootTreeFileCap(t *testing.T) {
	root := t.TempDir()
	p := filepath.Join(root, "proc", "interrupts")
	os.MkdirAll(filepath.Dir(p), 0o755)
	fh, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	fh.Truncate(maxSnapshotFileBytes + 1) // sparse: nothing this big is read
	fh.Close()
	_, err = New(root).ReadFile("proc/interrupts")
	if err == nil || !strings.Contains(err.Error(), "over the limit of "+strconv.Itoa(maxSnapshotFileBytes)) || !strings.Contains(err.Error(), "/proc/interrupts") {
		t.Errorf("ReadFile of a %d-byte file: %v", maxSnapshotFileBytes+1, err)
	}
	os.Truncate(p, 1000)
	if b, err := New(root).ReadFile("proc/interrupts"); err != nil || len(b) != 1000 {
		t.Errorf("ReadFile of a 1000-byte file: %d bytes, %v", len(b), err)
	}
}
