package kubernetes

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/irqpilot/irqpilot/internal/livetest"
)

// The DaemonSet's capability list, checked on the live kernel: the agent
// binary (built static, as in the image) runs as uid 0 with exactly the
// capabilities daemonset.yaml adds (setpriv drops every other one from all
// sets), in a network namespace this test creates, and
//   - sets RPS, the RFS flow count and XPS of a veth (CAP_NET_ADMIN),
//   - pins a process of another user (CAP_SYS_NICE), which fails without it;
//
// and /proc/irq/N/smp_affinity_list is writable by uid 0 with no capability
// at all (so privileged: true is for the runtime's read-only /proc/irq, not
// for a capability). What cannot be checked here is the container runtime
// itself (no cluster, no container daemon).
func TestCapabilitiesLive(t *testing.T) {
	livetest.NeedRoot(t, "setpriv", "ip")
	m := load(t)
	var caps []string
	for _, c := range m.agent(t).SecurityContext.Capabilities.Add {
		caps = append(caps, strings.ToLower(string(c)))
	}
	dir, err := os.MkdirTemp("", "irqpilot-k8s-caps-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	// The sleeper runs as nobody from here: the directory must be reachable.
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	bin := livetest.Irqpilot(t) // static (cgo off), in a directory others may reach

	ns := livetest.Netns(t, livetest.Name("irqp-k8s-"))
	livetest.Veth(t, ns, "kva", "kvb", 0) // a queue per CPU: XPS has a choice

	// A process of another user, by a name no other process has.
	comm := livetest.Name("k8scap")
	sleeper := filepath.Join(dir, comm)
	if b, err := os.ReadFile("/bin/sleep"); err != nil {
		t.Skip("no /bin/sleep")
	} else if err := os.WriteFile(sleeper, b, 0o755); err != nil {
		t.Fatal(err)
	}
	sl := exec.Command("setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", sleeper, "600")
	if err := sl.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sl.Process.Kill(); sl.Wait() })

	plan := filepath.Join(dir, "plan.yaml")
	if err := os.WriteFile(plan, []byte(fmt.Sprintf(`version: 1
rx_queues:
  - {device: kva, rps_cpus: "0", rps_flow_cnt: 256, reason: CAP_NET_ADMIN}
tx_queues:
  - {device: kva, xps_cpus: "0", reason: CAP_NET_ADMIN}
apps:
  - {comm: %s, cpus: "0", reason: CAP_SYS_NICE}
`, comm)), 0o644); err != nil {
		t.Fatal(err)
	}
	sysfs := func(rel string) string {
		out, _ := exec.Command("ip", "netns", "exec", ns, "cat", "/sys/class/net/kva/queues/"+rel).Output()
		return strings.TrimSpace(string(out))
	}
	pinned := func() bool {
		var s unix.CPUSet
		return unix.SchedGetaffinity(sl.Process.Pid, &s) == nil && s.Count() == 1 && s.IsSet(0)
	}

	// With the manifest's capabilities: everything applied.
	log := startAgent(t, bin, ns, plan, filepath.Join(dir, "state-1"), caps)
	waitFor(t, func() bool {
		return sysfs("rx-0/rps_cpus") == "1" && sysfs("rx-0/rps_flow_cnt") == "256" && sysfs("tx-0/xps_cpus") == "1" && pinned()
	}, "RPS, XPS and the pinned process", log)
	stopAgent(t, log)
	if strings.Contains(log.String(), "level=ERROR") {
		t.Errorf("agent with %v logged errors:\n%s", caps, log.buf.String())
	}

	// Without CAP_SYS_NICE the process of another user cannot be pinned.
	var noNice []string
	for _, c := range caps {
		if c != "sys_nice" {
			noNice = append(noNice, c)
		}
	}
	var all unix.CPUSet
	all.Set(0)
	if n := runtimeCPUs(); n > 1 {
		all.Set(1)
	}
	if err := unix.SchedSetaffinity(sl.Process.Pid, &all); err != nil {
		t.Fatal(err)
	}
	log = startAgent(t, bin, ns, plan, filepath.Join(dir, "state-2"), noNice)
	waitFor(t, func() bool { return strings.Contains(log.String(), "not permitted") }, "the agent without CAP_SYS_NICE to report the refusal", log)
	stopAgent(t, log)

	// /proc/irq needs no capability: write an IRQ's own affinity back with
	// none (no eth/virtio/queue IRQ; the value does not change).
	for _, irq := range platformIRQs() {
		val, err := os.ReadFile("/proc/irq/" + irq + "/smp_affinity_list")
		if err != nil {
			continue
		}
		script := fmt.Sprintf("echo %s > /proc/irq/%s/smp_affinity_list", strings.TrimSpace(string(val)), irq)
		if exec.Command("sh", "-c", script).Run() != nil {
			continue // not settable at all (managed, per-CPU): try another
		}
		w := exec.Command("setpriv", "--inh-caps=-all", "--ambient-caps=-all", "--bounding-set=-all", "sh", "-c", script)
		if out, err := w.CombinedOutput(); err != nil {
			t.Errorf("uid 0 without capabilities could not write /proc/irq/%s/smp_affinity_list: %v %s", irq, err, out)
		}
		return
	}
	t.Log("no platform IRQ with a settable affinity; the /proc/irq part was not checked")
}

