package setting

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/irqpilot/irqpilot/internal/cpuset"
	"github.com/irqpilot/irqpilot/internal/host"
	"github.com/irqpilot/irqpilot/internal/kernel"
)

// irqbalance: the daemon, "running" or "stopped". Stopping goes through the
// service manager when it manages the daemon, then by PID for a daemon
// started outside it; apply reads the state back right after.
type irqbalanceState struct{}

const irqbalanceUnit = "irqbalance.service"

func (irqbalanceState) Kind() Kind                { return KindIrqbalance }
func (irqbalanceState) Key(*Change) string        { return "irqbalance" }
func (irqbalanceState) Expected(c *Change) string { return c.Value }
func (irqbalanceState) Scope(*Change) Scope       { return Scope{IRQ: -1, MachineWide: true} }
func (irqbalanceState) Same(a, b string) (bool, error) {
	return strings.TrimSpace(a) == strings.TrimSpace(b), nil
}

func (irqbalanceState) Check(c *Change) error {
	if c.Path != "" {
		return fmt.Errorf("%s: the irqbalance daemon setting has no file (path %q)", c.Target, c.Path)
	}
	if c.Value == "running" || c.Value == "stopped" {
		return nil
	}
	if b, ok := strings.CutPrefix(c.Value, "banned_cpus="); ok { // plan level, expanded to irqbalance-ban
		if _, err := sameCPUList(b, b); err != nil {
			return fmt.Errorf("%s: irqbalance banned_cpus %.40q: %w", c.Target, b, err)
		}
		return nil
	}
	return fmt.Errorf("%s: irqbalance state %q is not running or stopped", c.Target, c.Value)
}

// IrqbalancePID is the PID of the running irqbalance daemon (root's, see
// kernel.FS.Daemon), 0 if none.
func IrqbalancePID(fs *kernel.FS) int {
	if p, ok := fs.Daemon("irqbalance"); ok {
		return p.PID
	}
	return 0
}

func (irqbalanceState) Read(env *Env, c *Change) (string, error) {
	if IrqbalancePID(env.FS) != 0 {
		return "running", nil
	}
	return "stopped", nil
}

func (irqbalanceState) Write(env *Env, c *Change, value string) error {
	if !env.FS.IsLive() {
		return fmt.Errorf("irqbalance: %w on a snapshot", kernel.ErrUnsupported)
	}
	svc := env.services()
	if value == "running" {
		return svc.Start(irqbalanceUnit)
	}
	// The service manager's stop succeeds even when the daemon was started
	// outside it and keeps running, so check the process afterwards, ask it
	// to stop by its PID, and wait until it is gone.
	_ = svc.Stop(irqbalanceUnit)
	deadline := time.Now().Add(5 * time.Second)
	for {
		pid := IrqbalancePID(env.FS)
		if pid == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("irqbalance (pid %d) still runs 5 s after SIGTERM", pid)
		}
		_ = env.FS.Signal(pid, syscall.SIGTERM)
		time.Sleep(100 * time.Millisecond)
	}
}

func (s irqbalanceState) Restore(env *Env, c *Change) error { return s.Write(env, c, c.Old) }

// irqbalanceBan: IRQBALANCE_BANNED_CPULIST in irqbalance's configuration
// file, a cpulist ("" = unset). The whole file, its mode and owner are
// journaled and put back byte for byte (or the file removed if apply created
// it). Path must be one of irqbalance's configuration files: a journal that
// names another file is refused.
type irqbalanceBan struct{}

const banVar = "IRQBALANCE_BANNED_CPULIST"

func (irqbalanceBan) Kind() Kind                     { return KindIrqbalanceBan }
func (irqbalanceBan) Key(c *Change) string           { return "path:" + c.Path }
func (irqbalanceBan) Expected(c *Change) string      { return c.Value }
func (irqbalanceBan) Scope(*Change) Scope            { return Scope{IRQ: -1, MachineWide: true} }
func (irqbalanceBan) Same(a, b string) (bool, error) { return sameCPUList(a, b) }

