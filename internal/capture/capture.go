// Package capture archives exactly the kernel files irqpilot read, so that
// `irqpilot --snapshot FILE` reproduces the same model on another machine.
//
// The input is a kernel.FS that recorded a run (kernel.FS.StartRecording):
// the files it read (with the bytes as read), the directories it listed, the
// paths it checked, the reads that failed, and the synthetic facts it learned
// without a file. The output is a deterministic .tar.gz (sorted entries, zero
// times, fixed modes) holding:
//
//   - every recorded file with its recorded content, at its real path;
//   - every symlink on the way to a recorded path (sys/class/net/eth0 →
//     ../../devices/…), so that the path resolves the same in the snapshot;
//   - the entries of every listed directory: directories and symlinks as
//     such, regular files as empty placeholders (names only, no content);
//   - the synthetic files under irqpilot/ and irqpilot/read-errors.json.
//
// Nothing else. Paths outside /proc, /sys, /etc/default/irqbalance and
// /etc/sysconfig/irqbalance are refused, as are process details other than
// comm/stat/status and net/ (/proc/net is a link to /proc/self/net):
// command lines are never archived, and a process
// environment is archived only as a filtered copy holding its IRQBALANCE_*
// variables (how irqbalance is told which CPUs to ban).
package capture

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/irqpilot/irqpilot/internal/kernel"
)

// Refusal is a recorded path left out of the archive, and why.
type Refusal struct {
	Path   string `json:"path"`
	Reason string `json:"reason"`
}

// Result summarises a written archive.
type Result struct {
	Files    int       `json:"files"`    // regular files (incl. placeholders and synthetics)
	Dirs     int       `json:"dirs"`     // directories
	Symlinks int       `json:"symlinks"` // symbolic links
	Bytes    int64     `json:"bytes"`    // content bytes before compression
	Refused  []Refusal `json:"refused"`  // recorded paths not archived
}

type kind int

const (
	kindDir kind = iota
	kindLink
	kindPlaceholder // a regular file whose name matters but content was not read
	kindFile
)

type entry struct {
	kind kind
	data []byte
	link string
}

type archive struct {
	fs      *kernel.FS
	entries map[string]*entry
	refused map[string]string
}

// add records an entry; a file with content replaces a placeholder, anything
// else keeps what is there.
func (a *archive) add(path string, e *entry) {
	if old, ok := a.entries[path]; ok {
		if !(old.kind == kindPlaceholder && e.kind == kindFile) {
			return
		}
	}
	a.entries[path] = e
}

func (a *archive) refuse(path, reason string) {
	if _, ok := a.refused[path]; !ok {
		a.refused[path] = reason
	}
}

// Options change what a capture keeps.
type Options struct {
	// RedactCmdline keeps, of /proc/cmdline, only the parameters about CPU
	// isolation and IRQ placement (isolcpus=, nohz_full= — the two the
	// host model reads — and irqaffinity=, rcu_nocbs=, nr_cpus=, maxcpus=,
	// possible_cpus=, nosmt, numa=, for a person reading the snapshot),
	// dropping the rest (root device, console, anything secret).
	RedactCmdline bool
}

// cmdlineKept are the kernel parameters RedactCmdline keeps.
var cmdlineKept = []string{"isolcpus=", "nohz_full=", "irqaffinity=", "rcu_nocbs=", "nr_cpus=", "maxcpus=",
	"possible_cpus=", "nosmt", "numa=", "managed_irq"}

// RedactCmdline reduces a kernel command line to the parameters about CPU
// isolation and IRQ placement (Options.RedactCmdline).
func RedactCmdline(cmdline string) string {
	var kept []string
	for _, f := range strings.Fields(cmdline) {
		for _, k := range cmdlineKept {
			if f == strings.TrimSuffix(k, "=") || strings.HasPrefix(f, k) {
				kept = append(kept, f)
				break
			}
		}
	}
	return strings.Join(kept, " ") + "\n"
}

// Write archives what fs recorded to w as a gzip-compressed tar.
func Write(w io.Writer, fs *kernel.FS) (*Result, error) {
	return WriteWith(w, fs, Options{})
}