type agentLog struct {
	cmd *exec.Cmd
	buf *livetest.Buffer
}

func (l *agentLog) String() string { return l.buf.String() }

// startAgent runs the agent as uid 0 with exactly caps (lower case, no
// CAP_ prefix) in every capability set, inside ns.
func startAgent(t *testing.T, bin, ns, plan, state string, caps []string) *agentLog {
	t.Helper()
	set := "-all"
	for _, c := range caps {
		set += ",+" + c
	}
	cmd := exec.Command("ip", "netns", "exec", ns, "setpriv", "--inh-caps="+set, "--ambient-caps="+set, "--bounding-set="+set,
		bin, "agent", "--plan="+plan, "--state-dir="+state, "--listen=", "--interval=200ms")
	l := &agentLog{cmd: cmd, buf: &livetest.Buffer{}}
	cmd.Stdout, cmd.Stderr = l.buf, l.buf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			cmd.Wait()
		}
	})
	return l
}

func stopAgent(t *testing.T, l *agentLog) {
	t.Helper()
	l.cmd.Process.Signal(syscall.SIGTERM)
	if err := l.cmd.Wait(); err != nil {
		t.Errorf("agent exit: %v\n%s", err, l.String())
	}
}

// waitFor polls cond for up to a minute (a wait, not a timing assertion).
func waitFor(t *testing.T, cond func() bool, what string, l *agentLog) {
	t.Helper()
	for end := time.Now().Add(time.Minute); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatalf("waited a minute for %s; agent log:\n%s", what, l.String())
}

func runtimeCPUs() int {
	var s unix.CPUSet
	if unix.SchedGetaffinity(0, &s) != nil {
		return 1
	}
	return s.Count()
}

// platformIRQs lists the IRQs that are no network, storage or queue
// interrupt (serial, ACPI, keyboard…): writing one's own affinity back is
// harmless.
func platformIRQs() []string {
	var out []string
	ents, _ := os.ReadDir("/proc/irq")
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		// An IRQ's actions are the directories in /proc/irq/N.
		sub, _ := os.ReadDir("/proc/irq/" + e.Name())
		var names []string
		for _, d := range sub {
			if d.IsDir() {
				names = append(names, d.Name())
			}
		}
		a := strings.ToLower(strings.Join(names, " "))
		if a == "" || strings.ContainsAny(a, "-.") ||
			strings.Contains(a, "virtio") || strings.Contains(a, "eth") || strings.Contains(a, "nvme") {
			continue
		}
		out = append(out, e.Name())
	}
	return out
}

// TestMain removes the binary the live test built.
func TestMain(m *testing.M) {
	code := m.Run()
	livetest.RemoveBuilt()
	os.Exit(code)
}
