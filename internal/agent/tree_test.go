package agent

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"golang.org/x/sys/unix"

	"github.com/irqpilot/irqpilot/internal/cpuset"
	"github.com/irqpilot/irqpilot/internal/host"
	"github.com/irqpilot/irqpilot/internal/hostgen"
	"github.com/irqpilot/irqpilot/internal/kernel"
	"github.com/irqpilot/irqpilot/internal/livetest"
)

// bigHost generates the 256-CPU host (CPUs 250-255 offline, eth0 and eth1
// with 64 queues, nvme0 with 128) once per test binary.
var bigHostBuilt bool

var bigHost = sync.OnceValues(func() (string, error) {
	bigHostBuilt = true
	dir, err := os.MkdirTemp("", "irqpilot-agent-host-")
	if err != nil {
		return "", err
	}
	return dir, hostgen.Generate(dir, hostgen.DefaultSpec())
})

func treeCopy(t testing.TB) string {
	t.Helper()
	src, err := bigHost()
	if err != nil {
		t.Fatal(err)
	}
	dst := t.TempDir()
	if out, err := exec.Command("cp", "-a", src+"/.", dst).CombinedOutput(); err != nil {
		t.Fatalf("copy host tree: %v %s", err, out)
	}
	return dst
}

// bigHostCopy is treeCopy with its file system and host model.
func bigHostCopy(t testing.TB) (string, *kernel.FS, *host.Host) {
	t.Helper()
	root := treeCopy(t)
	fs := kernel.New(root)
	h, err := host.Read(fs, host.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return root, fs, h
}

func stateDir(t testing.TB) string {
	d := filepath.Join(t.TempDir(), "state")
	if err := os.Mkdir(d, 0o700); err != nil {
		t.Fatal(err)
	}
	return d
}

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func writePlan(t testing.TB, text string) string {
	p := filepath.Join(t.TempDir(), "plan.yaml")
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func readTree(t testing.TB, root, rel string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, rel))
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// An entry naming an offline CPU waits for it (nothing written to that
// IRQ, the rest of the plan enforced) and is applied once the CPU is online.
func TestOfflineCPUWaits(t *testing.T) {
	root, fs, h := bigHostCopy(t)
	nic := h.NIC("eth0")
	irq := *nic.RxQueues[0].IRQ
	affPath := filepath.Join("proc/irq", itoa(irq), "smp_affinity_list")
	before := readTree(t, root, affPath)
	pf := writePlan(t, `version: 1
irqs:
  - device: eth0
    queue: 0
    cpus: "252"
    reason: test
rx_queues:
  - device: eth0
    queue: 1
    rps_cpus: "2"
    reason: test
`)
	// A plan naming an offline CPU must wait, not fail New.
	ag := newTestAgent(t, Options{FS: fs, PlanFile: pf, Interval: time.Second, Listen: ""})
	ag.pass("test")
	st := ag.Status()
	if len(st.Waiting) != 1 || !strings.Contains(st.Waiting[0], "CPU 252 to come online") {
		t.Fatalf("waiting = %q, want CPU 252", st.Waiting)
	}
	if got := readTree(t, root, affPath); got != before {
		t.Errorf("irq %d affinity %q → %q: written while CPU 252 is offline", irq, before, got)
	}
	if got := maskOf(t, filepath.Join(root, "sys/class/net/eth0/queues/rx-1/rps_cpus")); !got.Equal(cpuset.Of(2)) {
		t.Errorf("rx-1 rps_cpus = CPUs %s: the rest of the plan (CPU 2) was not enforced", got)
	}
	// CPU 252 comes online.
	os.WriteFile(filepath.Join(root, "sys/devices/system/cpu/online"), []byte("0-252\n"), 0o644)
	os.WriteFile(filepath.Join(root, "sys/devices/system/cpu/offline"), []byte("253-255\n"), 0o644)
	os.WriteFile(filepath.Join(root, "sys/devices/system/cpu/cpu252/online"), []byte("1\n"), 0o644)
	ag.pass("test")
	if st := ag.Status(); len(st.Waiting) != 0 {
		t.Fatalf("still waiting for %q after CPU 252 came online", st.Waiting)
	}
	if got := readTree(t, root, affPath); got != "252" {
		t.Errorf("irq %d affinity = %q after CPU 252 came online, want 252", irq, got)
	}
}

func itoa(n int) string { return fmtInt(n) }

func fmtInt(n int) string {
	if n == 0 {
		return "0"
	}
	var b []byte
	for n > 0 {
		b = append([]byte{byte('0' + n%10)}, b...)
		n /= 10
	}
	return string(b)
}

// One enforcement pass on the generated 256-CPU host, steady state (the
// plan already in force): per-queue's plan for 2×64 queues and 128 NVMe
// IRQs is re-read and compared. cpu-ms/op is the process's CPU time.
func BenchmarkEnforcePass256(b *testing.B) {
	root := treeCopy(b)
	ag := newTestAgent(b, Options{FS: kernel.New(root), Policy: "per-queue", Interval: time.Second})
	ag.pass("start")
	if ag.lastErr != "" {
		b.Fatal(ag.lastErr)
	}
	b.ReportMetric(float64(len(ag.changes)), "settings")
	var r0, r1 unix.Rusage
	unix.Getrusage(unix.RUSAGE_SELF, &r0)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		ag.pass("bench")
	}
	b.StopTimer()
	unix.Getrusage(unix.RUSAGE_SELF, &r1)
	cpu := time.Duration(r1.Utime.Nano()+r1.Stime.Nano()-r0.Utime.Nano()-r0.Stime.Nano()) * time.Nanosecond
	b.ReportMetric(float64(cpu.Microseconds())/1000/float64(b.N), "cpu-ms/op")
	if len(ag.Status().Repairs) != 0 {
		b.Fatalf("steady state repaired something: %+v", ag.Status().Repairs)
	}
}

