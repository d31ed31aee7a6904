package lab

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// fleetRun is one ansible-playbook run against the fleet.
type fleetRun struct {
	out     string
	changed map[string]int // PLAY RECAP's changed, by host
	failed  map[string]bool
	took    time.Duration
	// inForce are the rolling playbook's per-host reports, with the time
	// since the run's start at which each was printed.
	inForce []string
	at      []time.Duration
}

var reInForce = regexp.MustCompile(`FLEET-IN-FORCE after ([^:]+): ([^"]*)`)

// playbook runs deploy/ansible/PLAYBOOK inside the fleet's namespace over
// SSH with the test's inventory, failing the test on an unreachable or
// failed host.
func (fx *fleetFixture) playbook(t *testing.T, book string, args ...string) *fleetRun {
	t.Helper()
	return fx.playbookOn(t, filepath.Join(fx.dir, "hosts.yml"), false, book, args...)
}

// playbookOn runs PLAYBOOK with the inventory inv. With mayFail, a failed
// host (not an unreachable one) is the caller's to judge: r.failed says
// which hosts failed.
func (fx *fleetFixture) playbookOn(t *testing.T, inv string, mayFail bool, book string, args ...string) *fleetRun {
	t.Helper()
	site, err := filepath.Abs("../../deploy/ansible/" + book)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Minute)
	defer cancel()
	argv := append([]string{"ansible-playbook", "-i", inv, site}, args...)
	cmd := fx.f.Command(ctx, argv...)
	cmd.Env = append(os.Environ(),
		"ANSIBLE_NOCOLOR=1", "ANSIBLE_RETRY_FILES_ENABLED=0", "ANSIBLE_PIPELINING=1",
		"ANSIBLE_HOME="+filepath.Join(fx.dir, "ansible-home"),
		"ANSIBLE_LOCAL_TEMP="+filepath.Join(fx.dir, "ansible-local"),
		"ANSIBLE_SSH_CONTROL_PATH_DIR="+filepath.Join(fx.dir, "cp"),
		"ANSIBLE_FORKS="+strconv.Itoa(len(fx.f.Guests)),
		// TCG guests answer slowly while four boot and run Python.
		"ANSIBLE_TIMEOUT=120")
	pipe, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = cmd.Stdout
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	r := &fleetRun{changed: map[string]int{}}
	var b strings.Builder
	sc := bufio.NewScanner(pipe)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		l := sc.Text()
		b.WriteString(l + "\n")
		if m := reInForce.FindStringSubmatch(l); m != nil {
			r.inForce = append(r.inForce, m[1]+": "+m[2])
			r.at = append(r.at, time.Since(start))
		}
	}
	err = cmd.Wait()
	r.took = time.Since(start)
	r.out = b.String()
	recap := recapRE.FindAllStringSubmatch(r.out, -1)
	if (err != nil && !mayFail) || len(recap) == 0 {
		t.Fatalf("ansible-playbook %s %s: %v\n%s", book, strings.Join(args, " "), err, tail(r.out, 20000))
	}
	r.failed = map[string]bool{}
	for _, m := range recap {
		c, _ := strconv.Atoi(m[3])
		r.changed[m[1]] = c
		if mayFail && m[4] == "0" && m[5] != "0" {
			r.failed[m[1]] = true
			continue
		}
		if m[4] != "0" || m[5] != "0" {
			t.Fatalf("ansible-playbook %s %s: host %s unreachable=%s failed=%s\n%s", book, strings.Join(args, " "), m[1], m[4], m[5], tail(r.out, 20000))
		}
	}
	// A rollout stopped at a failed host names only the hosts it reached.
	if len(r.changed) != len(fx.f.Guests) && len(r.failed) == 0 {
		t.Fatalf("ansible-playbook %s: recap names %d hosts, the fleet has %d\n%s", book, len(r.changed), len(fx.f.Guests), tail(r.out, 5000))
	}
	t.Logf("ansible-playbook %s %s: changed %v in %s", book, strings.Join(args, " "), r.changed, r.took.Round(time.Second))
	return r
}

var recapRE = regexp.MustCompile(`(?m)^(\S+)\s+:\s+ok=(\d+)\s+changed=(\d+)\s+unreachable=(\d+)\s+failed=(\d+)`)

