package bpfcost

import (
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"

	"github.com/irqpilot/irqpilot/internal/cpuset"
)

// BTFPath is the kernel's own BTF, which tp_btf programs and CO-RE need.
const BTFPath = "/sys/kernel/btf/vmlinux"

// Collector is the loaded and attached programs. Close detaches and unloads
// them; nothing stays in the kernel after Close or after the process exits
// (the links are not pinned).
type Collector struct {
	objs  costObjects
	links []link.Link
	boot  int64
	ncpu  int
}

// Unavailable explains why the collector cannot run here; Open returns it
// wrapped, so callers can print one line and fall back to counts.
type Unavailable struct {
	Reason string // "not root", "no kernel BTF", …
	Err    error
}

func (u *Unavailable) Error() string {
	if u.Err == nil {
		return u.Reason
	}
	return u.Reason + ": " + u.Err.Error()
}

func (u *Unavailable) Unwrap() error { return u.Err }

// Check says, without loading anything, whether Open can work: BTF present,
// privileges, lockdown. nil does not guarantee Open succeeds.
func Check() error {
	if _, err := os.Stat(BTFPath); err != nil {
		return &Unavailable{Reason: "no kernel BTF (" + BTFPath + " missing; needs CONFIG_DEBUG_INFO_BTF)"}
	}
	if !privileged() {
		return &Unavailable{Reason: "not permitted: loading BPF programs needs root (or CAP_BPF and CAP_PERFMON)"}
	}
	if b, err := os.ReadFile("/sys/kernel/security/lockdown"); err == nil && strings.Contains(string(b), "[confidentiality]") {
		return &Unavailable{Reason: "kernel lockdown=confidentiality forbids BPF tracing"}
	}
	return nil
}

// privileged: root, or CAP_BPF (39) and CAP_PERFMON (38) effective.
func privileged() bool {
	if os.Geteuid() == 0 {
		return true
	}
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return false
	}
	has := func(c uint) bool { return data[c/32].Effective&(1<<(c%32)) != 0 }
	return has(unix.CAP_SYS_ADMIN) || (has(unix.CAP_BPF) && has(unix.CAP_PERFMON))
}

// Open loads and attaches the programs. Errors are *Unavailable.
func Open() (*Collector, error) {
	if err := Check(); err != nil {
		return nil, err
	}
	ncpu, err := ebpf.PossibleCPU()
	if err != nil {
		return nil, &Unavailable{Reason: "possible CPUs unknown", Err: err}
	}
	c := &Collector{ncpu: ncpu, boot: monotonic()}
	if err := loadCostObjects(&c.objs, nil); err != nil {
		return nil, classify("loading the BPF programs", err)
	}
	for _, p := range []*ebpf.Program{c.objs.IrqEntry, c.objs.IrqExit, c.objs.SoftirqEntry, c.objs.SoftirqExit, c.objs.NapiPoll} {
		l, err := link.AttachTracing(link.TracingOptions{Program: p, AttachType: ebpf.AttachTraceRawTp})
		if err != nil {
			c.Close()
			return nil, classify("attaching "+p.String(), err)
		}
		c.links = append(c.links, l)
	}
	return c, nil
}

func classify(what string, err error) error {
	switch {
	case errors.Is(err, os.ErrPermission) || errors.Is(err, unix.EPERM) || errors.Is(err, unix.EACCES):
		return &Unavailable{Reason: what + ": not permitted (root needed; lockdown or kernel.unprivileged_bpf_disabled?)", Err: err}
	case errors.Is(err, ebpf.ErrNotSupported):
		return &Unavailable{Reason: what + ": not supported by this kernel", Err: err}
	}
	return &Unavailable{Reason: what, Err: err}
}

// Close detaches and unloads everything.
func (c *Collector) Close() error {
	var errs []error
	for _, l := range c.links {
		errs = append(errs, l.Close())
	}
	c.links = nil
	errs = append(errs, c.objs.Close())
	return errors.Join(errs...)
}

