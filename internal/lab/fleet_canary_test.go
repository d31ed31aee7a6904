package lab

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

var reVerdict = regexp.MustCompile(`IRQPILOT-VERDICT host=(\S+) verdict=(\S+) reverted=(\S+)[^"\n]*`)

// canaryLoad is the transient unit that holds each guest's process for the
// canary rollout.
const canaryLoad = "irqpilot-canary-load"

// canary is a rollout that verifies each host's change and stops at the
// first one that verifies worse (docs/fleet.md, "Canary rollouts"). Every
// guest runs a process started on CPU 1: on the first guest it spins and
// keeps CPU 1 full, on the others it sleeps. Each guest's plan moves its
// process onto CPU 0, rolled out by rolling.yml with the role's defaults
// (apply --verify, --revert-if worse) beside the plan the agent keeps: its
// own plan file and state directory, nothing persisted. On the first guest
// the move fills CPU 0, which had spare time: the change breaks the
// headroom rule, verifies worse and is reverted, the role puts the previous
// plan back (there was none) and fails the host, and the rollout stops
// there. The other guests are never touched: no journal, no plan file,
// their process still on CPU 1. Every guest's steering and agent are as
// before.
func (fx *fleetFixture) canary(t *testing.T) {
	t.Helper()
	gs := fx.f.Guests
	bad := gs[0]
	const planPath, stateDir = "/etc/irqpilot-canary/plan.yaml", "/var/lib/irqpilot-canary"
	before := map[string]guestState{}
	pids := map[string]string{}
	for _, g := range gs {
		before[g.Name] = fx.state(t, g)
		argv := "sleep 3600"
		if g == bad {
			argv = `sh -c "while :; do :; done"`
		}
		pids[g.Name] = fx.ssh(t, g, fmt.Sprintf("systemd-run --quiet --unit=%s -p CPUAffinity=1 %s && systemctl show -p MainPID --value %s", canaryLoad, argv, canaryLoad))
		if got := fx.cpusAllowed(t, g, pids[g.Name]); got != "1" {
			t.Fatalf("%s: the canary's process %s runs on CPUs %q, want 1", g.Name, pids[g.Name], got)
		}
	}
	defer func() {
		for _, g := range gs {
			if out, err := fx.trySSH(g, "systemctl stop "+canaryLoad, fleetSSHShort); err != nil {
				t.Errorf("%s: systemctl stop %s: %v: %s", g.Name, canaryLoad, err, out)
			}
		}
	}()

	dir := filepath.Join(fx.dir, "canary")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	var inv strings.Builder
	fmt.Fprintf(&inv, "%s    irqpilot_persist: none\n    irqpilot_plan_path: %s\n    irqpilot_state_dir: %s\n  children:\n    irqpilot:\n      hosts:\n",
		fx.inventoryVars(), planPath, stateDir)
	for _, g := range gs { // rolled out in this order
		planFile := filepath.Join(dir, g.Name+".yaml")
		plan := fmt.Sprintf("version: 1\napps:\n  - {pid: %s, cpus: \"0\", reason: fleet canary}\n", pids[g.Name])
		if err := os.WriteFile(planFile, []byte(plan), 0o644); err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&inv, "        %s:\n          ansible_host: %s\n          irqpilot_plan_file: %s\n", g.Name, g.Addr, planFile)
	}
	invFile := filepath.Join(dir, "hosts.yml")
	if err := os.WriteFile(invFile, []byte(inv.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	r := fx.playbookOn(t, invFile, true, "rolling.yml", "--skip-tags", "irqpilot_install")

	verdicts := map[string][]string{}
	for _, m := range reVerdict.FindAllStringSubmatch(r.out, -1) {
		verdicts[m[1]] = m
	}
	v, ok := verdicts[bad.Name]
	switch {
	case !ok:
		t.Fatalf("no IRQPILOT-VERDICT for %s\n%s", bad.Name, tail(r.out, 8000))
	case v[2] != "worse" || v[3] != "true":
		t.Errorf("%s verified %s, reverted=%s; want worse, reverted (%s)", bad.Name, v[2], v[3], v[0])
	case !r.failed[bad.Name]:
		t.Errorf("%s verified worse but the role did not fail it: the rollout went on\n%s", bad.Name, tail(r.out, 8000))
	}
	t.Logf("canary: %s", v[0])
	if got := fx.cpusAllowed(t, bad, pids[bad.Name]); got != "1" {
		t.Errorf("%s: the spinning process runs on CPUs %q after the revert, want 1", bad.Name, got)
	}
	if out := fx.ssh(t, bad, "ls "+stateDir+"/journal/*.json | wc -l; test -e "+planPath+" && echo plan; true"); strings.HasPrefix(out, "0") || strings.Contains(out, "plan") {
		t.Errorf("%s: want the journal of the reverted change and no plan file (there was none before), got %q", bad.Name, out)
	}
	for _, g := range gs[1:] {
		if _, ok := verdicts[g.Name]; ok || r.changed[g.Name] != 0 {
			t.Errorf("%s was reached after %s verified worse: verdict %v, changed %d", g.Name, bad.Name, verdicts[g.Name], r.changed[g.Name])
		}
		if out := fx.ssh(t, g, "ls "+stateDir+" 2>&1; test -e "+planPath+" && echo plan; true"); !strings.Contains(out, "No such file") || strings.Contains(out, "plan") {
			t.Errorf("%s was touched: %s or %s exists (%q)", g.Name, stateDir, planPath, out)
		}
		if got := fx.cpusAllowed(t, g, pids[g.Name]); got != "1" {
			t.Errorf("%s: its process runs on CPUs %q, want 1 (untouched)", g.Name, got)
		}
	}
	for _, g := range gs {
		if s := fx.state(t, g); s.steering != before[g.Name].steering || s.agent != before[g.Name].agent || s.plan != before[g.Name].plan {
			t.Errorf("%s: the canary rollout changed the plan the agent keeps: steering\n%s\nagent %s, plan %s; was\n%s\nagent %s, plan %s",
				g.Name, s.steering, s.agent, s.plan, before[g.Name].steering, before[g.Name].agent, before[g.Name].plan)
		}
	}
}

// cpusAllowed is a guest process's Cpus_allowed_list.
func (fx *fleetFixture) cpusAllowed(t *testing.T, g *Guest, pid string) string {
	t.Helper()
	return fx.ssh(t, g, "sed -n 's/^Cpus_allowed_list:[[:space:]]*//p' /proc/"+pid+"/status")
}
