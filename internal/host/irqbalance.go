package host

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/irqpilot/irqpilot/internal/cpuset"
	"github.com/irqpilot/irqpilot/internal/kernel"
)

// irqbalanceFile is the synthetic file in a capture that holds what the
// process scan found: the PID and the two ban variables, nothing else.
const irqbalanceFile = "irqbalance.json"

// The variables irqbalance reads to ban CPUs. CPULIST is the newer form and
// wins when both are set.
const (
	envBannedList = "IRQBALANCE_BANNED_CPULIST"
	envBannedMask = "IRQBALANCE_BANNED_CPUS"
)

// irqbalanceConfigFiles are where distributions keep irqbalance's
// environment file (Debian/Ubuntu, then RHEL/SUSE).
var irqbalanceConfigFiles = []string{"etc/default/irqbalance", "etc/sysconfig/irqbalance"}

// irqbalanceProc is what the process scan found.
type irqbalanceProc struct {
	Running bool              `json:"running"`
	PID     int               `json:"pid,omitempty"`
	Env     map[string]string `json:"env,omitempty"` // only envBannedList / envBannedMask
	EnvErr  string            `json:"env_error,omitempty"`
}

// readIrqbalance finds a running irqbalance and the CPUs it bans, from its
// environment (which wins) or its configuration file.
//
// The process scan reads /proc/*/comm and /proc/PID/environ through the
// FS's unrecorded process reads (kernel.FS.Processes, Environ) on purpose: a
// capture must not archive the machine's process list or the daemon's whole
// environment. Only the PID and the two ban variables are kept, as a
// synthetic file.
// ReadIrqbalance is the irqbalance part of Read alone: whether the daemon
// runs, its PID and the CPUs it is banned from (the agent asks on drift,
// where a whole host read would be wasted).
func ReadIrqbalance(kfs *kernel.FS) Irqbalance {
	var h Host
	readIrqbalance(kfs, &h)
	return h.Irqbalance
}

func readIrqbalance(kfs *kernel.FS, h *Host) {
	h.Irqbalance = Irqbalance{BannedCPUs: cpuset.Set{}}
	var p irqbalanceProc
	if b, err := kfs.ReadSynthetic(irqbalanceFile); !kfs.IsLive() && err == nil {
		if err := json.Unmarshal(b, &p); err != nil {
			h.unavailable("irqbalance", "/"+kernel.SyntheticDir+"/"+irqbalanceFile, err)
		}
	} else {
		p = scanIrqbalance(kfs)
		if b, err := json.Marshal(p); err == nil {
			kfs.SaveSynthetic(irqbalanceFile, b)
		}
	}
	h.Irqbalance.Running, h.Irqbalance.PID = p.Running, p.PID
	if p.EnvErr != "" {
		h.unavailable("irqbalance environment", fmt.Sprintf("/proc/%d/environ", p.PID), fmt.Errorf("%s", p.EnvErr))
	}

	var file map[string]string
	for _, c := range irqbalanceConfigFiles {
		b, err := kfs.ReadFile(c)
		if err != nil {
			continue
		}
		h.Irqbalance.ConfigFile = "/" + c
		file = parseEnvFile(b)
		break
	}
	for _, src := range []struct {
		vars  map[string]string
		where string
	}{{p.Env, fmt.Sprintf("/proc/%d/environ", p.PID)}, {file, h.Irqbalance.ConfigFile}} {
		set, found, err := bannedFrom(src.vars)
		if err != nil {
			h.unavailable("irqbalance banned cpus", src.where, err)
			continue
		}
		if found {
			h.Irqbalance.BannedCPUs = set
			break
		}
	}
}

// bannedFrom reads the ban variables; found is false when neither is set
// to a non-empty value.
func bannedFrom(vars map[string]string) (cpuset.Set, bool, error) {
	if v := strings.TrimSpace(vars[envBannedList]); v != "" {
		s, err := cpuset.Parse(v)
		if err != nil {
			return cpuset.Set{}, false, fmt.Errorf("%s=%q: %v", envBannedList, v, err)
		}
		return s, true, nil
	}
	if v := strings.TrimSpace(vars[envBannedMask]); v != "" {
		s, err := cpuset.ParseMask(strings.TrimPrefix(strings.TrimPrefix(v, "0x"), "0X"))
		if err != nil {
			return cpuset.Set{}, false, fmt.Errorf("%s=%q: %v", envBannedMask, v, err)
		}
		return s, true, nil
	}
	return cpuset.Set{}, false, nil
}

// scanIrqbalance looks for the irqbalance daemon (kernel.FS.Daemon: the
// lowest PID if several, root's own on the live machine) and keeps the ban
// variables of its environment.
// kernel.FS.Processes and Environ do not record what they read.
func scanIrqbalance(kfs *kernel.FS) irqbalanceProc {
	var p irqbalanceProc
	pr, ok := kfs.Daemon("irqbalance")
	if !ok {
		return p
	}
	p.Running, p.PID = true, pr.PID
	env, err := kfs.Environ(p.PID)
	if err != nil {
		p.EnvErr = err.Error()
		return p
	}
	for _, kv := range env {
		k, v, ok := strings.Cut(kv, "=")
		if ok && (k == envBannedList || k == envBannedMask) {
			if p.Env == nil {
				p.Env = map[string]string{}
			}
			p.Env[k] = v
		}
	}
	return p
}

// parseEnvFile reads a shell-style KEY=VALUE file as systemd's
// EnvironmentFile= does for the simple cases these files use: comments,
// blank lines, optional "export", single or double quotes. Only the ban
// variables are kept.
func parseEnvFile(b []byte) map[string]string {
	out := map[string]string{}
	for _, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || line[0] == '#' || line[0] == ';' {
			continue
		}
		line = strings.TrimPrefix(line, "export ")
		k, v, ok := strings.Cut(line, "=")
		k = strings.TrimSpace(k)
		if !ok || (k != envBannedList && k != envBannedMask) {
			continue
		}
		v = strings.TrimSpace(v)
		if len(v) >= 2 && (v[0] == '"' || v[0] == '\'') {
			// A quoted value, possibly followed by a comment: `"3" # old`.
			if end := strings.IndexByte(v[1:], v[0]); end >= 0 {
				v = v[1 : 1+end]
			}
		} else if i := strings.Index(v, " #"); i >= 0 {
			v = strings.TrimSpace(v[:i])
		}
		out[k] = v
	}
	return out
}

// IrqbalanceConfigFiles are the files, relative to the root, where
// distributions keep irqbalance's environment (Debian's first).
func IrqbalanceConfigFiles() []string { return append([]string(nil), irqbalanceConfigFiles...) }

// BannedInConfig reads the CPUs an irqbalance configuration file bans
// (IRQBALANCE_BANNED_CPULIST, else IRQBALANCE_BANNED_CPUS), the way
// readIrqbalance does; found is false when the file sets neither.
func BannedInConfig(b []byte) (set cpuset.Set, found bool, err error) {
	return bannedFrom(parseEnvFile(b))
}