func monotonic() int64 {
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return ts.Nano()
}

// onlineCPUs reads /sys/devices/system/cpu/online.
func onlineCPUs() ([]int, error) {
	b, err := os.ReadFile("/sys/devices/system/cpu/online")
	if err != nil {
		return nil, err
	}
	s, err := cpuset.Parse(strings.TrimSpace(string(b)))
	if err != nil {
		return nil, fmt.Errorf("/sys/devices/system/cpu/online: %w", err)
	}
	return s.CPUs(), nil
}

// Read copies the maps into a Snapshot, keeping the online CPUs' values.
func (c *Collector) Read() (*Snapshot, error) {
	online, err := onlineCPUs()
	if err != nil {
		return nil, err
	}
	cpus := online[:0:0]
	for _, id := range online {
		if id < c.ncpu {
			cpus = append(cpus, id)
		}
	}
	s := &Snapshot{Clock: monotonic(), Boot: c.boot, CPUs: cpus}
	pick := func(vals []costCost) ([]uint64, []uint64) {
		t, n := make([]uint64, len(cpus)), make([]uint64, len(cpus))
		for i, id := range cpus {
			if id < len(vals) {
				t[i], n[i] = vals[id].TimeNs, vals[id].Count
			}
		}
		return t, n
	}

	var irq uint32
	var vals []costCost
	it := c.objs.Hardirqs.Iterate()
	for it.Next(&irq, &vals) {
		t, n := pick(vals)
		s.Hardirqs = append(s.Hardirqs, Counters{ID: int(irq), TimeNs: t, Count: n})
	}
	if err := it.Err(); err != nil {
		return nil, fmt.Errorf("reading BPF map hardirqs: %w", err)
	}
	sort.Slice(s.Hardirqs, func(i, j int) bool { return s.Hardirqs[i].ID < s.Hardirqs[j].ID })

	for v := range VectorNames {
		if err := c.objs.Softirqs.Lookup(uint32(v), &vals); err != nil {
			return nil, fmt.Errorf("reading BPF map softirqs[%d]: %w", v, err)
		}
		t, n := pick(vals)
		s.Softirqs = append(s.Softirqs, Counters{ID: v, TimeNs: t, Count: n})
	}

	var key costNapiKey
	var nv []costNapiVal
	nit := c.objs.Napi.Iterate()
	for nit.Next(&key, &nv) {
		nc := NAPICounters{Dev: cString(key.Dev[:]), NAPIID: key.NapiId,
			Polls: make([]uint64, len(cpus)), Work: make([]uint64, len(cpus)), Exhausted: make([]uint64, len(cpus))}
		for i, id := range cpus {
			if id < len(nv) {
				nc.Polls[i], nc.Work[i], nc.Exhausted[i] = nv[id].Polls, nv[id].Work, nv[id].Exhausted
			}
		}
		s.NAPI = append(s.NAPI, nc)
	}
	if err := nit.Err(); err != nil {
		return nil, fmt.Errorf("reading BPF map napi: %w", err)
	}
	sort.Slice(s.NAPI, func(i, j int) bool {
		if s.NAPI[i].Dev != s.NAPI[j].Dev {
			return s.NAPI[i].Dev < s.NAPI[j].Dev
		}
		return s.NAPI[i].NAPIID < s.NAPI[j].NAPIID
	})

	var lost []uint64
	for k, dst := range []*uint64{&s.LostIRQ, &s.LostNAPI} {
		if err := c.objs.Full.Lookup(uint32(k), &lost); err != nil {
			return nil, fmt.Errorf("reading BPF map full: %w", err)
		}
		for _, v := range lost {
			*dst += v
		}
	}
	return s, nil
}

// Elapsed is how long the collector has been loaded.
func (c *Collector) Elapsed() time.Duration { return time.Duration(monotonic() - c.boot) }

func cString(b []int8) string {
	out := make([]byte, 0, len(b))
	for _, c := range b {
		if c == 0 {
			break
		}
		out = append(out, byte(c))
	}
	return string(out)
}
