// Package outfile writes the files a command is asked to write with -o
// (a capture, a plan, a bench report, a chart). A regular file is written
// whole or not at all: the data goes to a new file beside it, which is
// renamed into place, so a reader never sees half of it and a failure
// leaves the old file as it was; the old file's permissions and owner are
// kept. A name that is a character device or a pipe ("-o /dev/null",
// "-o /dev/stdout", a FIFO, `-o >(jq …)`) is written to as it is: a rename
// would put a regular file in its place, which as root replaces /dev/null
// for every program on the machine. A symbolic link is written through, as
// os.WriteFile would (the kernel's fs.protected_symlinks refuses root a
// link another user planted in a shared directory). A block device and a
// directory are refused: an output is never written over a disk.
package outfile

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// DefaultMode is the permission of a new file, less the umask (an existing
// regular file keeps its own).
const DefaultMode fs.FileMode = 0o644

// File is an output being written; Close commits it, Abort drops it.
type File struct {
	*os.File
	final string // the name asked for; "" when writing straight to it
	done  bool
}

// Create starts the output named path. Close puts it in place; Abort
// (harmless after Close) leaves the old file untouched.
func Create(path string) (*File, error) {
	fi, through, err := kind(path)
	if err != nil {
		return nil, err
	}
	if through {
		// Written as it is: no create, no rename. O_TRUNC only matters for
		// a regular file reached through a link (/dev/stdout redirected
		// to a file), where it is what the shell's > does.
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_TRUNC|syscall.O_NOCTTY, 0)
		if err != nil {
			return nil, err
		}
		return &File{File: f}, nil
	}
	if fi == nil {
		return Replacement(path, DefaultMode, -1, -1)
	}
	// The old file's mode exactly (no umask) and, as root, its owner.
	uid, gid := -1, -1
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && os.Geteuid() == 0 {
		uid, gid = int(st.Uid), int(st.Gid)
	}
	return Replacement(path, fi.Mode().Perm(), uid, gid)
}

// Replacement starts a new file that Close renames over path, whatever is
// there (a symbolic link at path is replaced, never followed): created
// exclusively beside it, never through a link, with mode exactly and, when
// uid and gid are not -1, that owner. kernel's configuration files are
// written this way too.
func Replacement(path string, mode fs.FileMode, uid, gid int) (*File, error) {
	tmp, err := create(filepath.Dir(path), "."+filepath.Base(path)+".irqpilot-", mode)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	err = tmp.Chmod(mode)
	if err == nil && uid >= 0 && gid >= 0 {
		err = tmp.Chown(uid, gid)
	}
	if err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &File{File: tmp, final: path}, nil
}

// create makes a new file in dir named prefix and a random suffix, with
// mode less the umask, as any new file.
func create(dir, prefix string, mode fs.FileMode) (*os.File, error) {
	for range 100 {
		var b [6]byte
		if _, err := rand.Read(b[:]); err != nil {
			return nil, err
		}
		f, err := os.OpenFile(filepath.Join(dir, prefix+hex.EncodeToString(b[:])), os.O_RDWR|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, mode)
		if !errors.Is(err, fs.ErrExist) {
			return f, err
		}
	}
	return nil, fmt.Errorf("no free temporary name in %s", dir)
}

// Close commits the output: the new file is flushed to disk, renamed over
// the name asked for, and the rename flushed with its directory.
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
	if d, err := os.Open(filepath.Dir(f.final)); err == nil {
		_ = d.Sync()
		d.Close()
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

// kind looks at what path names. fi is the regular file to replace (nil
// when there is none); through is set when the output is written to the
// name as it is: a character device, a pipe or a socket's file, or
// anything reached through a symbolic link. A directory, a block device
// and a dangling link are refused.
func kind(path string) (fi fs.FileInfo, through bool, err error) {
	lfi, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	link := lfi.Mode()&fs.ModeSymlink != 0
	fi = lfi
	if link {
		if fi, err = os.Stat(path); err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil, false, fmt.Errorf("%s: is a symbolic link to nothing: name the file itself", path)
			}
			return nil, false, err
		}
	}
	m := fi.Mode()
	switch {
	case m.IsDir():
		return nil, false, fmt.Errorf("%s: is a directory, not a file to write", path)
	case m&fs.ModeDevice != 0 && m&fs.ModeCharDevice == 0:
		return nil, false, fmt.Errorf("%s: is a block device: refusing to write an output over a disk", path)
	case link, !m.IsRegular():
		return nil, true, nil
	}
	return fi, false, nil
}

// OpenStream opens path for an output written as it grows (a recording a
// reader follows), where a file renamed into place at the end would show
// nothing until then. A regular file is truncated; a device, a pipe or a
// link is written through as Create does.
func OpenStream(path string) (*os.File, error) {
	_, through, err := kind(path)
	if err != nil {
		return nil, err
	}
	flags := os.O_WRONLY | os.O_CREATE | os.O_TRUNC | syscall.O_NOCTTY
	if !through {
		flags |= syscall.O_NOFOLLOW
	}
	return os.OpenFile(path, flags, DefaultMode)
}