// WriteWith is Write with options.
func WriteWith(w io.Writer, fs *kernel.FS, o Options) (*Result, error) {
	a := &archive{fs: fs, entries: map[string]*entry{}, refused: map[string]string{}}
	rec := fs.Recorded()
	paths := slices.Sorted(maps.Keys(rec))
	for _, p := range paths {
		a.addRecorded(p, rec[p])
	}

	errs := fs.RecordedErrors()
	for p := range errs {
		if Refuse(p) != "" {
			delete(errs, p)
		}
	}
	if len(errs) > 0 {
		b, err := json.MarshalIndent(errs, "", "  ")
		if err != nil {
			return nil, err
		}
		a.add("/"+kernel.SyntheticDir+"/"+kernel.ReadErrorsFile, &entry{kind: kindFile, data: append(b, '\n')})
	}
	for name, data := range fs.Synthetics() {
		clean := filepath.Clean("/" + name)
		if clean == "/" || clean == "/"+kernel.ReadErrorsFile {
			continue
		}
		a.add("/"+kernel.SyntheticDir+clean, &entry{kind: kindFile, data: data})
	}
	if e, ok := a.entries["/proc/cmdline"]; ok && o.RedactCmdline && e.kind == kindFile {
		e.data = []byte(RedactCmdline(string(e.data)))
	}
	return a.write(w)
}

// addRecorded adds one recorded path with the symlinks leading to it.
func (a *archive) addRecorded(p string, acc kernel.Access) {
	if why := Refuse(p); why != "" {
		a.refuse(p, why)
		return
	}
	real, links, rerr := a.fs.ResolveLinks(p)
	for _, l := range links {
		if why := Refuse(l); why != "" {
			a.refuse(l, why)
			return
		}
		t, err := os.Readlink(a.fs.Path(l))
		if err != nil {
			return
		}
		a.add(l, &entry{kind: kindLink, link: t})
	}
	if rerr != nil {
		// Absent: keep the part that exists, so that the snapshot fails at
		// the same place with the same "no such file".
		if real != "" && real != "/" && Refuse(real) == "" {
			if fi, err := os.Stat(a.fs.Path(real)); err == nil && fi.IsDir() {
				a.add(real, &entry{kind: kindDir})
			}
		}
		return
	}
	if why := Refuse(real); why != "" {
		a.refuse(real, why)
		return
	}
	fi, err := os.Stat(a.fs.Path(real))
	if err != nil {
		return
	}
	switch {
	case fi.IsDir():
		a.add(real, &entry{kind: kindDir})
		if acc&kernel.AccessDir != 0 {
			a.addListing(real)
		}
	case fi.Mode().IsRegular():
		if acc&kernel.AccessFile != 0 {
			if data, ok := a.fs.RecordedContent(p); ok {
				a.add(real, &entry{kind: kindFile, data: Filter(real, data)})
				return
			}
			if _, failed := a.fs.RecordedErrors()[p]; failed {
				// Replayed from read-errors.json; a placeholder keeps the name.
				a.add(real, &entry{kind: kindPlaceholder})
				return
			}
		}
		a.add(real, &entry{kind: kindPlaceholder})
	}
}

// addListing adds the entries of a listed directory (names only).
func (a *archive) addListing(dir string) {
	ents, err := os.ReadDir(a.fs.Path(dir))
	if err != nil {
		return
	}
	for _, e := range ents {
		child := filepath.Join(dir, e.Name())
		if Refuse(child) != "" {
			continue
		}
		switch t := e.Type(); {
		case t&os.ModeSymlink != 0:
			if target, err := os.Readlink(a.fs.Path(child)); err == nil {
				a.add(child, &entry{kind: kindLink, link: target})
			}
		case t.IsDir():
			a.add(child, &entry{kind: kindDir})
		case t.IsRegular():
			a.add(child, &entry{kind: kindPlaceholder})
		}
	}
}

var epoch = time.Unix(0, 0).UTC()

