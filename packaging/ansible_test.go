package packaging

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/irqpilot/irqpilot/internal/livetest"
)

// testNS is a network namespace with a 4-queue veth pair vq0/vq1: the only
// devices the role's plan may touch.
type testNS struct{ name string }

func newTestNS(t *testing.T) *testNS {
	t.Helper()
	livetest.NeedRoot(t, "ip")
	ns := &testNS{name: livetest.Netns(t, livetest.Name("irqp-ans-"))}
	livetest.Veth(t, ns.name, "vq0", "vq1", 4)
	return ns
}

// read returns a sysfs/procfs file as seen inside the namespace.
func (ns *testNS) read(t *testing.T, path string) string {
	t.Helper()
	return strings.TrimSpace(run(t, "ip", "netns", "exec", ns.name, "cat", path))
}

func (ns *testNS) write(t *testing.T, path, v string) {
	t.Helper()
	run(t, "ip", "netns", "exec", ns.name, "sh", "-c", "echo "+v+" > "+path)
}

// rpsState is every rps_cpus of vq0, by queue file.
func (ns *testNS) rpsState(t *testing.T) map[string]string {
	t.Helper()
	m := map[string]string{}
	for q := 0; q < 4; q++ {
		p := fmt.Sprintf("/sys/class/net/vq0/queues/rx-%d/rps_cpus", q)
		m[p] = ns.read(t, p)
	}
	return m
}

var recapRE = regexp.MustCompile(`(?m)^(\S+)\s+:\s+ok=(\d+)\s+changed=(\d+)\s+unreachable=(\d+)\s+failed=(\d+)`)

