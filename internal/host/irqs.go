package host

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"sort"
	"strings"
	"time"

	"github.com/irqpilot/irqpilot/internal/kernel"
)

// ManagedFile is the synthetic file (kernel.FS.SaveSynthetic) in which a
// capture keeps the result of the managed-IRQ write probe, which no kernel
// file records.
const ManagedFile = "managed.json"

// managedProbe is the content of ManagedFile.
type managedProbe struct {
	Managed []int `json:"managed"` // the kernel refused a write of the current affinity
	Movable []int `json:"movable"` // the write of the current affinity succeeded
}

// SingleTotalCPU is the key under which SummaryIRQ.Counts holds the one
// machine-wide total of rows such as ERR and MIS, which have no per-CPU
// columns.
const SingleTotalCPU = -1

// readIRQs fills h.IRQs and h.Summary from /proc/interrupts, refined by
// /sys/kernel/irq/N/ where present, with the placement from /proc/irq/N/ and
// the managed state. A missing /proc/interrupts (a topology-only snapshot
// such as ghw's) leaves the IRQ table empty and is recorded in
// h.Unavailable; an unreadable or garbled one is an error, since everything
// irqpilot decides would rest on it. Everything else missing goes to
// h.Unavailable.
func readIRQs(kfs *kernel.FS, h *Host, opts Options) error {
	path := "/" + kernel.InterruptsPath
	in, err := kfs.Interrupts()
	var parse *kernel.ParseError
	switch {
	case errors.Is(err, fs.ErrNotExist):
		h.IRQs = []IRQ{}
		h.unavailable("irqs", path, fmt.Errorf("not present in this capture"))
		return nil
	case errors.As(err, &parse):
		return err
	case err != nil:
		return fmt.Errorf("read %s: %w", path, err)
	}
	rows := map[int]*kernel.InterruptLine{}
	for i := range in.Lines {
		l := &in.Lines[i]
		if l.IRQ < 0 {
			h.Summary = append(h.Summary, summaryRow(in, l))
			continue
		}
		rows[l.IRQ] = l
		h.IRQs = append(h.IRQs, IRQ{
			Number:  l.IRQ,
			Actions: append([]string{}, l.Actions...),
			Chip:    l.Chip,
			HWIRQ:   l.HWIRQ,
			Trigger: l.Trigger,
			Counts:  countsByCPU(in.CPUs, l.Counts),
			Managed: ManagedUnknown,
		})
	}
	sort.Slice(h.IRQs, func(i, j int) bool { return h.IRQs[i].Number < h.IRQs[j].Number })

	readSysIRQs(kfs, h, in, rows)
	readPlacement(kfs, h)
	if kfs.IsLive() && opts.ProbeManaged {
		probeManaged(kfs, h)
	} else {
		readManaged(kfs, h, opts)
	}
	return nil
}

func countsByCPU(cpus []int, counts []uint64) map[int]uint64 {
	m := make(map[int]uint64, len(counts))
	for i, c := range counts {
		m[cpus[i]] = c
	}
	return m
}

func summaryRow(in *kernel.Interrupts, l *kernel.InterruptLine) SummaryIRQ {
	s := SummaryIRQ{Name: l.Name, Description: l.Description}
	if len(l.Counts) == 1 && len(in.CPUs) > 1 {
		s.Counts = map[int]uint64{SingleTotalCPU: l.Counts[0]}
	} else {
		s.Counts = countsByCPU(in.CPUs, l.Counts)
	}
	return s
}

