package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/irqpilot/irqpilot/internal/host"
	"github.com/irqpilot/irqpilot/internal/livetest"
	"github.com/irqpilot/irqpilot/internal/setting"
)

// runIn runs the binary (inside ns when ns is not nil) and returns stdout,
// stderr and the exit status.
func runIn(t *testing.T, ns *vethNamespace, bin string, args ...string) (string, string, int) {
	t.Helper()
	argv := append([]string{bin}, args...)
	if ns != nil {
		argv = append(append([]string{}, ns.exec...), argv...)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("%s: %v", strings.Join(argv, " "), err)
	}
	return stdout.String(), stderr.String(), code
}

func stateDir(t *testing.T) string {
	d := filepath.Join(t.TempDir(), "state")
	if err := os.Mkdir(d, 0o700); err != nil {
		t.Fatal(err)
	}
	return d
}

// Live: `plan --device vq0` run inside a namespace of our own plans
// nothing but vq0's settings, for every policy — assert on every entry —
// and nothing that cannot take effect in a namespace other than the host's
// (net.core.rps_sock_flow_entries, and the flow counts that need it), even
// with --machine-wide; the plan says why.
func TestLivePlanDeviceInNamespace(t *testing.T) {
	ns := newVethNamespace(t)
	bin := livetest.Irqpilot(t)
	for _, policy := range []string{"dedicated-core", "per-queue", "colocate", "rps-spread", "auto"} {
		for _, mw := range []bool{false, true} {
			args := []string{"plan", "--policy", policy, "--device", "vq0", "--json"}
			if mw {
				args = append(args, "--machine-wide")
			}
			out, errOut, code := runIn(t, ns, bin, args...)
			if code != 0 {
				t.Fatalf("%v: exit %d\n%s", args, code, errOut)
			}
			var d planDiff
			if err := json.Unmarshal([]byte(out), &d); err != nil {
				t.Fatalf("%v: %v\n%s", args, err, out)
			}
			for _, s := range d.Settings {
				sc := setting.ScopeOf(&s)
				switch {
				case s.Kind == setting.KindSysctl:
					t.Errorf("%v: %s planned in a namespace, where it does not exist", args, s.Target)
				case s.Kind == setting.KindRPSFlowCnt:
					t.Errorf("%v: %s rps_flow_cnt planned in a namespace, where RFS cannot be turned on", args, s.Target)
				case s.Kind == setting.KindIrqbalance || s.Kind == setting.KindIrqbalanceBan:
					if s.Status != setting.StatusSkipped && s.Status != setting.StatusUnchanged && !mw {
						t.Errorf("%v: irqbalance change %s without --machine-wide", args, s.Value)
					}
				case sc.IRQ >= 0:
					t.Errorf("%v: plans IRQ %d (%s), not vq0's", args, sc.IRQ, s.Target)
				case sc.NetDevice != "vq0":
					t.Errorf("%v: plans %s (%s) for device %q, not vq0", args, s.Target, s.Name(), sc.NetDevice)
				}
			}
			if policy == "rps-spread" || policy == "dedicated-core" {
				if !strings.Contains(strings.Join(d.Notes, "\n"), "RFS left out: this plan was made in network namespace "+ns.name) {
					t.Errorf("%v: notes do not say why RFS was left out: %q", args, d.Notes)
				}
			}
		}
	}
}