type fleetFixture struct {
	f    *Fleet
	dir  string
	key  string
	prom *Prometheus
}

// ssh runs a command as root on guest g.
func (fx *fleetFixture) ssh(t *testing.T, g *Guest, script string) string {
	t.Helper()
	out, err := fx.trySSH(g, script, 5*time.Minute)
	if err != nil {
		t.Fatalf("ssh %s %q: %v\n%s", g.Name, script, err, out)
	}
	return out
}

// trySSH runs a command as root on guest g within d.
func (fx *fleetFixture) trySSH(g *Guest, script string, d time.Duration) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	cmd := fx.f.Command(ctx, "ssh", "-i", fx.key, "-o", "BatchMode=yes", "-o", "UserKnownHostsFile="+fx.f.KnownHosts,
		"-o", "StrictHostKeyChecking=yes", "-o", fmt.Sprintf("ConnectTimeout=%d", int(min(d, time.Minute).Seconds())), FleetUser+"@"+g.Addr, "sudo sh -c "+shellQuote(script))
	out, err := cmd.CombinedOutput()
	return strings.TrimSpace(string(out)), err
}

// fleetSSHShort bounds an SSH command that should answer at once.
const fleetSSHShort = 2 * time.Minute

// inventoryVars opens an inventory: "all:", its "vars:" and how Ansible
// reaches the guests (over SSH as FleetUser with the test's key, host keys
// checked); the caller adds its own variables (four spaces in) and hosts.
func (fx *fleetFixture) inventoryVars() string {
	return fmt.Sprintf(`all:
  vars:
    ansible_user: %s
    ansible_ssh_private_key_file: %s
    ansible_ssh_common_args: "-o UserKnownHostsFile=%s -o StrictHostKeyChecking=yes -o ConnectTimeout=60"
    ansible_python_interpreter: /usr/bin/python3
`, FleetUser, fx.key, fx.f.KnownHosts)
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// state is what the test compares on a guest: eth0's steering and queue
// IRQ affinities, the agent, the package, the plan, and whether applying
// the plan would write anything.
const stateScript = `
for f in /sys/class/net/eth0/queues/rx-*/rps_cpus; do echo "RPS $f $(cat $f)"; done
for i in $(awk '/virtio[0-9]+-(input|output)\.[0-9]+$/ {sub(":","",$1); print $1}' /proc/interrupts); do echo "IRQ $i $(cat /proc/irq/$i/smp_affinity_list)"; done
echo "AGENT $(systemctl is-active irqpilot-agent.service) $(systemctl show -p MainPID --value irqpilot-agent.service)"
echo "ENABLED $(systemctl is-enabled irqpilot-agent.service 2>&1)"
echo "VERSION $(dpkg-query -W -f='${Version}' irqpilot 2>/dev/null)"
echo "PLAN $(sha256sum /etc/irqpilot/plan.yaml 2>/dev/null | cut -c1-16)"
if [ -x /usr/bin/irqpilot ] && [ -e /etc/irqpilot/plan.yaml ]; then
  echo "PENDING $(irqpilot --json apply --dry-run /etc/irqpilot/plan.yaml | grep -o '"status": *"pending"' | wc -l)"
fi
`

type guestState struct {
	steering              string // RPS and IRQ lines
	agent, enabled, plan  string
	version               string
	pending               int
	agentActive, agentPID string
}

func (fx *fleetFixture) state(t *testing.T, g *Guest) guestState {
	t.Helper()
	return parseState(fx.ssh(t, g, stateScript))
}

// tryState is state for a guest that may not answer (d: how long to try).
func (fx *fleetFixture) tryState(g *Guest, d time.Duration) (guestState, error) {
	out, err := fx.trySSH(g, stateScript, d)
	if err != nil {
		return guestState{}, fmt.Errorf("%v: %s", err, out)
	}
	return parseState(out), nil
}

func parseState(out string) guestState {
	var s guestState
	s.pending = -1
	var st []string
	for _, l := range strings.Split(out, "\n") {
		k, v, _ := strings.Cut(l, " ")
		switch k {
		case "RPS", "IRQ":
			st = append(st, l)
		case "AGENT":
			s.agent = v
			s.agentActive, s.agentPID, _ = strings.Cut(v, " ")
		case "ENABLED":
			s.enabled = v
		case "VERSION":
			s.version = v
		case "PLAN":
			s.plan = v
		case "PENDING":
			s.pending, _ = strconv.Atoi(v)
		}
	}
	s.steering = strings.Join(st, "\n")
	return s
}

// TestFleetAnsible: a fleet of systemd guests (FLEET_N, default 2: more do
// not fit in half an hour under TCG here, see docs/fleet.md) reached only
// over SSH from inside the fleet's namespace, rolled out by deploy/ansible
// with a real inventory (a user with sudo, become, host keys checked) while
// Prometheus scrapes every agent and memcached in every guest serves load:
// an agent on an empty plan is measured first; two groups with two
// policies install the .deb, plan, apply and enable the agent (metrics on
// :9477 from the role's drop-in); a second run changes nothing on any host;
// after a hand-made drift on one host (its agent stopped, a queue's RPS
// mask cleared) --check reports that host alone and writes nothing; a
// normal run repairs it; a rolling upgrade to a newer .deb (serial: 1)
// keeps every plan in force after every host and leaves every host on the
// new version with its agent restarted. Then the faults (a reboot, kill -9
// of an agent, a NIC unplugged and plugged again, Prometheus stopped for a
// minute), each waited for until the plan is in force again and timed, and
// report --prometheus draws the cluster before and after the rollout and
// names where data is missing. Last, a canary rollout stops at the guest
// whose change verifies worse (fx.canary).
func TestFleetAnsible(t *testing.T) {
	mode := os.Getenv("FLEET_LAB")
	if mode == "" {
		t.Skip("the fleet boots several systemd guests and drives them with Ansible (tens of minutes): make fleet-lab runs it (FLEET_LAB=1), make test its core (FLEET_LAB=core)")
	}
	// core: the rollout, its idempotence, drift, --check, repair, the
	// rolling upgrade, a reboot, an agent killed and the canary rollout;
	// no Prometheus, load
	// windows, NIC re-plug or report (make test runs this).
	full := mode != "core"
	needLab(t)
	for _, c := range []string{"mmdebstrap", "ansible-playbook", "ssh", "ssh-keygen", "mke2fs"} {
		if _, err := exec.LookPath(c); err != nil {
			t.Skipf("no %s (make deps installs it)", c)
		}
	}
	n := 2
	if v := os.Getenv("FLEET_N"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 2 {
			t.Fatalf("FLEET_N=%q: want a number of guests, at least 2 (two groups)", v)
		}
	}
	deb1 := buildDeb(t, "0.0.1~fleet1")
	deb2 := buildDeb(t, "0.0.1~fleet2")
	fx := startFleetFixture(t, n)
	f, dir := fx.f, fx.dir
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()

	// The inventory: odd guests spread RPS, even ones get per-queue IRQs.
	groups := map[string][]*Guest{}
	for i, g := range f.Guests {
		grp := "spread"
		if i%2 == 1 {
			grp = "perqueue"
		}
		groups[grp] = append(groups[grp], g)
	}
	var inv strings.Builder
	fmt.Fprintf(&inv, `%s    irqpilot_deb: %s
    irqpilot_persist: agent
    irqpilot_agent_listen: ":%d"
  children:
    irqpilot:
      children:
`, fx.inventoryVars(), deb1, fleetAgentPort)
	policy := map[string]string{"spread": "rps-spread", "perqueue": "per-queue"}
	for _, grp := range []string{"spread", "perqueue"} {
		fmt.Fprintf(&inv, "        %s:\n          vars:\n            irqpilot_policy: %s\n            irqpilot_plan_args: [\"--device\", \"eth0\"]\n          hosts:\n", grp, policy[grp])
		for _, g := range groups[grp] {
			fmt.Fprintf(&inv, "            %s:\n              ansible_host: %s\n", g.Name, g.Addr)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "hosts.yml"), []byte(inv.String()), 0o644); err != nil {
		t.Fatal(err)
	}

	before := map[string]guestState{}
	for _, g := range f.Guests {
		before[g.Name] = fx.state(t, g)
		if before[g.Name].version != "" {
			t.Fatalf("%s has irqpilot %s before the rollout", g.Name, before[g.Name].version)
		}
	}

	// 0: the fleet measured before the rollout: Prometheus scrapes an
	// agent on an empty plan in every guest while memcached serves load.
	window := time.Minute
	if v := os.Getenv("FLEET_WINDOW"); v != "" {
		var err error
		if window, err = time.ParseDuration(v); err != nil {
			t.Fatalf("FLEET_WINDOW=%q: %v", v, err)
		}
	}
	bin := guestIrqpilot(t)
	promStart := time.Now()
	var bFrom, bTo, aFrom, aTo time.Time
	if full {
		var err error
		if fx.prom, err = f.StartPrometheus(ctx, filepath.Join(dir, "prometheus"), fleetAgentPort, fleetScrape); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = fx.prom.Stop() })
		fx.startObservers(t, bin)
		fx.waitScraped(t, 3*time.Minute)
		bFrom, bTo = fx.loadWindow(t, "before", window)
		fx.stopObservers(t)
	}

	// 1: install, plan, apply, enable and start the agent.
	r1 := fx.playbook(t, "site.yml")
	applied := map[string]guestState{}
	for _, g := range f.Guests {
		s := fx.state(t, g)
		applied[g.Name] = s
		if r1.changed[g.Name] == 0 {
			t.Errorf("first run: %s changed=0", g.Name)
		}
		if s.version != "0.0.1~fleet1" || s.agentActive != "active" || s.enabled != "enabled" || s.pending != 0 {
			t.Errorf("%s after the first run: version %q, agent %q (%s), pending %d; want 0.0.1~fleet1, active, enabled, 0",
				g.Name, s.version, s.agent, s.enabled, s.pending)
		}
		if s.steering == before[g.Name].steering {
			t.Errorf("%s: eth0's steering did not change:\n%s", g.Name, s.steering)
		}
	}
	// Two policies, two results.
	if a, b := applied[groups["spread"][0].Name], applied[groups["perqueue"][0].Name]; a.plan == b.plan {
		t.Errorf("the two groups got the same plan (%s)", a.plan)
	}
	if t.Failed() {
		t.FailNow()
	}

	if full {
		fx.waitScraped(t, 3*time.Minute)
		aFrom, aTo = fx.loadWindow(t, "after", window)
	}

	// 2: nothing to do anywhere.
	r2 := fx.playbook(t, "site.yml")
	for _, g := range f.Guests {
		if r2.changed[g.Name] != 0 {
			t.Errorf("second run: %s changed=%d, want 0", g.Name, r2.changed[g.Name])
		}
		if s := fx.state(t, g); s.steering != applied[g.Name].steering || s.agentPID != applied[g.Name].agentPID {
			t.Errorf("second run touched %s: steering\n%s\nagent %s (was %s)", g.Name, s.steering, s.agent, applied[g.Name].agent)
		}
	}

	// 3: drift by hand on one host; --check reports it alone and writes nothing.
	drift := groups["spread"][0]
	fx.ssh(t, drift, "systemctl stop irqpilot-agent.service && echo 0 > /sys/class/net/eth0/queues/rx-0/rps_cpus")
	drifted := fx.state(t, drift)
	if drifted.pending == 0 || drifted.agentActive == "active" {
		t.Fatalf("the drift did not take on %s: pending %d, agent %s", drift.Name, drifted.pending, drifted.agent)
	}
	r3 := fx.playbook(t, "site.yml", "--check")
	for _, g := range f.Guests {
		want0 := g != drift
		if got := r3.changed[g.Name]; (got == 0) != want0 {
			t.Errorf("--check: %s changed=%d (drifted host: %s)", g.Name, got, drift.Name)
		}
		s := fx.state(t, g)
		wantState := applied[g.Name]
		if g == drift {
			wantState = drifted
		}
		if s.steering != wantState.steering || s.agent != wantState.agent || s.plan != wantState.plan {
			t.Errorf("--check wrote on %s: steering\n%s\nagent %s, plan %s; want\n%s\nagent %s, plan %s",
				g.Name, s.steering, s.agent, s.plan, wantState.steering, wantState.agent, wantState.plan)
		}
	}
	if !strings.Contains(r3.out, "would change eth0 rx-0 rps-cpus") {
		t.Errorf("--check did not list the drifted rps_cpus:\n%s", tail(r3.out, 5000))
	}
	r4 := fx.playbook(t, "site.yml")
	for _, g := range f.Guests {
		if got := r4.changed[g.Name]; (got == 0) != (g != drift) {
			t.Errorf("repair run: %s changed=%d (drifted host: %s)", g.Name, got, drift.Name)
		}
	}
	if s := fx.state(t, drift); s.steering != applied[drift.Name].steering || s.agentActive != "active" || s.pending != 0 {
		t.Errorf("%s not repaired: steering\n%s\nagent %s, pending %d", drift.Name, s.steering, s.agent, s.pending)
	}
	if t.Failed() {
		t.FailNow()
	}

	// 4: a rolling upgrade, one host at a time, every plan checked in
	// force after each.
	running := fx.states(t)
	r5 := fx.playbook(t, "rolling.yml", "-e", "irqpilot_deb="+deb2)
	if len(r5.inForce) != n {
		t.Errorf("the rolling upgrade reported the fleet in force %d times, want after each of the %d hosts:\n%s", len(r5.inForce), n, tail(r5.out, 8000))
	}
	prev := time.Duration(0)
	for i, l := range r5.inForce {
		t.Logf("rolling upgrade: %s (host's step %s)", l, (r5.at[i] - prev).Round(time.Second))
		prev = r5.at[i]
		if got := strings.Count(strings.SplitN(l, ": ", 2)[1], "fleet"); got != n {
			t.Errorf("after a host the plans of %d hosts were checked, want %d: %s", got, n, l)
		}
	}
	for _, g := range f.Guests {
		if r5.changed[g.Name] == 0 {
			t.Errorf("rolling upgrade: %s changed=0", g.Name)
		}
		s := fx.state(t, g)
		if s.version != "0.0.1~fleet2" || s.agentActive != "active" || s.pending != 0 || s.steering != applied[g.Name].steering {
			t.Errorf("%s after the upgrade: version %q, agent %q, pending %d, steering\n%s", g.Name, s.version, s.agent, s.pending, s.steering)
		}
		if s.agentPID == running[g.Name].agentPID {
			t.Errorf("%s: the agent was not restarted on the new package (pid %s)", g.Name, s.agentPID)
		}
	}
	if full {
		fx.faultsAndReport(t, bin, promStart, [2]time.Time{bFrom, bTo}, [2]time.Time{aFrom, aTo})
	} else {
		fx.coreFaults(t)
	}
	// 5: a canary rollout stops at the host whose change verifies worse.
	fx.canary(t)
	t.Logf("runs: first %s %v, second %s %v, check %s %v, repair %s %v, rolling %s %v",
		r1.took.Round(time.Second), r1.changed, r2.took.Round(time.Second), r2.changed, r3.took.Round(time.Second), r3.changed,
		r4.took.Round(time.Second), r4.changed, r5.took.Round(time.Second), r5.changed)
}

