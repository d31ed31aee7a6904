package apply

import (
	"bytes"
	"errors"
	"fmt"
	"github.com/irqpilot/irqpilot/internal/kernel"
	"os"
	"path/filepath"
	"strings"
	"text/template"
)

// Persistence installs a plan so it is applied again at boot and whenever a
// NIC appears later (hot-plug, driver reload, a VLAN created by the network
// configuration after boot). A systemd oneshot unit applies the plan once
// the network devices exist; a udev rule re-triggers the same unit for every
// new network interface. Re-applying is idempotent, so running it again for
// each NIC writes only what is missing.
type Persistence struct {
	// FS is the live machine (the caller's kernel.New("/")) that Install
	// writes the files to, each replaced atomically and never through a
	// symlink (kernel.FS.WriteConfigFile); Root is a directory of it.
	FS *kernel.FS
	// Root prefixes every installed path (tests install into a temp dir).
	Root string
	// Binary is the absolute path of irqpilot to run at boot.
	Binary string
	// StateDir is passed to the boot-time apply so its journal joins history.
	StateDir string
	// Agent installs irqpilot-agent.service (Type=notify, watchdog, the
	// agent enforcing the plan and converging devices as they appear)
	// instead of the oneshot unit and udev rule.
	Agent bool
	// Packaged makes the units a distribution package ships (`make deb`,
	// `irqpilot persist --print-unit`): their header says how to enable
	// them rather than how `persist --remove` removes them, and they refer
	// to irqpilot(8), which the package installs.
	Packaged bool
}

// Paths of the installed files, relative to Root.
const (
	PersistPlanPath = "/etc/irqpilot/plan.yaml"
	PersistUnitPath = "/etc/systemd/system/irqpilot-apply.service"
	PersistUdevPath = "/etc/udev/rules.d/90-irqpilot.rules"
	persistWantsDir = "/etc/systemd/system/multi-user.target.wants"
	// PersistAgentUnitPath is the agent's unit (persist --agent).
	PersistAgentUnitPath = "/etc/systemd/system/irqpilot-agent.service"
)

// sandboxText is the [Service] sandbox of both units: what they write is the
// same (/proc/irq, /sys/class/net, the state directory, the write lock,
// irqbalance's configuration) and so are the capabilities they use.
const sandboxText = `UMask=0077
# Least privilege, the same for the agent and the boot-time apply (which udev
# starts as root for every new interface). Capabilities: CAP_NET_ADMIN
# writes rps_cpus, xps_cpus, rps_flow_cnt and the other /sys/class/net
# settings, ethtool coalescing and netdev netlink; CAP_SYS_NICE pins threads of other users or of processes
# holding more capabilities. /proc/irq/N/smp_affinity_list and
# /proc/sys/net/core need only uid 0. Nothing else is kept.
CapabilityBoundingSet=CAP_NET_ADMIN CAP_SYS_NICE
AmbientCapabilities=
NoNewPrivileges=yes
# Read-only system, except what irqpilot writes: its state directory, the
# machine-wide write lock in /run, irqbalance's configuration (a plan may
# ban CPUs from it). /proc and /sys stay writable: they are what it tunes,
# so ProtectKernelTunables (which makes /proc/irq and /sys read-only) is
# not set.
ProtectSystem=strict
{{if .DefaultStateDir}}StateDirectory=irqpilot
StateDirectoryMode=0700
{{end}}ReadWritePaths=-{{.StateDir}} /run -/etc/default -/etc/sysconfig
ProtectHome=yes
PrivateTmp=yes
PrivateDevices=yes
ProtectKernelModules=yes
ProtectKernelLogs=yes
ProtectControlGroups=yes
ProtectClock=yes
ProtectHostname=yes
RestrictNamespaces=yes
RestrictRealtime=yes
RestrictSUIDSGID=yes
LockPersonality=yes
MemoryDenyWriteExecute=yes
RemoveIPC=yes
RestrictAddressFamilies=AF_UNIX AF_INET AF_INET6 AF_NETLINK
SystemCallArchitectures=native
SystemCallFilter=@system-service
SystemCallErrorNumber=EPERM
`

