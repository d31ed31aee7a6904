package agent

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/irqpilot/irqpilot/internal/livetest"
)

// recreate deletes va0 (and its peer) and adds it again with queues
// queues, back to back in one shell: the two link events reach the agent
// within one settle time, as a fast driver reset or a container restart
// makes them.
func (b *bed) recreate(t *testing.T, queues int) {
	t.Helper()
	q := strconv.Itoa(queues)
	run(t, "ip", "netns", "exec", b.ns, "sh", "-c", "ip link del va0 && ip link add va0 numrxqueues "+q+" numtxqueues "+q+
		" type veth peer name vb0 numrxqueues "+q+" numtxqueues "+q+" && ip link set va0 up")
}

// journalFiles counts the journals in a state directory.
func journalFiles(t *testing.T, sd string) (all, applied int) {
	t.Helper()
	ents, _ := os.ReadDir(filepath.Join(sd, "journal"))
	for _, e := range ents {
		if !strings.HasSuffix(e.Name(), ".json") {
			continue
		}
		all++
		if b, err := os.ReadFile(filepath.Join(sd, "journal", e.Name())); err == nil && bytes.Contains(b, []byte(`"state": "applied"`)) {
			applied++
		}
	}
	return all, applied
}

// One device's queue count does not disable the plan: va0 re-created with
// 2 queues where the plan names its queue 3 leaves that entry waiting, with
// its reason (status, metrics, one log line), and everything else — va0's
// other entry, the unrelated vc0 — is still enforced and repaired.
func TestLivePlanEntryWaitsAlone(t *testing.T) {
	livetest.NeedRoot(t)
	b := newBed(t, 4)
	livetest.Veth(t, b.ns, "vc0", "vd0", 1)
	pf := writePlan(t, `version: 1
rx_queues:
  - device: va0
    rps_cpus: "0"
    reason: partial plan test
  - device: va0
    queue: 3
    rps_flow_cnt: 64
    reason: partial plan test
  - device: vc0
    rps_cpus: "0"
    reason: partial plan test
`)
	sd := mkState(t)
	p := startAgent(t, b.ns, sd, "--plan", pf, "--interval", "200ms", "--listen", "127.0.0.1:9477")
	rps := func(dev string, q int) string {
		return b.read(t, fmt.Sprintf("/sys/class/net/%s/queues/rx-%d/rps_cpus", dev, q))
	}
	waitFor(t, 10*time.Second, "plan applied", func() bool {
		return strings.HasSuffix(rps("va0", 0), "1") && strings.HasSuffix(rps("vc0", 0), "1") &&
			b.read(t, "/sys/class/net/va0/queues/rx-3/rps_flow_cnt") == "64"
	})

	b.recreate(t, 2)
	waitFor(t, 10*time.Second, "re-created va0 converged", func() bool {
		return strings.HasSuffix(rps("va0", 0), "1") && strings.HasSuffix(rps("va0", 1), "1")
	})
	const want = "rx_queues entry at plan line 6 to resolve: va0 has no rx queue 3 (it has 2 rx queues)"
	var st *Status
	waitFor(t, 10*time.Second, "entry waiting", func() bool {
		st = p.status(t)
		return len(st.Waiting) == 1 && st.Waiting[0] == want
	})
	// Drift on the unrelated device is still repaired.
	b.write(t, "/sys/class/net/vc0/queues/rx-0/rps_cpus", "0")
	waitFor(t, 10*time.Second, "vc0 drift repaired", func() bool { return strings.HasSuffix(rps("vc0", 0), "1") })
	passes := p.status(t).Passes
	waitFor(t, 20*time.Second, "ten more passes", func() bool { return p.status(t).Passes >= passes+10 })
	st = p.status(t)
	if st.LastError != "" {
		t.Errorf("last_error %q, want none (the plan resolves entry by entry)", st.LastError)
	}
	enforced := map[string]bool{}
	for _, e := range st.Enforced {
		enforced[e.Target] = true
	}
	for _, tg := range []string{"va0 rx-0", "va0 rx-1", "vc0 rx-0"} {
		if !enforced[tg] {
			t.Errorf("%s not enforced; enforced: %+v", tg, st.Enforced)
		}
	}
	if len(st.Waiting) != 1 || st.Waiting[0] != want {
		t.Errorf("waiting %q, want [%q]", st.Waiting, want)
	}
	log := p.log.String()
	if n := strings.Count(log, "waiting for "+want); n != 1 {
		t.Errorf("the waiting entry was logged %d times, want once:\n%s", n, log)
	}
	if strings.Contains(log, "plan does not resolve") {
		t.Errorf("the whole plan was given up:\n%s", log)
	}
	if m := b.curl(t, "http://127.0.0.1:9477/metrics"); !strings.Contains(m+"\n", "\nirqpilot_waiting_entries 1\n") {
		t.Errorf("metrics do not count the waiting entry:\n%s", grepLines(m, "waiting"))
	}
	out, _ := exec.Command(irqpilot(t), "status", "--state-dir", sd).CombinedOutput()
	if !strings.Contains(string(out), "waiting for "+want) {
		t.Errorf("irqpilot status does not say what waits:\n%s", out)
	}

	// Back to 4 queues: the entry resolves again and nothing waits.
	b.recreate(t, 4)
	waitFor(t, 10*time.Second, "queue 3 back and enforced", func() bool {
		return b.read(t, "/sys/class/net/va0/queues/rx-3/rps_flow_cnt") == "64" && len(p.status(t).Waiting) == 0
	})
}