// Each pass that repairs drift writes a journal; beyond --keep-journals the
// superseded ones (every setting they wrote was first written by an older
// journal that is kept) are removed, so a setting that keeps drifting does
// not fill the state directory. Reverting what is left, newest first, still
// restores the values from before the agent.
func TestRepairJournalsBounded(t *testing.T) {
	root, fs, h := bigHostCopy(t)
	irq := *h.NIC("eth0").RxQueues[0].IRQ
	aff := filepath.Join("proc/irq", itoa(irq), "smp_affinity_list")
	rps := "sys/class/net/eth0/queues/rx-1/rps_cpus"
	affBefore, rpsBefore := readTree(t, root, aff), readTree(t, root, rps)
	pf := writePlan(t, `version: 1
irqs:
  - device: eth0
    queue: 0
    cpus: "2"
    reason: test
rx_queues:
  - device: eth0
    queue: 1
    rps_cpus: "3"
    reason: test
`)
	sd := stateDir(t)
	const keep = 3
	ag := newTestAgent(t, Options{FS: fs, StateDir: sd, PlanFile: pf, Interval: time.Second, KeepJournals: keep, PingPongLimit: 1000})
	ag.pass("start")
	journals := func() []string {
		ents, err := os.ReadDir(filepath.Join(sd, "journal"))
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, e := range ents {
			if strings.HasSuffix(e.Name(), ".json") {
				ids = append(ids, strings.TrimSuffix(e.Name(), ".json"))
			}
		}
		return ids
	}
	if n := len(journals()); n != 1 {
		t.Fatalf("%d journals after the first apply, want 1", n)
	}
	const repairs = 12
	for i := 0; i < repairs; i++ {
		if err := os.WriteFile(filepath.Join(root, aff), []byte("5\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if i%2 == 0 {
			os.WriteFile(filepath.Join(root, rps), []byte("0\n"), 0o644)
		}
		ag.pass("test")
		if got := readTree(t, root, aff); got != "2" {
			t.Fatalf("repair %d: affinity %q, want 2", i, got)
		}
	}
	st := ag.Status()
	if len(st.Repairs) != repairs+repairs/2 {
		t.Errorf("%d repairs recorded, want %d", len(st.Repairs), repairs+repairs/2)
	}
	ids := journals()
	if len(ids) != 1+keep {
		t.Errorf("%d journals on disk after %d repair passes, want the first apply and %d repairs: %v", len(ids), repairs, keep, ids)
	}
	if !slices.Equal(slices.Sorted(slices.Values(ids)), slices.Sorted(slices.Values(st.Journals))) {
		t.Errorf("journals on disk %v, agent lists %v", ids, st.Journals)
	}
	// Revert everything left, newest first: the values from before.
	ids = st.Journals
	for i := len(ids) - 1; i >= 0; i-- {
		if _, err := ag.ap.Revert(ids[i], false); err != nil {
			t.Fatalf("revert %s: %v", ids[i], err)
		}
	}
	if got := readTree(t, root, aff); got != affBefore {
		t.Errorf("affinity %q after reverting all, want %q", got, affBefore)
	}
	if got := readTree(t, root, rps); got != rpsBefore {
		t.Errorf("rps_cpus %q after reverting all, want %q", got, rpsBefore)
	}
}

// The agent's steady-state cost on this machine at a 1 s interval: it
// enforces one IRQ's affinity, samples load and computes findings every
// pass. Each op is one second of the agent running in this process;
// cpu-%/op is the process's CPU time over that second (the target is
// ≤ 0.2 % of one CPU). Run with -benchtime 10x or more.
func BenchmarkSteadyState1s(b *testing.B) {
	livetest.NeedRoot(b)
	fs := kernel.New("/")
	irq, cur := -1, ""
	for _, n := range []int{24, 25, 26} { // ACPI / serial on the CI machine; left at their value
		if v, err := fs.ReadIRQAffinity(n); err == nil {
			irq, cur = n, v.String()
			break
		}
	}
	text := "version: 1\n"
	if irq >= 0 {
		text += fmt.Sprintf("irqs:\n  - irq: %d\n    cpus: \"%s\"\n    reason: \"bench, its current value, nothing changes\"\n", irq, cur)
	}
	ag, err := New(Options{FS: fs, StateDir: stateDir(b), PlanFile: writePlan(b, text), Interval: time.Second, Log: quiet()})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- ag.Run(ctx) }()
	time.Sleep(1500 * time.Millisecond) // first pass and its host read
	var r0, r1 unix.Rusage
	unix.Getrusage(unix.RUSAGE_SELF, &r0)
	t0 := time.Now()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		time.Sleep(time.Second)
	}
	b.StopTimer()
	unix.Getrusage(unix.RUSAGE_SELF, &r1)
	wall := time.Since(t0)
	cpu := time.Duration(r1.Utime.Nano() + r1.Stime.Nano() - r0.Utime.Nano() - r0.Stime.Nano())
	b.ReportMetric(100*cpu.Seconds()/wall.Seconds(), "cpu-%")
	b.ReportMetric(float64(cpu.Microseconds())/1000/wall.Seconds(), "cpu-ms/s")
	cancel()
	if err := <-done; err != nil {
		b.Fatal(err)
	}
}

