package lab

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/irqpilot/irqpilot/internal/kernel"
)

// A lab or fleet run keeps its images in a temporary directory and its
// taps (and the fleet's bridge) in a network namespace of its own; both
// are removed when the run ends, on an error and on a signal. A run that
// was killed (SIGKILL, a test binary's timeout) removes nothing: its
// directory holds an owner file naming the process and the namespace, and
// the next run reclaims what a dead owner left, as bench and the test bed
// reclaim theirs.

const ownerFile = "owner.json"

// runOwner is what a run's owner file says.
type runOwner struct {
	PID       int    `json:"pid"`
	StartTime uint64 `json:"start_time"` // /proc/PID/stat's, so a recycled PID is no owner
	Netns     string `json:"netns"`
}

// markOwner writes dir's owner file naming this process of fs's machine
// and the namespace ns, before the namespace is created: a run killed at
// any later point leaves an owner file that names all it made.
func markOwner(fs *kernel.FS, dir, ns string) error {
	st, err := fs.ProcStart(os.Getpid())
	if err != nil {
		return fmt.Errorf("lab owner file: %w", err)
	}
	b, _ := json.Marshal(runOwner{PID: os.Getpid(), StartTime: st, Netns: ns})
	p := filepath.Join(dir, ownerFile)
	if err := os.WriteFile(p, b, 0o600); err != nil {
		return fmt.Errorf("lab owner file: %w", err)
	}
	return nil
}

// alive reports whether the owner's process still runs on fs's machine
// (the same one: a PID the kernel gave to another process since is not it).
func (o runOwner) alive(fs *kernel.FS) bool {
	if o.PID <= 0 {
		return false
	}
	st, err := fs.ProcStart(o.PID)
	return err == nil && (o.StartTime == 0 || st == o.StartTime)
}

// ReclaimStale removes what lab and fleet runs whose owner process is gone
// left behind: their network namespace (and so their taps and bridge) and
// their temporary directory, found under os.TempDir(). A directory without
// an owner file is not known to be a run's and is left alone, as is every
// run whose owner still runs on fs's machine, the host (Options.FS). It
// says on log what it removed.
func ReclaimStale(fs *kernel.FS, log io.Writer) ([]string, error) {
	var reclaimed []string
	var errs []error
	for _, pattern := range []string{"irqpilot-lab-*", "irqpilot-fleet-*"} {
		dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), pattern))
		for _, dir := range dirs {
			// The temporary directory is shared: only a directory and an
			// owner file this user made, that no one else can write, are
			// believed (another user's file could name a live run's
			// namespace).
			if !ownedDir(dir) || !ownedFile(filepath.Join(dir, ownerFile)) {
				continue
			}
			b, err := os.ReadFile(filepath.Join(dir, ownerFile))
			if err != nil {
				continue
			}
			var o runOwner
			if json.Unmarshal(b, &o) != nil || o.alive(fs) {
				continue
			}
			// Only a name this package makes is deleted: the owner file
			// is root's, but a namespace is not removed on its word alone.
			if o.Netns != "" && (strings.HasPrefix(o.Netns, "irqplab-") || strings.HasPrefix(o.Netns, "irqpfleet-")) && !strings.ContainsAny(o.Netns, "/.") {
				if _, err := os.Stat(filepath.Join(kernel.RunNetNSDir, o.Netns)); err == nil {
					// Removing the name frees nothing while a process
					// (a guest, Prometheus) still runs inside it.
					for _, pid := range kernel.NetnsPIDs(o.Netns) {
						_ = syscall.Kill(pid, syscall.SIGKILL)
					}
					if err := kernel.DelNetns(o.Netns); err != nil {
						errs = append(errs, fmt.Errorf("stale lab run %s: %w", dir, err))
						continue
					}
				}
			}
			if err := os.RemoveAll(dir); err != nil {
				errs = append(errs, fmt.Errorf("stale lab run %s: %w", dir, err))
				continue
			}
			if log != nil {
				fmt.Fprintf(log, "lab: reclaimed what a killed run (pid %d) left: namespace %s, %s\n", o.PID, o.Netns, dir)
			}
			reclaimed = append(reclaimed, dir)
		}
	}
	return reclaimed, errors.Join(errs...)
}

func ownedDir(p string) bool {
	fi, err := os.Lstat(p)
	return err == nil && fi.IsDir() && ownedByMe(fi)
}

func ownedFile(p string) bool {
	fi, err := os.Lstat(p)
	return err == nil && fi.Mode().IsRegular() && ownedByMe(fi)
}

// ownedByMe: this user's, and writable by no one else.
func ownedByMe(fi os.FileInfo) bool {
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && int(st.Uid) == os.Getuid() && fi.Mode().Perm()&0o022 == 0
}