// A device deleted and re-added (same name, same queues, a new ifindex),
// over and over, is converged each time: no drift repairs, no ping-pong
// freeze, and the journals of the incarnations that are gone are pruned
// down to --keep-journals; the journal left is the live one's (revert
// restores the device as the agent found it).
func TestLiveRecreatedDeviceIsNotDrift(t *testing.T) {
	livetest.NeedRoot(t)
	const keep = 2
	b, sd, p := startVa0Agent(t, "re-creation test", "200ms",
		"--pingpong-limit", "2", "--pingpong-window", "1m", "--keep-journals", strconv.Itoa(keep))
	converged := func() bool {
		return strings.HasSuffix(b.read(t, "/sys/class/net/va0/queues/rx-1/rps_cpus"), "1") &&
			b.read(t, "/sys/class/net/va0/queues/rx-1/rps_flow_cnt") == "256"
	}
	waitFor(t, 10*time.Second, "plan applied", converged)
	const times = 6
	for i := 0; i < times; i++ {
		b.recreate(t, 2)
		waitFor(t, 10*time.Second, fmt.Sprintf("re-creation %d converged", i+1), converged)
		time.Sleep(500 * time.Millisecond) // a few passes over the new device
	}
	st := p.status(t)
	if len(st.Repairs) != 0 || len(st.Frozen) != 0 {
		t.Errorf("re-creations counted as drift: repairs %+v, frozen %+v", st.Repairs, st.Frozen)
	}
	log := p.log.String()
	for _, bad := range []string{`msg="drift repaired"`, `msg="ping-pong: setting frozen"`} {
		if strings.Contains(log, bad) {
			t.Errorf("log has %s:\n%s", bad, log)
		}
	}
	all, applied := journalFiles(t, sd)
	t.Logf("%d appearances of va0: %d journals (%d applied) with --keep-journals %d", times+1, all, applied, keep)
	if applied > keep+1 || all > 2*keep+1 {
		t.Errorf("%d journals (%d applied) after %d appearances; want at most %d applied (kept + the live device's)", all, applied, times+1, keep+1)
	}
	p.stop(t, syscall.SIGTERM)
	out, err := exec.Command("ip", "netns", "exec", b.ns, irqpilot(t), "revert", "--state-dir", sd).CombinedOutput()
	if err != nil {
		t.Fatalf("revert: %v\n%s", err, out)
	}
	if got := b.read(t, "/sys/class/net/va0/queues/rx-1/rps_cpus"); strings.Trim(got, "0,") != "" {
		t.Errorf("rps_cpus %q after revert, want 0 (as the live va0 was created)", got)
	}
}