// An IRQ whose CPU goes offline is moved by the kernel; the entry waits
// while the CPU is away and, when it returns, the write back is a drift
// repair (logged and listed as one, the kernel named) that counts no
// ping-pong: three offline/online cycles in a row leave it enforced.
func TestOfflineCPUReturnIsRepairNotPingPong(t *testing.T) {
	root, fs, h := bigHostCopy(t)
	nic := h.NIC("eth0")
	irq := *nic.RxQueues[0].IRQ
	affPath := filepath.Join("proc/irq", itoa(irq), "smp_affinity_list")
	pf := writePlan(t, `version: 1
irqs:
  - device: eth0
    queue: 0
    cpus: "3"
    reason: test
`)
	// A ping-pong limit of 1: a second repair counted within the window
	// would freeze the setting.
	ag := newTestAgent(t, Options{FS: fs, PlanFile: pf, Interval: time.Second, Listen: "", PingPongLimit: 1})
	ag.pass("test")
	if got := readTree(t, root, affPath); got != "3" {
		t.Fatalf("irq %d affinity %q, want 3", irq, got)
	}
	online := func(on bool) {
		t.Helper()
		list, cpu3 := "0-249\n", "1\n"
		if !on {
			list, cpu3 = "0-2,4-249\n", "0\n"
			// What the kernel does to an IRQ whose only CPU goes offline.
			if err := os.WriteFile(filepath.Join(root, affPath), []byte("0-1\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		for f, v := range map[string]string{"sys/devices/system/cpu/online": list, "sys/devices/system/cpu/cpu3/online": cpu3} {
			if err := os.WriteFile(filepath.Join(root, f), []byte(v), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	for cycle := 1; cycle <= 3; cycle++ {
		online(false)
		ag.pass("test")
		if st := ag.Status(); len(st.Waiting) != 1 || !strings.Contains(st.Waiting[0], "CPU 3 to come online") {
			t.Fatalf("cycle %d: waiting = %q, want CPU 3", cycle, st.Waiting)
		}
		online(true)
		ag.pass("test")
		if got := readTree(t, root, affPath); got != "3" {
			t.Fatalf("cycle %d: irq %d affinity %q after CPU 3 came back, want 3", cycle, irq, got)
		}
		st := ag.Status()
		if len(st.Frozen) != 0 {
			t.Fatalf("cycle %d: frozen %+v: the kernel's moves were counted as ping-pong", cycle, st.Frozen)
		}
		if len(st.Repairs) != cycle {
			t.Fatalf("cycle %d: %d repairs listed, want %d: %+v", cycle, len(st.Repairs), cycle, st.Repairs)
		}
		r := st.Repairs[len(st.Repairs)-1]
		want := Repair{Setting: "irq-affinity", Device: "eth0", Old: "3", Drifted: "0-1", Restored: "3"}
		if d := cmp.Diff(want, r, cmpopts.IgnoreFields(Repair{}, "Time", "Target", "Journal", "Culprit")); d != "" {
			t.Errorf("cycle %d: repair (-want +got):\n%s", cycle, d)
		}
		if !strings.Contains(r.Culprit, "CPU offline") {
			t.Errorf("cycle %d: repair culprit %q, want the kernel named (CPU offline)", cycle, r.Culprit)
		}
	}
	// With the CPU online, a change by something else is drift like any
	// other: not the kernel's, and counted — the second freezes it.
	for n := 1; n <= 2; n++ {
		if err := os.WriteFile(filepath.Join(root, affPath), []byte("0-1\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		ag.pass("test")
	}
	st := ag.Status()
	if len(st.Frozen) != 1 {
		t.Fatalf("an outside change made twice with the CPU online froze %d settings, want 1 (ping-pong limit 1): %+v", len(st.Frozen), st.Repairs)
	}
	if r := st.Repairs[len(st.Repairs)-1]; strings.Contains(r.Culprit, "CPU offline") {
		t.Errorf("an outside change with the CPU online was put on the kernel: %+v", r)
	}
}
