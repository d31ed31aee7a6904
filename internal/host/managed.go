package host

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/irqpilot/irqpilot/internal/kernel"
)

// This file finds kernel-managed IRQs without writing anything: from debugfs
// (/sys/kernel/debug/irq/irqs/N) where it is mounted, from the record apply
// keeps in its state directory, and from a capture's synthetic file.

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
// stateDir is a directory of the machine behind kfs, the live one: the
// record is for that machine's boot.
//
// A later observation of an IRQ replaces an earlier one; a record from
// another boot is discarded first. The file is written root-only (0600):
// created with O_EXCL|O_NOFOLLOW under a random name in stateDir (made 0700
// if missing), synced, and renamed over managed.json, so readers see the old
// record or the new one, never a part, and a symlink planted in stateDir is
// replaced, not followed.
func RecordManaged(kfs *kernel.FS, stateDir string, managed, movable []int) error {
	if stateDir == "" {
		return errors.New("record managed IRQs: no state directory")
	}
	rel, err := recordFile(stateDir)
	if err != nil {
		return fmt.Errorf("record managed IRQs: %w", err)
	}
	if err := os.MkdirAll(kfs.Path(filepath.Dir(rel)), 0o700); err != nil {
		return fmt.Errorf("record managed IRQs: %w", err)
	}
	// A record from another boot is dropped: IRQ numbers are assigned
	// anew at each boot.
	boot := kfs.BootID()
	state := map[int]Managed{}
	if old, err := readRecord(kfs, rel); err == nil && old != nil && (old.BootID == "" || boot == "" || old.BootID == boot) {
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
	text := string(data) + "\n"
	if err := kfs.WriteConfigFile(rel, kernel.FileState{Data: &text, Mode: 0o600, UID: -1, GID: -1}); err != nil {
		return fmt.Errorf("record managed IRQs in %s: %w", recordPath(stateDir), err)
	}
	return nil
}

func recordPath(stateDir string) string { return filepath.Join(stateDir, ManagedFile) }

// recordFile is the record's path relative to the machine's root, for
// kernel.FS's configuration-file calls (no symlink followed, regular files
// of sensible size only, atomic replacement).
func recordFile(stateDir string) (string, error) {
	abs, err := filepath.Abs(recordPath(stateDir))
	if err != nil {
		return "", err
	}
	return strings.TrimPrefix(abs, "/"), nil
}

// readRecord reads the record at rel below root's root; nil, nil when
// there is none.
func readRecord(root *kernel.FS, rel string) (*managedRecord, error) {
	st, err := root.ConfigFile(rel)
	if err != nil {
		return nil, fmt.Errorf("%s (remove it; apply writes it again)", err)
	}
	if st.Data == nil {
		return nil, nil
	}
	var rec managedRecord
	if err := json.Unmarshal([]byte(*st.Data), &rec); err != nil {
		return nil, fmt.Errorf("/%s: %v (remove it; apply writes it again)", rel, err)
	}
	return &rec, nil
}

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

// managedFromRecord applies apply's record in stateDir, a directory of the
// machine behind kfs (the live one), to the IRQs still unknown; it returns
// how many it filled and, when it could not be used, why.
func managedFromRecord(kfs *kernel.FS, h *Host, stateDir string) (int, error) {
	if stateDir == "" {
		return 0, errors.New("no state directory to find apply's record in")
	}
	p := recordPath(stateDir)
	rel, err := recordFile(stateDir)
	if err != nil {
		return 0, err
	}
	rec, err := readRecord(kfs, rel)
	if err != nil {
		return 0, err
	}
	if rec == nil {
		return 0, fmt.Errorf("no record %s", p)
	}
	if rec.BootID != "" {
		if boot := kfs.BootID(); boot != "" && boot != rec.BootID {
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
