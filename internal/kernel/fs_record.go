package kernel

import (
	"errors"
	"io/fs"
	"maps"
	"path/filepath"
	"syscall"

	"golang.org/x/sys/unix"
)

// Access says how a recorded path was used.
type Access int

// Kinds of access, so that a capture stores a listed directory's entries
// and a read file's content.
const (
	AccessFile Access = 1 << iota // content read
	AccessDir                     // directory listed
	AccessStat                    // existence or link checked
)

// SyntheticDir is the directory, relative to a snapshot's root, that holds
// facts irqpilot learned without a file.
const SyntheticDir = "irqpilot"

// ReadErrorsFile is the synthetic file (below SyntheticDir) listing the reads
// that failed during a capture, replayed when reading the snapshot.
const ReadErrorsFile = "read-errors.json"

// FeaturesFile is the synthetic file holding the live machine's feature
// probes (which kernel files exist), so a capture answers them as the
// machine did: a capture keeps only the files read, and a file it lacks
// may have been there unread.
const FeaturesFile = "features.json"

// FeaturesNetNSFile marks a capture whose feature probes ran in a network
// namespace other than the initial one: the files that exist only in the
// initial namespace were missing from the namespace, not the kernel.
const FeaturesNetNSFile = "features-netns"

// WholeTreeFile marks a test tree that holds every file its kernel would
// show (a generated host): there, a missing file is a missing feature.
const WholeTreeFile = "whole-tree"

// ReadError is a recorded failed read: the operation ("open", "read",
// "readlink") and the errno by name ("EIO").
type ReadError struct {
	Op    string `json:"op"`
	Errno string `json:"errno"`
}

// StartRecording makes the FS remember every path read from now on.
func (f *FS) StartRecording() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.recording = true
	f.reads = map[string]Access{}
	f.content = map[string][]byte{}
	f.errs = map[string]ReadError{}
	f.synthetic = map[string][]byte{}
}

// StopRecording ends recording; what was recorded stays available.
func (f *FS) StopRecording() {
	f.mu.Lock()
	f.recording = false
	f.mu.Unlock()
}

// Recorded returns the root-relative paths (leading "/") read since
// StartRecording, with how each was used.
func (f *FS) Recorded() map[string]Access {
	f.mu.Lock()
	defer f.mu.Unlock()
	return maps.Clone(f.reads)
}

// RecordedContent returns the bytes of a file as the tool first read it
// while recording (path as in Recorded).
func (f *FS) RecordedContent(path string) ([]byte, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	b, ok := f.content[path]
	return b, ok
}

// RecordedErrors returns the reads that failed while recording, by path,
// except opens of files that do not exist.
func (f *FS) RecordedErrors() map[string]ReadError {
	f.mu.Lock()
	defer f.mu.Unlock()
	return maps.Clone(f.errs)
}

// Synthetics returns the synthetic files saved (or, below a snapshot, read)
// since StartRecording.
func (f *FS) Synthetics() map[string][]byte {
	f.mu.Lock()
	defer f.mu.Unlock()
	return maps.Clone(f.synthetic)
}

func (f *FS) note(rel string, a Access) {
	f.mu.Lock()
	if f.recording {
		f.reads[clean(rel)] |= a
	}
	f.mu.Unlock()
}

// noteResult records the outcome of a read: the content of a file (first
// read wins, so a capture holds what the model was built from) or the error.
func (f *FS) noteResult(rel string, data []byte, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.recording {
		return
	}
	p := clean(rel)
	if err == nil {
		if data != nil {
			if _, ok := f.content[p]; !ok {
				f.content[p] = append([]byte(nil), data...)
			}
		}
		return
	}
	var pe *fs.PathError
	var errno syscall.Errno
	// A missing file needs no record (the snapshot lacks it too); but some
	// attributes exist and fail on read, even with ENOENT (xps_cpus of a
	// single-queue device), and those must fail the same way from a snapshot.
	if errors.As(err, &pe) && errors.As(err, &errno) && !(errno == syscall.ENOENT && pe.Op == "open") {
		if name := unix.ErrnoName(errno); name != "" {
			f.errs[p] = ReadError{Op: pe.Op, Errno: name}
		}
	}
}

// SaveSynthetic keeps data under name for a capture (only while recording).
func (f *FS) SaveSynthetic(name string, data []byte) {
	f.mu.Lock()
	if f.recording {
		f.synthetic[name] = append([]byte(nil), data...)
	}
	f.mu.Unlock()
}

// ReadSynthetic reads a synthetic file saved by a capture: <root>/irqpilot/<name>.
// While recording, what it reads is kept for the next capture, so that
// capturing from a snapshot keeps the snapshot's synthetic facts.
func (f *FS) ReadSynthetic(name string) ([]byte, error) {
	b, err := f.readOnDisk(filepath.Join(f.root, SyntheticDir, filepath.Clean("/"+name)))
	err = f.kernelErr(err)
	if err == nil {
		f.mu.Lock()
		if f.recording {
			f.synthetic[name] = append([]byte(nil), b...)
		}
		f.mu.Unlock()
	}
	return b, err
}