// Live: a journal applied in a namespace, reverted from the host's, is
// refused with the namespace's name and the command to run; the undo
// command apply printed, executed as printed, restores everything.
func TestLiveRevertWrongNamespaceAndUndoAsPrinted(t *testing.T) {
	ns := newVethNamespace(t)
	bin := livetest.Irqpilot(t)
	state := stateDir(t)
	before := steeringState(t, ns)
	planFile := filepath.Join(t.TempDir(), "a.yaml")
	os.WriteFile(planFile, []byte("version: 1\nrx_queues:\n  - {device: vq0, queue: 0, rps_cpus: 0-1, reason: test}\ntx_queues:\n  - {device: vq0, queue: 0, xps_cpus: 1, reason: test}\n"), 0o644)
	out, errOut, code := runIn(t, ns, bin, "apply", "--state-dir", state, planFile)
	if code != 0 {
		t.Fatalf("apply: exit %d\n%s%s", code, out, errOut)
	}
	t.Cleanup(func() { runIn(t, ns, bin, "revert", "--state-dir", state) })
	m := regexp.MustCompile(`\(undo: (.*)\)\n`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no undo command in\n%s", out)
	}
	undo := m[1]
	if !strings.HasPrefix(undo, "ip netns exec "+ns.name+" irqpilot revert --to ") || !strings.Contains(undo, "--state-dir "+state) {
		t.Errorf("undo command %q does not name the namespace and the state directory", undo)
	}

	_, errOut, code = runIn(t, nil, bin, "revert", "--state-dir", state)
	if code != 2 || !strings.Contains(errOut, "device vq0 is in namespace "+ns.name) || !strings.Contains(errOut, "ip netns exec "+ns.name+" irqpilot revert") {
		t.Errorf("revert from the host's namespace: exit %d, %q; want 2 and the namespace message", code, errOut)
	}
	if strings.Contains(errOut, "not supported") {
		t.Errorf("revert from the wrong namespace says %q", errOut)
	}

	cmd := exec.Command("sh", "-c", undo)
	cmd.Env = append(os.Environ(), "PATH="+filepath.Dir(bin)+":"+os.Getenv("PATH"))
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("undo as printed (%s): %v\n%s", undo, err, b)
	}
	if d := cmp.Diff(before, steeringState(t, ns)); d != "" {
		t.Errorf("after the printed undo (-before +after):\n%s", d)
	}
}

// Live: applying plan B over plan A lists A's settings B does not mention;
// --replace restores them in B's journal; reverting B puts A's back, and
// reverting A leaves the machine as it was.
func TestLiveApplyReplace(t *testing.T) {
	ns := newVethNamespace(t)
	bin := livetest.Irqpilot(t)
	state := stateDir(t)
	before := steeringState(t, ns)
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.yaml"), filepath.Join(dir, "b.yaml")
	os.WriteFile(a, []byte("version: 1\nrx_queues:\n  - {device: vq0, queue: 0, rps_cpus: 0-1, rps_flow_cnt: 256, reason: plan A}\ntx_queues:\n  - {device: vq0, queue: 0, xps_cpus: 1, reason: plan A}\n"), 0o644)
	os.WriteFile(b, []byte("version: 1\nrx_queues:\n  - {device: vq0, queue: 0, rps_cpus: 1, reason: plan B}\n"), 0o644)
	t.Cleanup(func() {
		for i := 0; i < 3; i++ {
			runIn(t, ns, bin, "revert", "--state-dir", state)
		}
	})
	if out, errOut, code := runIn(t, ns, bin, "apply", "--state-dir", state, a); code != 0 {
		t.Fatalf("apply A: %d\n%s%s", code, out, errOut)
	}
	afterA := steeringState(t, ns)
	out, errOut, code := runIn(t, ns, bin, "apply", "--dry-run", "--state-dir", state, b)
	if code != 0 {
		t.Fatalf("apply --dry-run B: %d\n%s", code, errOut)
	}
	for _, want := range []string{"still in force from earlier journals, not in this plan", "vq0 tx-0  xps_cpus", "vq0 rx-0  rps_flow_cnt"} {
		if !strings.Contains(out, want) {
			t.Errorf("apply --dry-run B does not list A's leftover %q:\n%s", want, out)
		}
	}
	out, errOut, code = runIn(t, ns, bin, "apply", "--replace", "--state-dir", state, b)
	if code != 0 {
		t.Fatalf("apply --replace B: %d\n%s%s", code, out, errOut)
	}
	now := steeringState(t, ns)
	for _, k := range []string{"/sys/class/net/vq0/queues/tx-0/xps_cpus", "/sys/class/net/vq0/queues/rx-0/rps_flow_cnt"} {
		if now[k] != before[k] {
			t.Errorf("after --replace %s = %q, want its value before A, %q", k, now[k], before[k])
		}
	}
	if got := now["/sys/class/net/vq0/queues/rx-0/rps_cpus"]; got != "2" && got != "00000002" && strings.TrimLeft(got, "0,") != "2" {
		t.Errorf("after --replace rx-0 rps_cpus = %q, want plan B's CPU 1", got)
	}
	if out, errOut, code := runIn(t, ns, bin, "revert", "--state-dir", state); code != 0 {
		t.Fatalf("revert B: %d\n%s%s", code, out, errOut)
	}
	if d := cmp.Diff(afterA, steeringState(t, ns)); d != "" {
		t.Errorf("after reverting B, want A's state (-want +got):\n%s", d)
	}
	if out, errOut, code := runIn(t, ns, bin, "revert", "--state-dir", state); code != 0 {
		t.Fatalf("revert A: %d\n%s%s", code, out, errOut)
	}
	if d := cmp.Diff(before, steeringState(t, ns)); d != "" {
		t.Errorf("after reverting A (-want +got):\n%s", d)
	}
}

