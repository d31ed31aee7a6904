package kernel

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// gzMember compresses b as one gzip member. Concatenated members are one
// valid gzip stream (RFC 1952; Go's reader is multistream by default), which
// lets a test build a hostile archive of hundreds of megabytes unpacked from
// a few compressed blocks, the way an attacker would, in milliseconds.
func gzMember(t *testing.T, b []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	gz, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	gz.Write(b)
	if err := gz.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// tarHeader returns the 512-byte (or PAX-extended) header of a regular file.
func tarHeader(t *testing.T, name string, size int64) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Typeflag: tar.TypeReg, Size: size}); err != nil {
		t.Fatal(err)
	}
	tw.Flush()
	return buf.Bytes()
}

// hugeInterruptsSnapshot is the archive of issue 15: proc/interrupts with
// cols CPU columns and rows summary rows (repeated "NMI:" rows parse), built
// from repeated gzip members. At 4096 × 60 000 it is about 1 MB and unpacks
// to 491 MB; parsing that took 4.7 GB.
func hugeInterruptsSnapshot(t *testing.T, cols, rows int) (path string, size int64) {
	t.Helper()
	var hdr strings.Builder
	for c := range cols {
		hdr.WriteString(" CPU" + itoa(c))
	}
	hdr.WriteByte('\n')
	row := "NMI:" + strings.Repeat(" 0", cols) + " Non-maskable interrupts\n"
	const perMember = 1000
	size = int64(hdr.Len()) + int64(rows)*int64(len(row))
	var out bytes.Buffer
	out.Write(gzMember(t, append(tarHeader(t, "proc/interrupts", size), hdr.String()...)))
	block := gzMember(t, []byte(strings.Repeat(row, perMember)))
	for i := 0; i < rows/perMember; i++ {
		out.Write(block)
	}
	out.Write(gzMember(t, []byte(strings.Repeat(row, rows%perMember))))
	pad := (512 - size%512) % 512
	out.Write(gzMember(t, make([]byte, pad+1024))) // padding and the end-of-archive blocks
	p := filepath.Join(t.TempDir(), "huge.tar.gz")
	if err := os.WriteFile(p, out.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return p, size
}

// The archive of issue 15 (4096 CPU columns × 60 000 rows, ~1 MB) unpacked
// to 491 MB and made inventory die at 4.7 GB. It is refused at its tar
// header, before a byte of proc/interrupts is written.
func TestSnapshotHugeInterruptsRefused(t *testing.T) {
	box := sandbox(t)
	snap, size := hugeInterruptsSnapshot(t, 4096, 60000)
	if fi, _ := os.Stat(snap); fi.Size() > 2<<20 {
		t.Fatalf("test archive is %d bytes, want a small one", fi.Size())
	}
	_, cleanup, err := OpenSnapshot(snap)
	if err == nil {
		cleanup()
		t.Fatalf("a %d-byte proc/interrupts was unpacked", size)
	}
	for _, want := range []string{snap, `"proc/interrupts"`, itoa(int(size)), "limit"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %s", err, want)
		}
	}
	assertNoSnapshotDirs(t, box)
}

// 1 900 nested directories in a 59 KB archive took 85 s to unpack (every
// entry walked every level above it). Depth is limited.
func TestSnapshotDeepPathRefused(t *testing.T) {
	box := sandbox(t)
	var entries []tarEntry
	name := ""
	for range 1900 {
		name += "a/"
		entries = append(entries, tarEntry{name: name, dir: true})
	}
	entries = append(entries, tarEntry{name: name + "f", body: "x"})
	_, cleanup, err := OpenSnapshot(writeTarGz(t, entries))
	if err == nil {
		cleanup()
		t.Fatal("1900 levels unpacked")
	}
	if !strings.Contains(err.Error(), "levels") || !strings.Contains(err.Error(), "limit") {
		t.Errorf("err = %v, want the depth limit named", err)
	}
	assertNoSnapshotDirs(t, box)
}