// A repair blocked by the state directory's lock (held by flock(1) for 3 s)
// is not a repair: one drift is repaired once when the lock is free, nothing
// is frozen, and the error names flock's pid, not the agent's own.
func TestLiveBlockedWriteIsNotRepair(t *testing.T) {
	livetest.NeedRoot(t, "flock")
	flock, _ := exec.LookPath("flock")
	b := newBed(t, 2)
	pf := writePlan(t, "version: 1\nrx_queues:\n  - device: va0\n    rps_cpus: \"0\"\n    reason: blocked write test\n")
	sd := mkState(t)
	p := startAgent(t, b.ns, sd, "--plan", pf, "--interval", "200ms", "--listen", "", "--pingpong-limit", "3", "--pingpong-window", "1m")
	rps := "/sys/class/net/va0/queues/rx-0/rps_cpus"
	waitFor(t, 10*time.Second, "plan applied", func() bool { return strings.HasSuffix(b.read(t, rps), "1") })

	cmd := exec.Command(flock, filepath.Join(sd, "lock"), "-c", "echo locked; sleep 3")
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	line := make([]byte, 7)
	if _, err := stdout.Read(line); err != nil {
		t.Fatalf("flock: %v", err)
	}
	b.write(t, rps, "0")
	if err := cmd.Wait(); err != nil {
		t.Fatalf("flock: %v", err)
	}
	waitFor(t, 10*time.Second, "drift repaired after the lock is free", func() bool { return strings.HasSuffix(b.read(t, rps), "1") })
	st := p.status(t)
	if len(st.Frozen) != 0 {
		t.Errorf("frozen after one drift behind a held lock: %+v", st.Frozen)
	}
	if len(st.Repairs) != 1 {
		t.Errorf("%d repairs for one drift, want 1: %+v", len(st.Repairs), st.Repairs)
	}
	log := p.log.String()
	if !strings.Contains(log, fmt.Sprintf("pid %d, flock", cmd.Process.Pid)) {
		t.Errorf("no error names flock (pid %d) as the lock's holder:\n%s", cmd.Process.Pid, log)
	}
	if strings.Contains(log, fmt.Sprintf("(pid %d", p.cmd.Process.Pid)) {
		t.Errorf("an error names the agent (pid %d) as the lock's holder:\n%s", p.cmd.Process.Pid, log)
	}
}

// agentCPU is the CPU time (user+system) of process pid.
func agentCPU(t *testing.T, pid int) time.Duration {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	ut, _ := strconv.ParseInt(f[11], 10, 64) // fields 14, 15 of stat(5)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	const clkTck = 100 // USER_HZ on Linux
	return time.Duration(ut+st) * time.Second / clkTck
}