// Live: in a namespace of our own with two veth pairs and a default route
// through vdr0, a plan without --device leaves vdr0 out and says so (in
// the plan and on stderr); inventory marks vdr0 alone as carrying the
// default route; --device vdr0 plans it.
func TestLivePlanLeavesOutDefaultRoute(t *testing.T) {
	livetest.NeedRoot(t, "ip")
	name := livetest.Netns(t, livetest.Name("irqp-dr-"))
	for _, l := range []string{"vdr", "vdx"} {
		livetest.Veth(t, name, l+"0", l+"1", 2)
	}
	livetest.Run(t, "ip", "-n", name, "addr", "add", "10.213.7.1/24", "dev", "vdr0")
	livetest.Run(t, "ip", "-n", name, "addr", "add", "10.213.8.1/24", "dev", "vdx0")
	livetest.Run(t, "ip", "-n", name, "route", "add", "default", "via", "10.213.7.2", "dev", "vdr0")
	ns := &vethNamespace{name: name, exec: []string{"ip", "netns", "exec", name}}
	bin := livetest.Irqpilot(t)

	out, errOut, code := runIn(t, ns, bin, "inventory", "--json")
	if code != 0 {
		t.Fatalf("inventory: exit %d\n%s", code, errOut)
	}
	var inv host.Host
	if err := json.Unmarshal([]byte(out), &inv); err != nil {
		t.Fatal(err)
	}
	for _, n := range inv.NICs {
		if want := n.Name == "vdr0"; n.DefaultRoute != want {
			t.Errorf("inventory: %s default_route %v, want %v", n.Name, n.DefaultRoute, want)
		}
	}

	_, errOut, code = runIn(t, ns, bin, "plan", "--policy", "rps-spread")
	if code != 0 || !strings.Contains(errOut, "left out vdr0: it carries the default route") {
		t.Errorf("plan without --device: exit %d, stderr %q", code, errOut)
	}
	type planJSON struct {
		Notes    []string         `json:"notes"`
		Settings []setting.Change `json:"settings"`
		Plan     struct {
			RxQueues []struct {
				Device string `json:"device"`
			} `json:"rx_queues"`
		} `json:"plan"`
	}
	planFor := func(args ...string) planJSON {
		t.Helper()
		out, errOut, code := runIn(t, ns, bin, append([]string{"plan", "--policy", "rps-spread", "--json"}, args...)...)
		if code != 0 {
			t.Fatalf("plan %v: exit %d\n%s", args, code, errOut)
		}
		var p planJSON
		if err := json.Unmarshal([]byte(out), &p); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		return p
	}
	devices := func(p planJSON) string {
		seen := map[string]bool{}
		for _, e := range p.Plan.RxQueues {
			seen[e.Device] = true
		}
		for _, s := range p.Settings {
			if s.Device != "" {
				seen[s.Device] = true
			}
		}
		var out []string
		for d := range seen {
			out = append(out, d)
		}
		sort.Strings(out)
		return strings.Join(out, ",")
	}
	p := planFor()
	if d := devices(p); strings.Contains(d, "vdr0") {
		t.Errorf("plan without --device touches %s", d)
	}
	if !strings.Contains(strings.Join(p.Notes, "\n"), "left out vdr0: it carries the default route") {
		t.Errorf("plan notes %q do not say vdr0 was left out", p.Notes)
	}
	if d := devices(planFor("--device", "vdr0")); d != "vdr0" {
		t.Errorf("--device vdr0 plans %q", d)
	}
	if d := devices(planFor("--device", "vdx0,vdr0")); d != "vdr0,vdx0" {
		t.Errorf("--device vdx0,vdr0 plans %q", d)
	}
}

