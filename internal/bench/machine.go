package bench

// What bench changes on the machine and how it proves it restored it:
// changes applied through package apply (on the live machine and in the
// testbed's namespace), irqbalance's one-shot placement turned into a
// journal, and the state of every file a setting kind may write.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"

	"github.com/irqpilot/irqpilot/internal/apply"
	"github.com/irqpilot/irqpilot/internal/bench/workload"
	"github.com/irqpilot/irqpilot/internal/cpuset"
	"github.com/irqpilot/irqpilot/internal/kernel"
	"github.com/irqpilot/irqpilot/internal/program"
	"github.com/irqpilot/irqpilot/internal/setting"
)

// applySetup applies a setup's changes, each where it is seen: the testbed
// device's queue files and NAPI instances in its namespace, the rest on the
// live machine. The returned function reverts both.
func (r *Runner) applySetup(config string, s *Setup, app workload.AppInfo) (func() error, error) {
	var liveCh, nsCh []setting.Change
	for _, c := range s.Changes {
		if inTestbedNS(&c, app.Device) {
			nsCh = append(nsCh, c)
		} else {
			liveCh = append(liveCh, c)
		}
	}
	return r.apply(config, liveCh, nsCh)
}

// apply writes the live and namespace changes; the returned function reverts
// both.
func (r *Runner) apply(config string, liveCh, nsCh []setting.Change) (func() error, error) {
	meta := apply.Meta{Host: r.h.Hostname, PlanFile: "bench:" + config}
	var undo []func() error
	revertAll := func() error {
		var errs []error
		for i := len(undo) - 1; i >= 0; i-- {
			errs = append(errs, undo[i]())
		}
		return errors.Join(errs...)
	}
	for _, step := range []struct {
		a  *apply.Applier
		ch []setting.Change
	}{{r.live, liveCh}, {r.ns, nsCh}} {
		if len(step.ch) == 0 {
			continue
		}
		if step.a == nil {
			return revertAll, fmt.Errorf("%s: changes for the testbed device but no testbed", config)
		}
		res, err := step.a.Apply(step.ch, meta)
		if err != nil {
			return nil, errors.Join(fmt.Errorf("%s: apply: %w", config, err), revertAll())
		}
		if res.Journal != nil {
			a, id := step.a, res.Journal.ID
			undo = append(undo, func() error {
				if _, err := a.Revert(id, false); err != nil {
					return fmt.Errorf("%s: revert journal %s: %w", config, id, err)
				}
				return nil
			})
		}
	}
	return revertAll, nil
}