// startFleetFixture boots n fleet guests with a fresh SSH key and waits for
// their SSH servers; the guests are powered off and removed when the test
// ends.
func startFleetFixture(t *testing.T, n int) *fleetFixture {
	t.Helper()
	dir := t.TempDir()
	fx := &fleetFixture{dir: dir, key: filepath.Join(dir, "id_ed25519")}
	pub, err := SSHKey(fx.key, "irqpilot-fleet-test", true)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	f, err := StartFleet(context.Background(), FleetOptions{FS: hostFS, N: n, AuthorizedKey: pub, Log: testLog{t}})
	if err != nil {
		t.Fatal(err)
	}
	fx.f = f
	t.Cleanup(func() {
		if t.Failed() {
			for _, g := range f.Guests {
				t.Logf("%s console:\n%s", g.Name, tail(g.ConsoleText(), 3000))
			}
		}
		stop := time.Now()
		f.Stop()
		t.Logf("fleet of %d powered off and removed in %s", len(f.Guests), time.Since(stop).Round(100*time.Millisecond))
	})
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	if err := f.WaitSSH(ctx); err != nil {
		t.Fatal(err)
	}
	for _, g := range f.Guests {
		t.Logf("%s (%s) greeted over SSH %s after QEMU started", g.Name, g.Addr, g.Booted.Round(time.Second))
	}
	t.Logf("fleet of %d up in %s (images included)", n, time.Since(start).Round(time.Second))
	return fx
}