func (irqbalanceBan) Check(c *Change) error {
	if !slices.Contains(host.IrqbalanceConfigFiles(), c.Path) {
		return fmt.Errorf("%s: %q is not an irqbalance configuration file (%s)", c.Target, c.Path, strings.Join(host.IrqbalanceConfigFiles(), ", "))
	}
	if _, err := sameCPUList(c.Value, c.Value); err != nil {
		return fmt.Errorf("%s: value %q: %w", c.Target, c.Value, err)
	}
	if c.OldMode&^0o777 != 0 {
		return fmt.Errorf("%s: old file mode %o has bits other than permissions", c.Target, c.OldMode)
	}
	if c.Old != "" {
		if _, err := sameCPUList(c.Old, c.Old); err != nil {
			return fmt.Errorf("%s: old value %q: %w", c.Target, c.Old, err)
		}
	}
	return nil
}

func (irqbalanceBan) Read(env *Env, c *Change) (string, error) {
	st, err := env.FS.ConfigFile(c.Path)
	if err != nil {
		return "", err
	}
	if st.Data == nil {
		return "", nil
	}
	set, _, err := host.BannedInConfig([]byte(*st.Data))
	if err != nil {
		return "", fmt.Errorf("%s: %w", c.Path, err)
	}
	return set.String(), nil
}

func (irqbalanceBan) Keep(env *Env, c *Change) error {
	st, err := env.FS.ConfigFile(c.Path)
	if err != nil {
		return err
	}
	c.OldFile = st.Data
	if st.Data != nil {
		c.OldMode = uint32(st.Mode)
		uid, gid := st.UID, st.GID
		c.OldUID, c.OldGID = &uid, &gid
	}
	return nil
}

// Write sets (or, for "", removes) the ban variable, keeping every other
// line, mode and owner of the file, then restarts a running irqbalance so it
// reads it (what cri-o does).
func (irqbalanceBan) Write(env *Env, c *Change, value string) error {
	st, err := env.FS.ConfigFile(c.Path)
	if err != nil {
		return err
	}
	data := ""
	if st.Data != nil {
		data = *st.Data
	}
	text := withBan(data, value)
	st.Data = &text
	if err := os.MkdirAll(env.FS.Path(dirOf(c.Path)), 0o755); err != nil {
		return err
	}
	if err := env.FS.WriteConfigFile(c.Path, st); err != nil {
		return err
	}
	restartIrqbalance(env)
	return nil
}

// banComment marks the line Write adds above a ban variable it appends.
const banComment = "# Set by irqpilot (revert with 'irqpilot revert')."

// withBan is data with the ban variable set to value (removed for ""),
// every other line kept: the first assignment is replaced in place, further
// ones dropped, and without one the assignment is appended under
// banComment.
func withBan(data, value string) string {
	var out []string
	done := false
	for _, l := range strings.Split(strings.TrimRight(data, "\n"), "\n") {
		if value == "" && strings.TrimSpace(l) == banComment {
			continue // irqpilot's note goes with the variable it marked
		}
		if setsBanVar(l) {
			if value != "" && !done {
				out = append(out, fmt.Sprintf("%s=%q", banVar, value))
				done = true
			}
			continue
		}
		if l != "" || len(out) > 0 {
			out = append(out, l)
		}
	}
	if value != "" && !done {
		out = append(out, banComment, fmt.Sprintf("%s=%q", banVar, value))
	}
	if len(out) == 0 {
		return ""
	}
	return strings.Join(out, "\n") + "\n"
}