// Churn soak: the plan's device is deleted and re-added, and an unrelated
// veth comes and goes, every 1–2 s, for IRQPILOT_SOAK (default 40 s). The
// agent survives, converges the device every time without counting drift,
// keeps its journals bounded by --keep-journals, and its CPU use at the
// end is logged beside the start's (measured, not asserted).
func TestLiveChurnSoak(t *testing.T) {
	livetest.NeedRoot(t)
	dur := 40 * time.Second
	if s := os.Getenv("IRQPILOT_SOAK"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil {
			t.Fatalf("IRQPILOT_SOAK=%q: %v", s, err)
		}
		dur = d
	}
	b := newBed(t, 2)
	livetest.Veth(t, b.ns, "vc0", "vd0", 1)
	pf := writePlan(t, `version: 1
rx_queues:
  - device: va0
    rps_cpus: "0"
    rps_flow_cnt: 256
    reason: churn soak
  - device: vc0
    rps_cpus: "0"
    reason: churn soak
tx_queues:
  - device: va0
    xps_cpus: "0"
    reason: churn soak
`)
	sd := mkState(t)
	const keep = 5
	p := startAgent(t, b.ns, sd, "--plan", pf, "--interval", "1s", "--listen", "", "--keep-journals", strconv.Itoa(keep))
	pid := p.cmd.Process.Pid
	converged := func() bool {
		return strings.HasSuffix(b.read(t, "/sys/class/net/va0/queues/rx-1/rps_cpus"), "1") &&
			b.read(t, "/sys/class/net/va0/queues/rx-1/rps_flow_cnt") == "256"
	}
	waitFor(t, 10*time.Second, "plan applied", converged)

	window := min(dur/4, time.Minute)
	type mark struct {
		at       time.Time
		cpu      time.Duration
		journals int
	}
	measure := func() mark {
		all, _ := journalFiles(t, sd)
		return mark{time.Now(), agentCPU(t, pid), all}
	}
	var marks []mark
	start := time.Now()
	marks = append(marks, measure())
	present, cycles, maxJournals := true, 0, 0
	for i := 0; time.Since(start) < dur; i++ {
		select {
		case <-p.done:
			t.Fatalf("agent exited during churn: %v\n%s", p.err, p.log)
		default:
		}
		if present {
			run(t, "ip", "-n", b.ns, "link", "del", "va0")
		} else {
			b.addVeth(t)
			cycles++
		}
		present = !present
		other := fmt.Sprintf("vx%d", i%4)
		if i%8 < 4 {
			run(t, "ip", "-n", b.ns, "link", "add", other, "type", "veth", "peer", "name", other+"p")
		} else {
			run(t, "ip", "-n", b.ns, "link", "del", other)
		}
		time.Sleep(time.Second + rand.N(time.Second))
		if all, _ := journalFiles(t, sd); all > maxJournals {
			maxJournals = all
		}
		if len(marks) == 1 && time.Since(start) >= window {
			marks = append(marks, measure())
		}
		if len(marks) == 2 && time.Since(start) >= dur-window {
			marks = append(marks, measure())
		}
	}
	if !present {
		b.addVeth(t)
		cycles++
	}
	marks = append(marks, measure())
	waitFor(t, 10*time.Second, "va0 converged after the churn", converged)
	if len(marks) < 4 {
		t.Fatalf("soak too short to measure both ends (%s)", dur)
	}
	rate := func(a, b mark) float64 { return 100 * float64(b.cpu-a.cpu) / float64(b.at.Sub(a.at)) }
	t.Logf("churn %s: %d re-creations of va0; agent CPU %.2f%% over the first %s, %.2f%% over the last; journals %d after the first %s, %d at the end (most %d; --keep-journals %d)",
		dur.Round(time.Second), cycles, rate(marks[0], marks[1]), window, rate(marks[2], marks[3]), marks[1].journals, window, marks[3].journals, maxJournals, keep)

	st := p.status(t)
	if len(st.Repairs) != 0 || len(st.Frozen) != 0 {
		t.Errorf("churn counted as drift: %d repairs, frozen %+v", len(st.Repairs), st.Frozen)
	}
	if st.LastError != "" {
		t.Errorf("last error after the churn: %s", st.LastError)
	}
	// Bounded: finished journals ≤ keep, journals of gone incarnations ≤
	// keep, and the live devices' (the first pass's, va0's newest).
	if bound := 2*keep + 2; maxJournals > bound {
		t.Errorf("up to %d journals during %d re-creations; want at most %d", maxJournals, cycles, bound)
	}
	if strings.Contains(p.log.String(), `level=ERROR`) {
		t.Errorf("errors during the churn:\n%s", grepLines(p.log.String(), "level=ERROR"))
	}
}
