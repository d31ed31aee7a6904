package main

import (
	"archive/tar"
	"compress/gzip"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/irqpilot/irqpilot/internal/kernel"
	"github.com/irqpilot/irqpilot/internal/livetest"
)

// A 57 KB snapshot whose /proc/interrupts has 8192 CPU columns × 2 047 rows
// (34 MB, inside every limit of the archive), read by the static binary as
// a user would under `ulimit -v 1048576` (1 GiB): inventory refuses it with
// the limit named and exit status 65 (ExitOverLimit), never the runtime's
// fatal out-of-memory (exit status 2), and leaves no snapshot directory in
// TMPDIR.
func TestSnapshotOverLimitUnderAddressSpaceLimit(t *testing.T) {
	if testing.Short() {
		t.Skip("writes a 34 MB snapshot")
	}
	var b strings.Builder
	for c := range 8192 {
		b.WriteString(" CPU" + strconv.Itoa(c))
	}
	b.WriteByte('\n')
	b.WriteString(strings.Repeat("NMI:"+strings.Repeat(" 0", 8192)+" Non-maskable interrupts\n", 2047))
	dir := t.TempDir()
	snap := filepath.Join(dir, "cols-8192.tar.gz")
	fh, err := os.Create(snap)
	if err != nil {
		t.Fatal(err)
	}
	gz, _ := gzip.NewWriterLevel(fh, gzip.BestCompression)
	tw := tar.NewWriter(gz)
	tw.WriteHeader(&tar.Header{Name: "proc/interrupts", Mode: 0o644, Typeflag: tar.TypeReg, Size: int64(b.Len())})
	tw.Write([]byte(b.String()))
	if err := errors.Join(tw.Close(), gz.Close(), fh.Close()); err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(snap); fi.Size() > 100<<10 {
		t.Fatalf("test archive is %d bytes, want a small one", fi.Size())
	}
	box := filepath.Join(dir, "tmp")
	os.Mkdir(box, 0o700)
	cmd := exec.Command("/bin/sh", "-c", `ulimit -v 1048576 && exec "$0" "$@"`,
		livetest.Irqpilot(t), "inventory", "--snapshot", snap)
	cmd.Env = append(os.Environ(), "TMPDIR="+box)
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != kernel.ExitOverLimit || strings.Contains(string(out), "fatal error") {
		t.Fatalf("inventory --snapshot under ulimit -v 1 GiB: %v, want exit status %d\n%.2000s", err, kernel.ExitOverLimit, out)
	}
	if !strings.Contains(string(out), "over the limit") {
		t.Errorf("the refusal does not name the limit: %s", out)
	}
	if ents, _ := os.ReadDir(box); len(ents) != 0 {
		t.Errorf("left in TMPDIR: %v", ents)
	}
}
