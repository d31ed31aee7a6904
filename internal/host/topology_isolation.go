package host

import (
	"fmt"
	"strings"

	"github.com/irqpilot/irqpilot/internal/cpuset"
	"github.com/irqpilot/irqpilot/internal/kernel"
)

// readIsolation fills Isolated, NohzFull and ManagedIRQIsolated from sysfs,
// falling back to the kernel command line.
func readIsolation(fs *kernel.FS, h *Host) {
	t := &h.Topology
	cl, clErr := fs.Cmdline()
	var cmd bootIsolation
	if clErr == nil {
		var errs []error
		last := t.Possible.Max() // "N" in a boot cpulist: the last CPU id
		if last < 0 {
			last = t.Online.Union(t.Offline).Max()
		}
		cmd, errs = parseCmdlineIsolation(cl, last)
		for _, e := range errs {
			h.unavailable("kernel command line", "/proc/cmdline", e)
		}
	}
	t.ManagedIRQIsolated = cmd.managedIRQ

	var err error
	if t.Isolated, err = fs.CPUList(kernel.CPUsIsolated); err != nil {
		if clErr == nil {
			t.Isolated = cmd.domain
		}
		if clErr != nil || !isNotExist(err) {
			h.unavailable("isolated cpus", "/"+kernel.CPUsIsolated.Path(), relErr(fs, err))
		}
	}
	// nohz_full is absent on kernels without CONFIG_NO_HZ_FULL, where the
	// command line is also ineffective; we still report its intent.
	if t.NohzFull, err = fs.CPUList(kernel.CPUsNohzFull); err != nil {
		if clErr == nil {
			t.NohzFull = cmd.nohzFull
		}
		if clErr != nil || !isNotExist(err) {
			h.unavailable("nohz_full cpus", "/"+kernel.CPUsNohzFull.Path(), relErr(fs, err))
		}
	}
}

// bootIsolation is what the kernel command line asks for.
type bootIsolation struct {
	domain, managedIRQ, nohzFull cpuset.Set
}

// parseCmdlineIsolation reads isolcpus= and nohz_full= the way the kernel's
// housekeeping_isolcpus_setup does: leading flags "nohz,", "domain,",
// "managed_irq," select what is isolated; no flag means "domain". Arguments
// after "--" belong to init and are ignored; a later parameter overrides an
// earlier one of the same name. last is the highest CPU id, for "N".
func parseCmdlineIsolation(cmdline []kernel.CmdlineParam, last int) (bootIsolation, []error) {
	var b bootIsolation
	var errs []error
	for _, p := range cmdline {
		if !p.HasValue {
			continue
		}
		val := p.Value
		switch p.Name {
		case "isolcpus":
			var domain, managed, nohz bool
			rest := val
			for {
				flag, after, found := strings.Cut(rest, ",")
				if !found || flag == "" || !isAlpha(flag) {
					break
				}
				switch flag {
				case "domain":
					domain = true
				case "managed_irq":
					managed = true
				case "nohz":
					nohz = true
				default:
					errs = append(errs, fmt.Errorf("isolcpus=%s: unknown flag %q", val, flag))
				}
				rest = after
			}
			set, err := cpuset.ParseWithLast(rest, last)
			if err != nil {
				errs = append(errs, fmt.Errorf("isolcpus=%s: %w", val, err))
				continue
			}
			if !domain && !managed && !nohz {
				domain = true
			}
			b.domain, b.managedIRQ = cpuset.Set{}, cpuset.Set{}
			if domain {
				b.domain = set
			}
			if managed {
				b.managedIRQ = set
			}
			if nohz {
				b.nohzFull = b.nohzFull.Union(set)
			}
		case "nohz_full":
			set, err := cpuset.ParseWithLast(val, last)
			if err != nil {
				errs = append(errs, fmt.Errorf("nohz_full=%s: %w", val, err))
				continue
			}
			b.nohzFull = b.nohzFull.Union(set)
		}
	}
	return b, errs
}

func isAlpha(s string) bool {
	for _, r := range s {
		if (r < 'a' || r > 'z') && (r < 'A' || r > 'Z') && r != '_' {
			return false
		}
	}
	return true
}
