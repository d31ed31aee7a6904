package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A snapshot's hard links, device files and FIFOs were dropped with exit 0
// and no word. The verb that unpacks it now warns on stderr, naming them,
// and still reads the rest.
func TestSnapshotWarningsReachStderr(t *testing.T) {
	src, err := os.Open(filepath.Join(snapshotsDir, "this-machine.tar.gz"))
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	gz, err := gzip.NewReader(src)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	tr := tar.NewReader(gz)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if _, err := io.Copy(tw, tr); err != nil {
			t.Fatal(err)
		}
	}
	for _, h := range []*tar.Header{
		{Name: "run/evil-fifo", Typeflag: tar.TypeFifo, Mode: 0o644},
		{Name: "proc/evil-link", Typeflag: tar.TypeLink, Linkname: "proc/interrupts", Mode: 0o644},
		{Name: "dev/evil-null", Typeflag: tar.TypeChar, Mode: 0o644, Devmajor: 1, Devminor: 3},
	} {
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
	}
	tw.Close()
	zw.Close()
	snap := filepath.Join(t.TempDir(), "odd.tar.gz")
	os.WriteFile(snap, buf.Bytes(), 0o644)

	out, stderr, err := runIrqpilot(t, "inventory", "--snapshot", snap)
	if err != nil {
		t.Fatalf("inventory: %v\n%s", err, stderr)
	}
	if !strings.Contains(out, "IRQ") && !strings.Contains(out, "CPU") {
		t.Errorf("inventory printed nothing useful:\n%s", out)
	}
	for _, want := range []string{"warning: snapshot " + snap, `"run/evil-fifo"`, `"proc/evil-link"`, `"dev/evil-null"`} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr does not say %s:\n%s", want, stderr)
		}
	}
	// The committed snapshot itself is clean: no warning.
	if _, stderr, err := runIrqpilot(t, "inventory", "--snapshot", filepath.Join(snapshotsDir, "this-machine.tar.gz")); err != nil || strings.Contains(stderr, "warning: snapshot") {
		t.Errorf("clean snapshot: %v\n%s", err, stderr)
	}
}