var agentUnitTmpl = template.Must(template.New("agent").Parse(`{{if .Packaged}}# Shipped by the irqpilot package, not enabled: 'systemctl enable --now irqpilot-agent'
# once /etc/irqpilot/plan.yaml holds the plan to keep in force.
{{else}}# Installed by 'irqpilot persist --agent'; remove with 'irqpilot persist --remove'.
{{end}}[Unit]
Description=irqpilot agent: keep the interrupt plan {{.Plan}} in force
{{if .Man}}Documentation={{.Man}}
{{end}}After=systemd-udev-settle.service network-pre.target irqbalance.service
Wants=network-pre.target
ConditionPathExists={{.Plan}}

[Service]
Type=notify
NotifyAccess=main
ExecStart={{.Binary}} agent --state-dir {{.StateDir}} --plan {{.PlanArg}}
# SIGHUP reloads the plan after validating it (a bad plan is rejected and the
# old one kept).
ExecReload=/bin/kill -HUP $MAINPID
# The agent feeds the watchdog at half this period while its passes run.
WatchdogSec=60s
Restart=on-failure
RestartSec=5s
# Descriptors: the agent caps its metrics and status connections far below
# this and keeps the rest for its passes (the files it holds, journals).
LimitNOFILE=65536
` + sandboxText + `
[Install]
WantedBy=multi-user.target
`))

var unitTmpl = template.Must(template.New("unit").Parse(`{{if .Packaged}}# Shipped by the irqpilot package, not enabled: 'systemctl enable irqpilot-apply'
# applies /etc/irqpilot/plan.yaml at every boot.
{{else}}# Installed by 'irqpilot persist'; remove with 'irqpilot persist --remove'.
{{end}}[Unit]
Description=Apply the irqpilot interrupt plan {{.Plan}}
{{if .Man}}Documentation={{.Man}}
{{end}}After=systemd-udev-settle.service network-pre.target irqbalance.service
Wants=network-pre.target
ConditionPathExists={{.Plan}}

[Service]
Type=oneshot
ExecStart={{.Binary}} apply --boot --state-dir {{.StateDir}} {{.PlanArg}}
# Not RemainAfterExit: the udev rule starts this unit again for every NIC
# that appears later, which a unit that stays "active" would ignore.
RemainAfterExit=no
` + sandboxText + `
[Install]
WantedBy=multi-user.target
`))

var udevTmpl = template.Must(template.New("udev").Parse(`{{if .Packaged}}# Example shipped by the irqpilot package: copy it to /etc/udev/rules.d/ with
# irqpilot-apply.service enabled to re-apply the interrupt plan when a network
# interface appears after boot.{{else}}# Installed by 'irqpilot persist': re-apply the interrupt plan when a network
# interface appears after boot.{{end}} The plan is idempotent: only missing settings are written.
ACTION=="add", SUBSYSTEM=="net", KERNEL!="lo", TAG+="systemd", ENV{SYSTEMD_WANTS}+="irqpilot-apply.service"
`))

// Files returns the contents Install would write, by path.
func (p *Persistence) Files() (map[string][]byte, error) {
	if !filepath.IsAbs(p.Binary) {
		return nil, fmt.Errorf("irqpilot binary path %q must be absolute for a systemd unit", p.Binary)
	}
	stateDir := p.StateDir
	if stateDir == "" {
		stateDir = DefaultStateDir
	}
	if !filepath.IsAbs(stateDir) {
		return nil, fmt.Errorf("state directory %q must be absolute for a systemd unit", stateDir)
	}
	data := struct {
		Plan, PlanArg, Binary, StateDir, Man string
		Packaged, DefaultStateDir            bool
	}{Plan: PersistPlanPath, Man: InstalledManPage(p.Root), Packaged: p.Packaged, DefaultStateDir: filepath.Clean(stateDir) == DefaultStateDir}
	if p.Packaged {
		data.Man = "man:irqpilot(8)"
	}
	var err error
	for _, f := range []struct {
		dst *string
		v   string
	}{{&data.PlanArg, PersistPlanPath}, {&data.Binary, p.Binary}, {&data.StateDir, stateDir}} {
		if *f.dst, err = systemdQuote(f.v); err != nil {
			return nil, err
		}
	}
	var unit, rule bytes.Buffer
	if p.Agent {
		if err := agentUnitTmpl.Execute(&unit, data); err != nil {
			return nil, err
		}
		return map[string][]byte{PersistAgentUnitPath: unit.Bytes()}, nil
	}
	if err := unitTmpl.Execute(&unit, data); err != nil {
		return nil, err
	}
	if err := udevTmpl.Execute(&rule, data); err != nil {
		return nil, err
	}
	return map[string][]byte{PersistUnitPath: unit.Bytes(), PersistUdevPath: rule.Bytes()}, nil
}