// withoutBan is data without the ban variable and the comment Write adds:
// the part of the file that is the administrator's, not irqpilot's.
func withoutBan(data string) string {
	var out []string
	for _, l := range strings.Split(data, "\n") {
		if !setsBanVar(l) && strings.TrimSpace(l) != banComment && strings.TrimSpace(l) != "" {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// setsBanVar reports whether a line of the file sets the ban variable the
// way host.BannedInConfig reads it ("export VAR=", spaces around "=").
func setsBanVar(l string) bool {
	l = strings.TrimSpace(l)
	if strings.HasPrefix(l, "#") || strings.HasPrefix(l, ";") {
		return false
	}
	k, _, ok := strings.Cut(strings.TrimPrefix(l, "export "), "=")
	return ok && strings.TrimSpace(k) == banVar
}

// Restore puts the file back as journaled — the exact old bytes with their
// mode and owner, or no file when it did not exist — when nothing but the
// ban variable changed since. When the administrator edited other lines
// after the apply, only the ban variable goes back to its old value and
// their edits stay: revert undoes irqpilot's change, not theirs.
func (irqbalanceBan) Restore(env *Env, c *Change) error {
	old := ""
	if c.OldFile != nil {
		old = *c.OldFile
	}
	// A file that cannot be read as a plain file (a symlink planted since)
	// is replaced by the journaled one below, never followed.
	if cur, err := env.FS.ConfigFile(c.Path); err == nil && cur.Data != nil && withoutBan(*cur.Data) != withoutBan(old) {
		// The old file's own ban variable only: were its ban the older
		// IRQBALANCE_BANNED_CPUS mask, writing it back as a CPULIST would
		// add a line that never existed and overrides the mask.
		oldBan := ""
		var banLines []string
		for _, l := range strings.Split(old, "\n") {
			if setsBanVar(l) {
				banLines = append(banLines, l)
			}
		}
		if len(banLines) > 0 {
			set, _, err := host.BannedInConfig([]byte(strings.Join(banLines, "\n")))
			if err != nil {
				return fmt.Errorf("%s: journaled old file: %w", c.Path, err)
			}
			oldBan = set.String()
		}
		text := withBan(*cur.Data, oldBan)
		cur.Data = &text
		if err := env.FS.WriteConfigFile(c.Path, cur); err != nil {
			return err
		}
		restartIrqbalance(env)
		return nil
	}
	st := kernel.FileState{Data: c.OldFile, Mode: os.FileMode(c.OldMode), UID: -1, GID: -1}
	if c.OldUID != nil && c.OldGID != nil {
		st.UID, st.GID = *c.OldUID, *c.OldGID
	}
	if err := env.FS.WriteConfigFile(c.Path, st); err != nil {
		return err
	}
	restartIrqbalance(env)
	return nil
}

func restartIrqbalance(env *Env) {
	if env.FS.IsLive() && IrqbalancePID(env.FS) != 0 {
		_ = env.services().TryRestart(irqbalanceUnit)
	}
}

func dirOf(p string) string {
	if i := strings.LastIndexByte(p, '/'); i >= 0 {
		return p[:i]
	}
	return "."
}

// IrqbalanceBan is the change that bans cpus from irqbalance in the
// configuration file in use (the first that exists, else the first known).
func IrqbalanceBan(fs *kernel.FS, cpus cpuset.Set, reason string) Change {
	files := host.IrqbalanceConfigFiles()
	file := files[0]
	for _, f := range files {
		if fs.Exists(f) {
			file = f
			break
		}
	}
	return Change{Kind: KindIrqbalanceBan, Target: "irqbalance banned CPUs", Path: file, Value: cpus.String(), Reason: reason}
}

// CheckRecorded: the daemon's old state is running or stopped.
func (s irqbalanceState) CheckRecorded(c *Change) error {
	if err := s.Check(c); err != nil {
		return err
	}
	if c.Value != "running" && c.Value != "stopped" {
		return fmt.Errorf("%s: journaled state %q is not running or stopped", c.Target, c.Value)
	}
	if c.Old != "" && c.Old != "running" && c.Old != "stopped" {
		return fmt.Errorf("%s: old state %q is not running or stopped", c.Target, c.Old)
	}
	return nil
}

// CheckRecorded: a journaled configuration file is put back only as a file
// root alone can change: not writable by group or others, owned by root.
// Anything else in a journal was not recorded by irqpilot from a file it
// edits; restore such a file by hand.
func (b irqbalanceBan) CheckRecorded(c *Change) error {
	if err := b.Check(c); err != nil {
		return err
	}
	if c.OldFile == nil {
		return nil
	}
	if c.OldMode&0o022 != 0 {
		return fmt.Errorf("%s: journaled mode %04o of %s is writable by group or others", c.Target, c.OldMode, c.Path)
	}
	if c.OldUID != nil && *c.OldUID != 0 {
		return fmt.Errorf("%s: journaled owner uid %d of %s is not root", c.Target, *c.OldUID, c.Path)
	}
	if len(*c.OldFile) > 1<<20 {
		return fmt.Errorf("%s: journaled content of %s is over 1 MiB", c.Target, c.Path)
	}
	return nil
}
