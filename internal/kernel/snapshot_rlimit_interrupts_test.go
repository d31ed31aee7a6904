package kernel

import (
	"errors"
	"os"
	"os/exec"
	"runtime/debug"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

const snapInterruptsChildEnv = "IRQPILOT_SNAPSHOT_INTERRUPTS_CHILD"

// A 57 KB archive holding a /proc/interrupts of 8192 CPU columns × 2 047
// rows (34 MB, inside every limit of the archive) ran the Go runtime out of
// memory under `ulimit -v` of 1 to 1.75 GiB: each parse reserved 128 MiB of
// counts, the runtime died with a fatal error (exit status 2, the status of
// a refusal too) and the unpacked directory stayed in TMPDIR. This test
// binary runs again as a child, under an address-space limit of what it
// holds plus 512 MiB, and reads that archive as inventory does (three readers each read and parse the file):
// it must be refused with ErrOverLimit, naming the limit; an archive at
// the counts limit (8192 × 510 rows of 10-digit counts, 46 MB) must be read
// and parsed under the same limit; no snapshot directory may be left.
func TestSnapshotInterruptsUnderAddressSpaceLimit(t *testing.T) {
	if os.Getenv(snapInterruptsChildEnv) != "" {
		snapInterruptsChild(t, os.Getenv(snapInterruptsChildEnv))
		return
	}
	if testing.Short() {
		t.Skip("unpacks tens of MB")
	}
	if raceEnabled {
		// The race detector's shadow memory is address space: under a
		// 1 GiB limit it cannot start. make test runs this test again
		// without -race.
		t.Skip("address-space limit under -race: run without -race (make test does)")
	}
	box := sandbox(t)
	refused, size := hugeInterruptsSnapshot(t, 8192, 2047)
	if fi, _ := os.Stat(refused); fi.Size() > 100<<10 || size < 33e6 || size > maxSnapshotFileBytes {
		t.Fatalf("test archive: %d bytes holding %d", fi.Size(), size)
	}
	atLimit := countsSnapshot(t, 8192, maxInterruptCells/8192-2, "4294967295")
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, snap, want string
	}{
		{"refused", refused, "refused:"},
		{"read", atLimit, "parsed 3 times"},
	} {
		cmd := exec.Command(exe, "-test.run=^TestSnapshotInterruptsUnderAddressSpaceLimit$", "-test.v")
		cmd.Env = append(os.Environ(), snapInterruptsChildEnv+"="+c.name+":"+c.snap, "TMPDIR="+box)
		out, err := cmd.CombinedOutput()
		if strings.Contains(string(out), "fatal error") || strings.Contains(string(out), "out of memory") {
			t.Fatalf("%s: ran out of memory under the limit:\n%.3000s", c.name, out)
		}
		if err != nil || !strings.Contains(string(out), c.want) {
			t.Fatalf("%s: child: %v\n%.3000s", c.name, err, out)
		}
		t.Logf("%s: %s", c.name, out)
		assertNoSnapshotDirs(t, box)
	}
}

// countsSnapshot is a snapshot whose proc/interrupts has cols CPU columns
// and rows NMI rows, each count the text count.
func countsSnapshot(t *testing.T, cols, rows int, count string) string {
	t.Helper()
	var b strings.Builder
	for c := range cols {
		b.WriteString(" CPU" + itoa(c))
	}
	b.WriteByte('\n')
	b.WriteString(strings.Repeat("NMI:"+strings.Repeat(" "+count, cols)+" Non-maskable interrupts\n", rows))
	return writeTarGz(t, []tarEntry{{name: "proc/interrupts", body: b.String()}})
}

func snapInterruptsChild(t *testing.T, arg string) {
	kind, snap, _ := strings.Cut(arg, ":")
	// This binary may use cgo (glibc's per-thread arenas and stacks are
	// address space), unlike the static irqpilot, so the limit is set here,
	// above what it already holds: 512 MiB, about what a static irqpilot
	// has for its heap under ulimit -v 1 GiB (the end-to-end test of that
	// is cmd/irqpilot's TestSnapshotOverLimitUnderAddressSpaceLimit).
	vm := procVmSize(t)
	lim := vm + 512<<20
	if err := unix.Setrlimit(unix.RLIMIT_AS, &unix.Rlimit{Cur: lim, Max: lim}); err != nil {
		t.Fatal(err)
	}
	t.Logf("limit set: RLIMIT_AS %d MiB (VmSize %d MiB)", lim>>20, vm>>20)
	debug.SetMemoryLimit(256 << 20) // as irqpilot's main does under a limit
	fs, done, err := OpenSnapshot(snap)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	defer done()
	for i := range 3 {
		data, err := fs.ReadFile("proc/interrupts")
		if err == nil {
			_, err = parseInterrupts("/proc/interrupts", data)
		}
		switch {
		case err == nil && kind == "read":
			continue
		case err != nil && kind == "refused" && errors.Is(err, ErrOverLimit) && strings.Contains(err.Error(), "limit"):
			t.Logf("refused: %v", err)
			return
		default:
			t.Fatalf("%s, read %d: %v", kind, i+1, err)
		}
	}
	t.Logf("parsed 3 times")
}

// A refusal for a limit is told apart from a malformed input
// (errors.Is(err, ErrOverLimit)): the command exits ExitOverLimit for it.
func TestOverLimitErrors(t *testing.T) {
	sandbox(t)
	snap, _ := hugeInterruptsSnapshot(t, 4096, 60000)
	_, _, err := OpenSnapshot(snap)
	if !errors.Is(err, ErrOverLimit) {
		t.Errorf("the per-file limit: %v is not ErrOverLimit", err)
	}
	_, err = parseInterrupts("/proc/interrupts", []byte(" CPU0\n"+strings.Repeat("NMI: 0\n", maxInterruptRows+1)))
	var pe *ParseError
	if !errors.Is(err, ErrOverLimit) || !errors.As(err, &pe) {
		t.Errorf("the rows limit: %v is not ErrOverLimit and a *ParseError", err)
	}
	_, err = parseInterrupts("/proc/interrupts", []byte(" CPU0\n0: 0 IO-APIC 2-edge "+strings.Repeat("a, ", maxInterruptActions)+"a\n"))
	if !errors.Is(err, ErrOverLimit) {
		t.Errorf("the actions limit: %v is not ErrOverLimit", err)
	}
	if _, err = parseInterrupts("/proc/interrupts", []byte(" CPU0\nx")); err == nil || errors.Is(err, ErrOverLimit) {
		t.Errorf("a malformed file: %v, want an error that is not ErrOverLimit", err)
	}
}