// readSysIRQs prefers /sys/kernel/irq/N/ for chip, hwirq, actions and counts
// (one value per file: nothing to misparse), and records where it disagrees
// with /proc/interrupts.
func readSysIRQs(kfs *kernel.FS, h *Host, in *kernel.Interrupts, rows map[int]*kernel.InterruptLine) {
	if !kfs.HasSysIRQ() {
		h.unavailable("irq details from /sys/kernel/irq", "/"+kernel.SysIRQDir,
			errors.New("not present (kernel without CONFIG_SPARSE_IRQ, before 4.17, or not captured); using /proc/interrupts alone"))
		return
	}
	// per_cpu_count has one value per possible CPU, in cpu_possible_mask order.
	possible := h.Topology.Possible
	if possible.IsEmpty() {
		possible, _ = kfs.PossibleCPUs()
	}
	possibleCPUs := possible.CPUs()
	for i := range h.IRQs {
		q := &h.IRQs[i]
		dir := "/" + kernel.SysIRQPath(q.Number)
		s, err := kfs.ReadSysIRQ(q.Number)
		if err != nil {
			h.unavailable(fmt.Sprintf("irq %d details", q.Number), dir, err)
			continue
		}
		for name, err := range s.Missing {
			h.unavailable(fmt.Sprintf("irq %d %s", q.Number, name), dir+"/"+name, err)
		}
		if d := s.CrossCheck(rows[q.Number]); d != nil {
			h.unavailable(fmt.Sprintf("irq %d cross-check", q.Number), dir,
				fmt.Errorf("/sys/kernel/irq and /proc/interrupts disagree (using sysfs): %s", strings.Join(d, "; ")))
		}
		if s.ChipName != "" {
			q.Chip = s.ChipName
		}
		if s.HWIRQ != "" {
			q.HWIRQ = s.HWIRQ
		}
		if q.Trigger == "" {
			q.Trigger = s.Trigger()
		}
		if _, missing := s.Missing["actions"]; !missing && len(s.Actions) > 0 {
			q.Actions = s.Actions
		}
		if s.PerCPUCount == nil {
			continue
		}
		if len(possibleCPUs) != len(s.PerCPUCount) {
			h.unavailable(fmt.Sprintf("irq %d per-CPU counts", q.Number), dir+"/per_cpu_count",
				fmt.Errorf("%d counts for %d possible CPUs (%v); using /proc/interrupts", len(s.PerCPUCount), len(possibleCPUs), possible))
			continue
		}
		// Keep the CPUs /proc/interrupts shows (the online ones), read later.
		for k, cpu := range possibleCPUs {
			if _, online := q.Counts[cpu]; online {
				q.Counts[cpu] = s.PerCPUCount[k]
			}
		}
	}
}

// readPlacement reads /proc/irq/N/{smp_affinity_list,effective_affinity_list,node}.
func readPlacement(kfs *kernel.FS, h *Host) {
	if !kfs.HasProcIRQ() {
		h.unavailable("irq affinity, effective affinity and node", "/"+kernel.ProcIRQDir, fs.ErrNotExist)
		return
	}
	for i := range h.IRQs {
		q := &h.IRQs[i]
		if a, err := kfs.ReadIRQAffinity(q.Number); err == nil {
			q.Affinity = &a
		} else {
			h.unavailable(fmt.Sprintf("irq %d affinity", q.Number), "/"+kernel.IRQAffinityListPath(q.Number), err)
		}
		if e, err := kfs.ReadIRQEffectiveAffinity(q.Number); err == nil {
			q.EffectiveAffinity = &e
		} else {
			h.unavailable(fmt.Sprintf("irq %d effective affinity", q.Number), "/"+kernel.IRQEffectiveAffinityListPath(q.Number), err)
		}
		if n, err := kfs.ReadIRQNode(q.Number); err == nil {
			q.Node = &n
		} else {
			h.unavailable(fmt.Sprintf("irq %d node", q.Number), "/"+kernel.IRQNodePath(q.Number), err)
		}
	}
}

// probeManaged finds kernel-managed IRQs on the live machine the way the
// kernel defines them: it refuses a write of the IRQ's own affinity
// (irq_can_set_affinity_usr fails: EIO before 6.x, EPERM after). The value
// written is the one just read, so allowed CPUs do not change; the kernel may
// re-pick the effective CPU within them (as it does for irqbalance's writes),
// which is why effective affinity is read again after a successful write.
func probeManaged(kfs *kernel.FS, h *Host) { probeManagedOf(kfs, h, nil) }

// ProbeManaged is the probe above for the given IRQs only (apply probes
// just the IRQs its plan will change, after the plan passed validation).
// On anything but the live machine it does nothing.
func ProbeManaged(kfs *kernel.FS, h *Host, irqs []int) {
	if !kfs.IsLive() || len(irqs) == 0 {
		return
	}
	only := make(map[int]bool, len(irqs))
	for _, n := range irqs {
		only[n] = true
	}
	probeManagedOf(kfs, h, only)
}