// irqbalance runs `irqbalance --oneshot`, then turns what it wrote into a
// journaled apply: the old affinities are written back (plain writes, read
// back), the placement of the IRQs under test is applied through package
// apply, and the returned function reverts that journal — so a killed bench
// leaves a journal `irqpilot revert` undoes.
func (r *Runner) irqbalance() (func() error, error) {
	before, err := irqAffinities(r.FS)
	if err != nil {
		return nil, err
	}
	// Only the devices under test are irqbalance's to place: every other
	// IRQ is banned (eth0's above all).
	args := []string{"--oneshot"}
	for _, n := range r.scope.ForeignIRQs(r.h) {
		args = append(args, "--banirq="+strconv.Itoa(n))
	}
	out, err := r.FS.Programs().Command(context.Background(), "irqbalance", args...).CombinedOutput()
	after, aerr := irqAffinities(r.FS)
	if aerr != nil {
		return nil, aerr
	}
	var back, its, foreign []setting.Change
	for irq, v := range after {
		old, known := before[irq]
		if known && !old.Equal(v) {
			back = append(back, setting.IRQAffinity(irq, fmt.Sprintf("irq %d", irq), old, "undo irqbalance --oneshot"))
			ch := setting.IRQAffinity(irq, fmt.Sprintf("irq %d", irq), v, "irqbalance --oneshot")
			if r.scope.hasIRQ(irq) {
				its = append(its, ch)
			} else {
				foreign = append(foreign, ch)
			}
		}
	}
	if len(foreign) > 0 {
		_, dropped := r.scope.Restrict(foreign)
		if r.Dropped == nil {
			r.Dropped = map[string][]string{}
		}
		r.Dropped["irqbalance"] = append(r.Dropped["irqbalance"], dropped...)
		r.progress("irqbalance --oneshot moved %d banned IRQs; written back", len(foreign))
	}
	// Put back what irqbalance moved with plain writes, each read back: this
	// restores the state from before the run, so it must not leave a journal
	// whose "old" values are irqbalance's placement (a later `irqpilot
	// revert` would re-apply that, eth0's IRQs included). What the run keeps
	// is applied through a journal below.
	var berrs []error
	for _, c := range back {
		h, err := setting.Lookup(c.Kind)
		if err == nil {
			err = h.Write(&r.live.Env, &c, c.Value)
		}
		if err != nil {
			berrs = append(berrs, fmt.Errorf("%s: %w", c.Target, err))
		} else if got, err := h.Read(&r.live.Env, &c); err != nil || got != c.Value {
			berrs = append(berrs, fmt.Errorf("%s: read back %q after writing %q (%v)", c.Target, got, c.Value, err))
		}
	}
	if err := errors.Join(berrs...); err != nil {
		return nil, fmt.Errorf("restore after irqbalance: %w", err)
	}
	if err != nil {
		return nil, fmt.Errorf("irqbalance --oneshot: %v: %s", err, program.Tail(out, 300))
	}
	r.progress("irqbalance --oneshot moved %d IRQs", len(its))
	if len(its) == 0 {
		return func() error { return nil }, nil
	}
	res, err := r.live.Apply(its, apply.Meta{PlanFile: "bench:irqbalance"})
	if err != nil {
		return nil, err
	}
	if res.Journal == nil {
		return func() error { return nil }, nil
	}
	id := res.Journal.ID
	return func() error { _, err := r.live.Revert(id, false); return err }, nil
}

// irqAffinities reads every IRQ's affinity.
func irqAffinities(fs *kernel.FS) (map[int]cpuset.Set, error) {
	irqs, err := fs.ProcIRQs()
	if err != nil {
		return nil, err
	}
	out := map[int]cpuset.Set{}
	for _, irq := range irqs {
		if s, err := fs.ReadIRQAffinity(irq); err == nil {
			out[irq] = s
		}
	}
	return out, nil
}

// MachineState is every placement and steering value bench may change, by
// file, to prove the machine is restored: every file of every kind of
// setting in the registry (IRQ affinities, queue steering, flow tables).
type MachineState map[string]string

// ReadMachineState reads the state of fs's machine.
func ReadMachineState(fs *kernel.FS) (MachineState, error) {
	files, err := setting.ReadStateFiles(fs)
	if err != nil {
		return nil, err
	}
	st := MachineState(files)
	if len(st) == 0 {
		return nil, fmt.Errorf("no IRQ or queue settings readable")
	}
	return st, nil
}

// Diff lists the files whose values differ between two states.
func (a MachineState) Diff(b MachineState) []string {
	var out []string
	for k, v := range a {
		if w, ok := b[k]; !ok {
			out = append(out, k+": gone (was "+v+")")
		} else if w != v {
			out = append(out, fmt.Sprintf("%s: %s → %s", k, v, w))
		}
	}
	for k, w := range b {
		if _, ok := a[k]; !ok {
			out = append(out, k+": new ("+w+")")
		}
	}
	sort.Strings(out)
	return out
}

// secureStateDir creates the bench's state directory under the state
// directory's rules (apply.SecureStateDir: 0700, owned by root, writable by
// no one else), and a missing parent as a state directory too: the default,
// /var/lib/irqpilot/bench, would otherwise create /var/lib/irqpilot 0755.
func secureStateDir(dir string) error {
	if parent := filepath.Dir(dir); parent != dir {
		if _, err := os.Lstat(parent); errors.Is(err, os.ErrNotExist) {
			if err := apply.SecureStateDir(parent); err != nil {
				return err
			}
		}
	}
	return apply.SecureStateDir(dir)
}