// Install copies the plan to /etc/irqpilot/plan.yaml, writes the unit and the
// udev rule, and enables the unit (a symlink in multi-user.target.wants, what
// `systemctl enable` makes). It returns the paths written.
func (p *Persistence) Install(plan []byte) ([]string, error) {
	files, err := p.Files()
	if err != nil {
		return nil, err
	}
	if p.FS == nil {
		return nil, errors.New("persist: no machine to install on (Persistence.FS)")
	}
	files[PersistPlanPath] = plan
	var written []string
	paths, unitPath := []string{PersistPlanPath, PersistUnitPath, PersistUdevPath}, PersistUnitPath
	if p.Agent {
		paths, unitPath = []string{PersistPlanPath, PersistAgentUnitPath}, PersistAgentUnitPath
	}
	for _, rel := range paths {
		full := filepath.Join(p.Root, rel)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			return written, err
		}
		if err := writeAtomic(p.FS, full, files[rel]); err != nil {
			return written, err
		}
		written = append(written, full)
	}
	wants := filepath.Join(p.Root, persistWantsDir)
	if err := os.MkdirAll(wants, 0o755); err != nil {
		return written, err
	}
	link := filepath.Join(wants, filepath.Base(unitPath))
	os.Remove(link)
	if err := os.Symlink(unitPath, link); err != nil {
		return written, err
	}
	return append(written, link), nil
}

// Remove deletes what Install wrote; missing files are fine.
func (p *Persistence) Remove() ([]string, error) {
	var removed []string
	var errs []error
	for _, rel := range []string{
		filepath.Join(persistWantsDir, filepath.Base(PersistUnitPath)),
		filepath.Join(persistWantsDir, filepath.Base(PersistAgentUnitPath)),
		PersistUnitPath, PersistUdevPath, PersistAgentUnitPath, PersistPlanPath,
	} {
		full := filepath.Join(p.Root, rel)
		err := os.Remove(full)
		switch {
		case err == nil:
			removed = append(removed, full)
		case !errors.Is(err, os.ErrNotExist):
			errs = append(errs, err)
		}
	}
	os.Remove(filepath.Join(p.Root, filepath.Dir(PersistPlanPath))) // only if empty
	return removed, errors.Join(errs...)
}

// systemdQuote quotes one ExecStart argument for a unit file: double quotes
// with \ and " escaped, and % and $ doubled so systemd expands neither.
// Control characters (a newline would start a new unit line) are refused.
func systemdQuote(s string) (string, error) {
	for _, r := range s {
		if r < 0x20 || r == 0x7f {
			return "", fmt.Errorf("path %q has a control character; refusing to write it into a systemd unit", s)
		}
	}
	r := strings.NewReplacer(`\`, `\\`, `"`, `\"`, "%", "%%", "$", "$$")
	return `"` + r.Replace(s) + `"`, nil
}

// writeAtomic replaces path on fs's machine with data: a new file created
// exclusively in the same directory (never through a symlink), fsynced,
// renamed over it.
func writeAtomic(fs *kernel.FS, path string, data []byte) error {
	s := string(data)
	return fs.WriteConfigFile(path, kernel.FileState{Data: &s, Mode: 0o644, UID: -1, GID: -1})
}

// ManDirs are where an installed irqpilot(8) page is looked for.
var ManDirs = []string{"/usr/local/share/man/man8", "/usr/share/man/man8"}

// InstalledManPage is the unit's Documentation= reference to irqpilot(8)
// when that page is installed below root (`make install-man`), else "": a
// unit must not point at a manual page that does not exist.
func InstalledManPage(root string) string {
	for _, d := range ManDirs {
		for _, ext := range []string{"", ".gz"} {
			if _, err := os.Stat(filepath.Join(root, d, "irqpilot.8"+ext)); err == nil {
				return "man:irqpilot(8)"
			}
		}
	}
	return ""
}