// Live: the net.core sysctls exist in the initial network namespace only,
// so inside another one inventory and plan say the namespace lacks them,
// never the kernel (which has them: inventory on the host lists none of
// them as missing).
func TestLiveKernelCannotNamesTheNamespace(t *testing.T) {
	ns := newVethNamespace(t)
	bin := livetest.Irqpilot(t)
	sysctls := []string{setting.SockFlowPath, setting.BusyReadPath, setting.BusyPollPath}

	out, errOut, code := runIn(t, nil, bin, "inventory")
	if code != 0 {
		t.Fatalf("inventory on the host: exit %d\n%s", code, errOut)
	}
	for _, p := range sysctls {
		if strings.Contains(out, p) {
			t.Errorf("inventory on the host lists %s as missing:\n%s", p, out)
		}
	}

	out, errOut, code = runIn(t, ns, bin, "inventory")
	if code != 0 {
		t.Fatalf("inventory in %s: exit %d\n%s", ns.name, code, errOut)
	}
	for _, p := range sysctls {
		if !strings.Contains(out, p+" not found in this network namespace (initial namespace only)") {
			t.Errorf("inventory in %s does not say the namespace lacks %s:\n%s", ns.name, p, out)
		}
	}
	if !strings.Contains(out, "Network namespace cannot: 3\n") {
		t.Errorf("inventory in %s: the three sysctls belong under \"Network namespace cannot\":\n%s", ns.name, out)
	}
	if _, k, ok := strings.Cut(out, "Kernel cannot:"); ok {
		if k, _, _ = strings.Cut(k, "Network namespace cannot:"); strings.Contains(k, "proc/sys/net/core") {
			t.Errorf("inventory in %s lists a net.core sysctl under what the kernel cannot:\n%s", ns.name, out)
		}
	}

	out, errOut, code = runIn(t, ns, bin, "inventory", "--json")
	if code != 0 {
		t.Fatalf("inventory --json in %s: exit %d\n%s", ns.name, code, errOut)
	}
	var inv struct {
		Features []host.Feature `json:"features"`
	}
	if err := json.Unmarshal([]byte(out), &inv); err != nil {
		t.Fatalf("inventory --json: %v\n%s", err, out)
	}
	netnsOnly := map[string]bool{}
	for _, f := range inv.Features {
		if f.Missing() && f.NetNS {
			netnsOnly[f.Probe] = true
		}
	}
	for _, p := range sysctls {
		if !netnsOnly[p] {
			t.Errorf("inventory --json in %s: %s not marked missing in this namespace: %+v", ns.name, p, inv.Features)
		}
	}

	out, errOut, code = runIn(t, ns, bin, "plan", "--policy", "latency", "--device", "vq0", "--machine-wide", "--json")
	if code != 0 {
		t.Fatalf("plan --policy latency in %s: exit %d\n%s", ns.name, code, errOut)
	}
	var d planDiff
	if err := json.Unmarshal([]byte(out), &d); err != nil {
		t.Fatalf("plan --json: %v\n%s", err, out)
	}
	notes := strings.Join(d.Notes, "\n")
	if strings.Contains(notes, "this kernel has no") {
		t.Errorf("plan in %s blames the kernel for what the namespace lacks: %q", ns.name, d.Notes)
	}
	if !strings.Contains(notes, "this network namespace has no busy polling of reads") {
		t.Errorf("plan in %s does not say the namespace lacks busy_read: %q", ns.name, d.Notes)
	}
}
