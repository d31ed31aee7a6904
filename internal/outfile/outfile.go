// Package outfile writes the files a command is asked to write with -o
// (a capture, a plan, a bench report, a chart). A regular file is written
// whole or not at all: the data goes to a temporary file beside it, which
// is renamed into place, so a reader never sees half of it and a failure
// leaves the old file as it was. A name that is a device or a pipe
// ("-o /dev/null", "-o /dev/stdout", a FIFO) is written to as it is: a
// rename would put a regular file in its place, which as root replaces
// /dev/null for every program on the machine. A symbolic link is replaced
// by the file, never followed, so a link another user plants where root
// writes cannot send the data elsewhere. A block device is refused: an
// output is never written over a disk.
package outfile

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// DefaultMode is the permission of a new file (an existing regular file
// keeps its own).
const DefaultMode fs.FileMode = 0o644

// File is an output being written; Close commits it, Abort drops it.
type File struct {
	*os.File
	final string // the name asked for; "" when writing straight to it
	done  bool
}

// Create starts the output named path. Close puts it in place; Abort
// (safe after Close) leaves the old file untouched.
func Create(path string) (*File, error) {
	fi, through, err := kind(path)
	if err != nil {
		return nil, err
	}
	if through {
		// Written as it is: no create, no truncate, no rename.
		f, err := os.OpenFile(path, os.O_WRONLY, 0)
		if err != nil {
			return nil, err
		}
		return &File{File: f}, nil
	}
	mode := DefaultMode
	if fi != nil && fi.Mode().IsRegular() {
		mode = fi.Mode().Perm()
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".irqpilot-*")
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if err := tmp.Chmod(mode); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &File{File: tmp, final: path}, nil
}

// Close commits the output: the temporary file is flushed to disk and
// renamed over the name asked for.
func (f *File) Close() error {
	if f.done {
		return nil
	}
	f.done = true
	if f.final == "" {
		return f.File.Close()
	}
	err := f.File.Sync()
	if cerr := f.File.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.File.Name(), f.final)
	}
	if err != nil {
		os.Remove(f.File.Name())
		return fmt.Errorf("%s: %w", f.final, err)
	}
	return nil
}

// Abort drops an output not yet committed: the old file stays as it was.
func (f *File) Abort() {
	if f.done {
		return
	}
	f.done = true
	f.File.Close()
	if f.final != "" {
		os.Remove(f.File.Name())
	}
}

// Write writes data as the whole output named path.
func Write(path string, data []byte) error {
	f, err := Create(path)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Abort()
		return fmt.Errorf("%s: %w", path, err)
	}
	return f.Close()
}

// kind looks at what path names without following a link: fi is nil when
// nothing is there; through is set for a character device or a pipe, which
// are written as they are. A directory, a socket and a block device are
// refused.
func kind(path string) (fi fs.FileInfo, through bool, err error) {
	fi, err = os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	m := fi.Mode()
	switch {
	case m.IsDir():
		return nil, false, fmt.Errorf("%s: is a directory, not a file to write", path)
	case m&fs.ModeDevice != 0 && m&fs.ModeCharDevice == 0:
		return nil, false, fmt.Errorf("%s: is a block device: refusing to write an output over a disk", path)
	case m&fs.ModeSocket != 0:
		return nil, false, fmt.Errorf("%s: is a socket, not a file to write", path)
	}
	return fi, m&(fs.ModeCharDevice|fs.ModeNamedPipe) != 0, nil
}

// OpenStream opens path for an output written as it grows (a recording a
// reader follows), where a file renamed into place at the end would show
// nothing until then. A regular file is truncated; a device or a pipe is
// written as it is; a symbolic link is refused, not followed.
func OpenStream(path string) (*os.File, error) {
	fi, through, err := kind(path)
	if err != nil {
		return nil, err
	}
	flags := os.O_WRONLY | os.O_CREATE | os.O_TRUNC | unix.O_NOFOLLOW
	if through {
		flags = os.O_WRONLY
	}
	if fi != nil && fi.Mode()&fs.ModeSymlink != 0 {
		return nil, fmt.Errorf("%s: is a symbolic link, not followed: name the file itself", path)
	}
	return os.OpenFile(path, flags, DefaultMode)
}