func (a *archive) write(w io.Writer) (*Result, error) {
	// Every ancestor directory gets its own entry, so tools listing the
	// archive see the tree, and unpacking creates real directories.
	for p := range a.entries {
		for d := filepath.Dir(p); d != "/"; d = filepath.Dir(d) {
			if _, ok := a.entries[d]; !ok {
				a.entries[d] = &entry{kind: kindDir}
			}
		}
	}
	paths := slices.Sorted(maps.Keys(a.entries))

	res := &Result{Refused: []Refusal{}}
	gz := gzip.NewWriter(w)
	tw := tar.NewWriter(gz)
	for _, p := range paths {
		e := a.entries[p]
		h := &tar.Header{Name: strings.TrimPrefix(p, "/"), ModTime: epoch, Format: tar.FormatPAX}
		switch e.kind {
		case kindDir:
			h.Typeflag, h.Mode, h.Name = tar.TypeDir, 0o755, h.Name+"/"
			res.Dirs++
		case kindLink:
			h.Typeflag, h.Mode, h.Linkname = tar.TypeSymlink, 0o777, e.link
			res.Symlinks++
		default:
			h.Typeflag, h.Mode, h.Size = tar.TypeReg, 0o644, int64(len(e.data))
			res.Files++
			res.Bytes += h.Size
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, fmt.Errorf("archive %s: %w", p, err)
		}
		if h.Size > 0 {
			if _, err := tw.Write(e.data); err != nil {
				return nil, fmt.Errorf("archive %s: %w", p, err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	if err := gz.Close(); err != nil {
		return nil, err
	}
	for p, why := range a.refused {
		res.Refused = append(res.Refused, Refusal{Path: p, Reason: why})
	}
	sort.Slice(res.Refused, func(i, j int) bool { return res.Refused[i].Path < res.Refused[j].Path })
	return res, nil
}

// etcFiles are the only files outside /proc and /sys a capture may hold.
var etcFiles = map[string]bool{
	"/etc/default/irqbalance":   true,
	"/etc/sysconfig/irqbalance": true,
}

// procFiles are the per-process files a capture may hold (below
// /proc/PID/ and /proc/PID/task/TID/).
var procFiles = map[string]bool{"comm": true, "stat": true, "status": true, "environ": true, "task": true}

// sensitive are kernel files that never belong in a capture.
var sensitive = []string{
	"/proc/kcore", "/proc/kmsg", "/proc/kallsyms", "/proc/keys", "/proc/key-users",
	"/proc/sysrq-trigger", "/proc/kpagecount", "/proc/kpageflags", "/proc/kpagecgroup",
	"/sys/firmware", "/sys/kernel/security", "/sys/kernel/debug", "/sys/kernel/tracing",
	"/sys/fs/bpf", "/sys/power",
}

// Refuse says why path (root-relative, leading "/") must not be archived,
// or "" when it may be.
func Refuse(path string) string {
	p := filepath.Clean("/" + path)
	if etcFiles[p] {
		return ""
	}
	inProc := p == "/proc" || strings.HasPrefix(p, "/proc/")
	if !inProc && p != "/sys" && !strings.HasPrefix(p, "/sys/") {
		return "outside /proc, /sys and the irqbalance configuration"
	}
	for _, s := range sensitive {
		if p == s || strings.HasPrefix(p, s+"/") {
			return "sensitive kernel file"
		}
	}
	if !inProc {
		return ""
	}
	parts := strings.Split(strings.TrimPrefix(p, "/proc/"), "/")
	if len(parts) < 2 || !isProcess(parts[0]) {
		return ""
	}
	rest := parts[1:]
	if len(rest) >= 2 && rest[0] == "task" {
		rest = rest[2:] // task/TID/…
	}
	if len(rest) == 0 {
		return ""
	}
	if rest[0] == "cmdline" {
		return "process command lines are never archived"
	}
	if rest[0] == "net" {
		return "" // /proc/net is /proc/self/net: the network namespace's tables
	}
	if len(rest) > 1 || !procFiles[rest[0]] {
		return "process details other than comm, stat, status and IRQBALANCE_* variables are not archived"
	}
	return ""
}

func isProcess(s string) bool {
	if s == "self" || s == "thread-self" {
		return true
	}
	if s == "" {
		return false
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// Filter returns the content to archive for a file: a process environment
// (/proc/PID/environ) reduced to its IRQBALANCE_* variables, anything else
// unchanged.
func Filter(path string, data []byte) []byte {
	if filepath.Base(path) != "environ" || !strings.HasPrefix(filepath.Clean("/"+path), "/proc/") {
		return data
	}
	var out []byte
	for _, kv := range bytes.Split(data, []byte{0}) {
		if bytes.HasPrefix(kv, []byte("IRQBALANCE_")) {
			out = append(out, kv...)
			out = append(out, 0)
		}
	}
	if out == nil {
		out = []byte{}
	}
	return out
}