// playbook runs deploy/ansible/site.yml inside the namespace against
// localhost with the local connection and returns the PLAY RECAP's
// changed count (failing the test on a failed or unreachable host).
func playbook(t *testing.T, ns *testNS, dir string, args ...string) int {
	t.Helper()
	site, err := filepath.Abs("../deploy/ansible/site.yml")
	if err != nil {
		t.Fatal(err)
	}
	argv := append([]string{"netns", "exec", ns.name, "ansible-playbook", "-i", filepath.Join(dir, "hosts.yml"),
		"-e", "@" + filepath.Join(dir, "vars.json"), site}, args...)
	cmd := exec.Command("ip", argv...)
	cmd.Env = append(os.Environ(),
		"ANSIBLE_NOCOLOR=1", "ANSIBLE_RETRY_FILES_ENABLED=0", "ANSIBLE_PIPELINING=1", "ANSIBLE_HOME="+filepath.Join(dir, "ansible-home"),
		"ANSIBLE_LOCAL_TEMP="+filepath.Join(dir, "ansible-local"), "ANSIBLE_REMOTE_TMP="+filepath.Join(dir, "ansible-remote"))
	start := time.Now()
	out, err := cmd.CombinedOutput()
	recap := recapRE.FindAllStringSubmatch(string(out), -1)
	if err != nil || len(recap) == 0 {
		t.Fatalf("ansible-playbook %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	changed := 0
	for _, r := range recap {
		c, _ := strconv.Atoi(r[3])
		changed += c
		if r[4] != "0" || r[5] != "0" {
			t.Fatalf("ansible-playbook %s: host %s unreachable=%s failed=%s\n%s", strings.Join(args, " "), r[1], r[4], r[5], out)
		}
	}
	t.Logf("ansible-playbook %s: changed=%d (%s)", strings.Join(args, " "), changed, time.Since(start).Round(time.Second))
	if testing.Verbose() {
		t.Logf("%s", out)
	}
	return changed
}

// Issue 14 point 2, on the real engine: deploy/ansible's role installs the
// .deb, plans (rps-spread for the veth only), applies; a second run changes
// nothing; after the value is changed back by hand a --check run reports
// "changed" from apply --dry-run's JSON and writes nothing; the persist
// step enables the boot unit (and purge removes that link).
func TestAnsibleRoleInstallApplyIdempotentCheck(t *testing.T) {
	needPackagingRoot(t)
	if _, err := exec.LookPath("ansible-playbook"); err != nil {
		t.Skip("no ansible-playbook (Debian package ansible; make deps)")
	}
	if _, err := os.Stat("/etc/irqpilot/plan.yaml"); err == nil {
		t.Skip("/etc/irqpilot/plan.yaml exists: this machine has a plan the test must not touch")
	}
	deb := buildDeb(t)
	purgeOnCleanup(t) // runs last: after the revert below
	ns := newTestNS(t)

	dir := t.TempDir()
	stateDir := filepath.Join(dir, "state")
	if err := os.Mkdir(stateDir, 0o700); err != nil {
		t.Fatal(err)
	}
	planPath := filepath.Join(dir, "etc", "plan.yaml")
	inventory := "all:\n  children:\n    irqpilot:\n      hosts:\n        localhost:\n          ansible_connection: local\n          ansible_python_interpreter: /usr/bin/python3\n"
	if err := os.WriteFile(filepath.Join(dir, "hosts.yml"), []byte(inventory), 0o644); err != nil {
		t.Fatal(err)
	}
	vars := map[string]any{
		"irqpilot_deb":       deb,
		"irqpilot_deb_dest":  filepath.Join(dir, "deb"),
		"irqpilot_policy":    "rps-spread",
		"irqpilot_plan_args": []string{"--device", "vq0"},
		"irqpilot_plan_path": planPath,
		"irqpilot_state_dir": stateDir,
		"irqpilot_persist":   "none",
		// Verification measures the whole machine, which other tests load
		// as they like; the canary test (ansible_canary_test.go) covers it.
		"irqpilot_verify": false,
	}
	data, _ := json.Marshal(vars)
	if err := os.WriteFile(filepath.Join(dir, "vars.json"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	// Revert what apply changed in the namespace, while irqpilot is still
	// installed (cleanups run last-registered first).
	t.Cleanup(func() {
		if _, err := os.Stat("/usr/bin/irqpilot"); err != nil {
			return
		}
		if !t.Failed() {
			return // reverted below
		}
		if out, err := exec.Command("ip", "netns", "exec", ns.name, "/usr/bin/irqpilot", "revert", "--state-dir", stateDir).CombinedOutput(); err != nil {
			t.Logf("cleanup: irqpilot revert: %v\n%s", err, out)
		}
	})

	// Machine-wide (visible only in the initial namespace): must not move.
	sockFlow, _ := os.ReadFile("/proc/sys/net/core/rps_sock_flow_entries")
	before := ns.rpsState(t)

	// 1: installs, plans, applies.
	if c := playbook(t, ns, dir); c == 0 {
		t.Fatal("first run reported changed=0")
	}
	if !packageInstalled() {
		t.Fatal("the role did not install the package")
	}
	after := ns.rpsState(t)
	rx0 := "/sys/class/net/vq0/queues/rx-0/rps_cpus"
	if after[rx0] == before[rx0] {
		t.Fatalf("%s is still %s after the first run: the plan was not applied", rx0, after[rx0])
	}
	if v, _ := os.ReadFile("/proc/sys/net/core/rps_sock_flow_entries"); string(v) != string(sockFlow) {
		t.Errorf("rps_sock_flow_entries changed from %q to %q: the plan was to be limited to vq0", sockFlow, v)
	}
	if plan, err := os.ReadFile(planPath); err != nil || !strings.Contains(string(plan), "vq0") || strings.Contains(string(plan), "irqs:") {
		t.Errorf("plan %s (%v) is not limited to vq0's queues:\n%s", planPath, err, plan)
	}

	// 2: nothing to do.
	if c := playbook(t, ns, dir); c != 0 {
		t.Errorf("second run reported changed=%d, want 0", c)
	}
	if got := ns.rpsState(t); fmt.Sprint(got) != fmt.Sprint(after) {
		t.Errorf("second run changed rps_cpus: %v, was %v", got, after)
	}

	// 3: drift by hand; --check reports it and changes nothing.
	ns.write(t, rx0, before[rx0])
	planBefore, _ := os.ReadFile(planPath)
	if c := playbook(t, ns, dir, "--check"); c == 0 {
		t.Errorf("--check after %s was set back to %s reported changed=0", rx0, before[rx0])
	}
	if v := ns.read(t, rx0); v != before[rx0] {
		t.Errorf("--check wrote %s: %s, want %s left alone", rx0, v, before[rx0])
	}
	if planAfter, _ := os.ReadFile(planPath); string(planAfter) != string(planBefore) {
		t.Errorf("--check rewrote the plan %s", planPath)
	}
	if j, _ := filepath.Glob(filepath.Join(stateDir, "journal", "*.json")); len(j) == 0 {
		t.Errorf("no journal in the state directory %s after apply", stateDir)
	}

	// 4: only the persist step, with the packaged units' paths: enables
	// irqpilot-apply.service (a link; systemd need not run).
	persist := []string{"--tags", "irqpilot_persist", "-e", "irqpilot_persist=boot",
		"-e", "irqpilot_plan_path=/etc/irqpilot/plan.yaml", "-e", "irqpilot_state_dir=/var/lib/irqpilot"}
	if c := playbook(t, ns, dir, persist...); c != 1 {
		t.Errorf("enabling the boot unit reported changed=%d, want 1", c)
	}
	if l := enableLinks(); len(l) != 1 || !strings.HasSuffix(l[0], "irqpilot-apply.service") {
		t.Errorf("enable links = %v, want irqpilot-apply.service's", l)
	}
	if _, err := os.Stat("/etc/irqpilot/plan.yaml"); err == nil {
		t.Error("the persist step wrote /etc/irqpilot/plan.yaml")
	}

	// Undo with the installed binary, then purge (also drops the link).
	run(t, "ip", "netns", "exec", ns.name, "/usr/bin/irqpilot", "revert", "--state-dir", stateDir)
	if got := ns.rpsState(t); fmt.Sprint(got) != fmt.Sprint(before) {
		t.Errorf("after revert rps_cpus = %v, want %v", got, before)
	}
	if out, err := aptGet("purge", "-y", "irqpilot"); err != nil {
		t.Fatalf("apt-get purge -y irqpilot: %v\n%s", err, out)
	}
	if l := enableLinks(); len(l) != 0 {
		t.Errorf("enable links left after purge: %v", l)
	}
}