// An entry whose name is longer than PATH_MAX is refused by name, before the
// file system refuses it with a less helpful ENAMETOOLONG.
func TestSnapshotLongNameRefused(t *testing.T) {
	sandbox(t)
	long := strings.Repeat("x", 5000)
	_, _, err := OpenSnapshot(writeTarGz(t, []tarEntry{{name: "proc/" + long, body: "1"}}))
	if err == nil || !strings.Contains(err.Error(), "limit") {
		t.Fatalf("err = %v, want the name-length limit", err)
	}
	_, _, err = OpenSnapshot(writeTarGz(t, []tarEntry{{name: "l", link: long}}))
	if err == nil || !strings.Contains(err.Error(), "limit") {
		t.Fatalf("err = %v, want the link-target limit", err)
	}
}

// An entry of a type that is not unpacked is skipped, but its declared size
// still has to be read past: a 1 TB entry would decompress for hours.
func TestSnapshotSkippedEntrySizeCounts(t *testing.T) {
	sandbox(t)
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	tw.WriteHeader(&tar.Header{Name: "dev/null", Typeflag: 'Z', Size: 1 << 40}) // unknown type, with data
	tw.Flush()
	p := filepath.Join(t.TempDir(), "s.tar.gz")
	os.WriteFile(p, gzMember(t, buf.Bytes()), 0o644)
	_, _, err := OpenSnapshot(p)
	if err == nil || !strings.Contains(err.Error(), `"dev/null"`) || !strings.Contains(err.Error(), "limit") {
		t.Fatalf("err = %v, want the per-file limit for dev/null", err)
	}
}

func assertNoSnapshotDirs(t *testing.T, dir string) {
	t.Helper()
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), "irqpilot-snapshot-") {
			t.Errorf("left behind in %s: %s", dir, e.Name())
		}
	}
}

// The entry-count and total-size limits, shrunk so that the test need not
// unpack a million entries or a gigabyte to reach them.
func TestSnapshotCountAndTotalLimits(t *testing.T) {
	box := sandbox(t)
	var entries []tarEntry
	for i := range 50 {
		entries = append(entries, tarEntry{name: "proc/irq/" + itoa(i) + "/node", body: "0123456789"})
	}
	snap := writeTarGz(t, entries)
	lim := defaultSnapshotLimits
	lim.entries = 49
	if _, _, err := openSnapshot(snap, lim); err == nil || !strings.Contains(err.Error(), "more than 49 entries") {
		t.Errorf("entries: err = %v", err)
	}
	lim = defaultSnapshotLimits
	lim.bytes = 495
	if _, _, err := openSnapshot(snap, lim); err == nil || !strings.Contains(err.Error(), `more than 495 bytes (limit) at entry "proc/irq/49/node"`) {
		t.Errorf("bytes: err = %v", err)
	}
	lim.bytes, lim.entries = 500, 50
	_, cleanup, err := openSnapshot(snap, lim)
	if err != nil {
		t.Fatalf("at the limits: %v", err)
	}
	cleanup()
	assertNoSnapshotDirs(t, box)
}

// The largest real /proc/interrupts (1152 CPUs, 13.4 MB) goes through a
// snapshot and parses, inside every limit.
func TestSnapshot1152CPUInterrupts(t *testing.T) {
	sandbox(t)
	data := readFixture(t, "pcp/interrupts-1152cpu-x86_64.bz2")
	f, cleanup, err := OpenSnapshot(writeTarGz(t, []tarEntry{{name: "proc/interrupts", body: string(data)}}))
	if err != nil {
		t.Fatal(err)
	}
	defer cleanup()
	b, err := f.ReadFile("proc/interrupts")
	if err != nil {
		t.Fatal(err)
	}
	in, err := parseInterrupts("/proc/interrupts", b)
	if err != nil || len(in.CPUs) != 1152 || len(in.Lines) != 1056 {
		t.Fatalf("parse: %v", err)
	}
}