// probeManagedOf probes the IRQs in only (every IRQ when only is nil).
func probeManagedOf(kfs *kernel.FS, h *Host, only map[int]bool) {
	// The probe writes, so it holds the machine-wide write lock: an apply
	// cannot write an IRQ between our read and our write-back.
	release, err := kfs.LockWrites(10 * time.Second)
	if err != nil {
		h.unavailable("irq managed state", kernel.WriteLockPath, fmt.Errorf("probe skipped: %w", err))
		return
	}
	defer release()
	probe := managedProbe{Managed: []int{}, Movable: []int{}}
	for i := range h.IRQs {
		q := &h.IRQs[i]
		if only != nil && !only[q.Number] {
			continue
		}
		if q.Affinity == nil || q.Affinity.IsEmpty() {
			continue // unread: reported by readPlacement
		}
		p := kernel.IRQAffinityListPath(q.Number)
		// Write back what is there now, under the lock, not what was read
		// earlier: irqbalance may have moved it since.
		cur, err := kfs.ReadIRQAffinity(q.Number)
		if err != nil || cur.IsEmpty() {
			continue
		}
		q.Affinity = &cur
		err = kfs.WriteFile(p, cur.String())
		switch {
		case err == nil:
			q.Managed = ManagedNo
			probe.Movable = append(probe.Movable, q.Number)
			if e, err := kfs.ReadIRQEffectiveAffinity(q.Number); err == nil {
				q.EffectiveAffinity = &e
			}
		case errors.Is(err, kernel.ErrManaged):
			q.Managed = ManagedYes
			probe.Managed = append(probe.Managed, q.Number)
		case errors.Is(err, kernel.ErrNotPermitted):
			h.unavailable("irq managed state", "/"+p,
				fmt.Errorf("%w; run as root to tell kernel-managed IRQs apart", err))
			return // every other write would fail the same way; save nothing
		default:
			h.unavailable(fmt.Sprintf("irq %d managed state", q.Number), "/"+p, err)
		}
	}
	if only != nil {
		return // a partial probe is no record of the host
	}
	if b, err := json.Marshal(probe); err == nil {
		kfs.SaveSynthetic(ManagedFile, b)
	}
}

// readManaged finds the managed state without writing anything: from
// debugfs where readable, then, for the IRQs it left unknown, from apply's
// record in opts.StateDir on the live machine or from a capture's synthetic
// file elsewhere. On the live machine the outcome is saved for a capture
// (which never archives debugfs), so a snapshot reads the same. IRQs no
// source knows stay unknown, which plans treat as "may be refused" (apply
// reports a refused write as skipped); only when no source knew anything is
// that recorded in h.Unavailable.
func readManaged(kfs *kernel.FS, h *Host, opts Options) {
	if len(h.IRQs) == 0 {
		return
	}
	n, debugErr := managedFromDebugfs(kfs, h)
	if errors.Is(debugErr, fs.ErrNotExist) {
		debugErr = fmt.Errorf("no /%s (debugfs)", kernel.IRQDebugDir)
	}
	if kfs.IsLive() {
		m, recErr := managedFromRecord(kfs, h, opts.StateDir)
		saved := savedManaged{managedProbe: knownManaged(h)}
		if n+m == 0 {
			u := Unavailable{What: "irq managed state", Path: "/" + kernel.IRQDebugDir,
				Reason: fmt.Sprintf("%v; %v; managed IRQs unknown (--probe-managed finds them by writing)", debugErr, recErr)}
			h.Unavailable = append(h.Unavailable, u)
			saved.Unavailable = &u
		}
		if b, err := json.Marshal(saved); err == nil {
			kfs.SaveSynthetic(ManagedFile, b)
		}
		return
	}
	m, saved, fileErr := readManagedFile(kfs, h)
	switch {
	case n+m > 0:
	case saved != nil && saved.Unavailable != nil:
		// What the live machine said when it was captured.
		h.Unavailable = append(h.Unavailable, *saved.Unavailable)
	default:
		why := fileErr.Error()
		if debugErr != nil && !strings.HasPrefix(debugErr.Error(), "no /") {
			why = debugErr.Error() + "; " + why
		}
		h.unavailable("irq managed state", "/"+kernel.SyntheticDir+"/"+ManagedFile, fmt.Errorf("%s; managed IRQs unknown", why))
	}
}

// savedManaged is the synthetic ManagedFile: the known states and, when none
// was known, the reason the live machine gave.
type savedManaged struct {
	managedProbe
	Unavailable *Unavailable `json:"unavailable,omitempty"`
}

// readManagedFile applies a capture's synthetic file (irqpilot/managed.json)
// to the IRQs still unknown and returns how many it filled.
func readManagedFile(kfs *kernel.FS, h *Host) (int, *savedManaged, error) {
	where := "/" + kernel.SyntheticDir + "/" + ManagedFile
	b, err := kfs.ReadSynthetic(ManagedFile)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			err = errors.New("not in this snapshot (captured without debugfs, apply's record or the probe)")
		}
		return 0, nil, err
	}
	var saved savedManaged
	if err := json.Unmarshal(b, &saved); err != nil {
		return 0, nil, fmt.Errorf("%s unreadable: %w", where, err)
	}
	return applyProbe(h, saved.managedProbe), &saved, nil
}
