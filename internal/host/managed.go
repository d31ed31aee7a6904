package host

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"github.com/irqpilot/irqpilot/internal/kernel"
)

// This file finds kernel-managed IRQs without writing anything: from debugfs
// (/sys/kernel/debug/irq/irqs/N) where it is mounted, from the record apply
// keeps in its state directory, and from a capture's synthetic file.

// bootIDPath identifies the running boot; a record from another boot is
// ignored, since IRQ numbers are assigned anew at each boot.
const bootIDPath = "proc/sys/kernel/random/boot_id"

// maxRecordSize bounds the record read from the state directory.
const maxRecordSize = 1 << 20

// managedRecord is <state-dir>/managed.json: the same shape as the synthetic
// ManagedFile, plus the boot it was made in.
type managedRecord struct {
	managedProbe
	BootID string `json:"boot_id,omitempty"`
}

// RecordManaged merges what apply learned from the kernel into
// <stateDir>/managed.json, so that later read-only commands (inventory, plan,
// doctor, apply --dry-run) know these IRQs without writing anything:
// managed are IRQs whose smp_affinity_list write the kernel refused with
// EIO/EPERM (kernel.ErrManaged), movable those whose write it accepted. The
// apply pipeline calls it after writing IRQ affinities; its failure changes
// nothing already applied and should only be reported.
//
// A later observation of an IRQ replaces an earlier one; a record from
// another boot is discarded first. The file is written root-only (0600):
// created with O_EXCL|O_NOFOLLOW under a random name in stateDir (made 0700
// if missing), synced, and renamed over managed.json, so readers see the old
// record or the new one, never a part, and a symlink planted in stateDir is
// replaced, not followed.
func RecordManaged(stateDir string, managed, movable []int) error {
	if stateDir == "" {
		return errors.New("record managed IRQs: no state directory")
	}
	if err := os.MkdirAll(stateDir, 0o700); err != nil {
		return fmt.Errorf("record managed IRQs: %w", err)
	}
	boot := currentBootID()
	state := map[int]Managed{}
	if old, err := readRecordFile(recordPath(stateDir)); err == nil && (old.BootID == "" || boot == "" || old.BootID == boot) {
		for _, n := range old.Movable {
			state[n] = ManagedNo
		}
		for _, n := range old.Managed {
			state[n] = ManagedYes
		}
	}
	for _, n := range movable {
		state[n] = ManagedNo
	}
	for _, n := range managed {
		state[n] = ManagedYes
	}
	rec := managedRecord{managedProbe: probeOf(state), BootID: boot}
	data, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	return writeFileAtomic(recordPath(stateDir), append(data, '\n'))
}

func recordPath(stateDir string) string { return filepath.Join(stateDir, ManagedFile) }

// probeOf lists the known states, sorted.
func probeOf(state map[int]Managed) managedProbe {
	p := managedProbe{Managed: []int{}, Movable: []int{}}
	for n, m := range state {
		switch m {
		case ManagedYes:
			p.Managed = append(p.Managed, n)
		case ManagedNo:
			p.Movable = append(p.Movable, n)
		}
	}
	slices.Sort(p.Managed)
	slices.Sort(p.Movable)
	return p
}

func currentBootID() string {
	b, err := os.ReadFile("/" + bootIDPath)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// writeFileAtomic writes data to path through a new 0600 file in the same
// directory renamed into place.
func writeFileAtomic(path string, data []byte) error {
	var rnd [8]byte
	if _, err := rand.Read(rnd[:]); err != nil {
		return err
	}
	tmp := filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+"."+hex.EncodeToString(rnd[:]))
	fh, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0o600)
	if err != nil {
		return fmt.Errorf("record managed IRQs: %w", err)
	}
	_, err = fh.Write(data)
	if err == nil {
		err = fh.Chmod(0o600) // whatever the umask
	}
	if err == nil {
		err = fh.Sync()
	}
	if cerr := fh.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("record managed IRQs in %s: %w", path, err)
	}
	if d, err := os.Open(filepath.Dir(path)); err == nil {
		d.Sync()
		d.Close()
	}
	return nil
}

// readRecordFile reads a record without following a symlink, refusing
// anything but a regular file of sensible size.
func readRecordFile(path string) (*managedRecord, error) {
	fh, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_CLOEXEC|syscall.O_NONBLOCK, 0)
	if err != nil {
		if errors.Is(err, syscall.ELOOP) {
			err = fmt.Errorf("%s is a symlink; not followed (remove it)", path)
		}
		return nil, err
	}
	defer fh.Close()
	st, err := fh.Stat()
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file (remove it)", path)
	}
	b, err := io.ReadAll(io.LimitReader(fh, maxRecordSize+1))
	if err != nil {
		return nil, err
	}
	if len(b) > maxRecordSize {
		return nil, fmt.Errorf("%s is larger than %d bytes (remove it)", path, maxRecordSize)
	}
	var rec managedRecord
	if err := json.Unmarshal(b, &rec); err != nil {
		return nil, fmt.Errorf("%s: %v (remove it; apply writes it again)", path, err)
	}
	return &rec, nil
}

// managedFromDebugfs fills in the managed state of every IRQ whose debugfs
// file can be read; it returns how many it filled and, when none, why.
func managedFromDebugfs(kfs *kernel.FS, h *Host) (int, error) {
	if err := kfs.StatIRQDebug(); err != nil {
		return 0, err
	}
	n := 0
	var firstErr error
	for i := range h.IRQs {
		q := &h.IRQs[i]
		d, err := kfs.ReadIRQDebug(q.Number)
		if err != nil {
			// A parse error says more than a missing file (an IRQ freed
			// since /proc/interrupts was read).
			if firstErr == nil || errors.Is(firstErr, fs.ErrNotExist) {
				firstErr = err
			}
			continue
		}
		q.Managed = ManagedNo
		if d.RefusesAffinity() {
			q.Managed = ManagedYes
		}
		n++
	}
	if n == 0 && firstErr != nil {
		return 0, firstErr
	}
	return n, nil
}

// managedFromRecord applies apply's record in stateDir to the IRQs still
// unknown; it returns how many it filled and, when it could not be used, why.
func managedFromRecord(kfs *kernel.FS, h *Host, stateDir string) (int, error) {
	if stateDir == "" {
		return 0, errors.New("no state directory to find apply's record in")
	}
	p := recordPath(stateDir)
	rec, err := readRecordFile(p)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, fmt.Errorf("no record %s", p)
	}
	if err != nil {
		return 0, err
	}
	if rec.BootID != "" {
		if boot, err := kfs.ReadString(bootIDPath); err == nil && boot != rec.BootID {
			return 0, fmt.Errorf("%s was recorded before the last boot; ignored (IRQ numbers change across boots)", p)
		}
	}
	return applyProbe(h, rec.managedProbe), nil
}

// applyProbe sets the managed state of the IRQs listed in p that are still
// unknown, and returns how many.
func applyProbe(h *Host, p managedProbe) int {
	state := map[int]Managed{}
	for _, n := range p.Movable {
		state[n] = ManagedNo
	}
	for _, n := range p.Managed {
		state[n] = ManagedYes
	}
	n := 0
	for i := range h.IRQs {
		q := &h.IRQs[i]
		if m, ok := state[q.Number]; ok && q.Managed == ManagedUnknown {
			q.Managed = m
			n++
		}
	}
	return n
}

// knownManaged is the managed state known for h's IRQs, in the synthetic
// file's shape.
func knownManaged(h *Host) managedProbe {
	state := map[int]Managed{}
	for _, q := range h.IRQs {
		state[q.Number] = q.Managed
	}
	return probeOf(state)
}
