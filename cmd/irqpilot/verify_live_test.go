package main

import (
	"encoding/json"
	"fmt"
	"math"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/irqpilot/irqpilot/internal/cpuset"
	"github.com/irqpilot/irqpilot/internal/kernel"
	"github.com/irqpilot/irqpilot/internal/livetest"
	"github.com/irqpilot/irqpilot/internal/load"
	"github.com/irqpilot/irqpilot/internal/plan"
	"github.com/irqpilot/irqpilot/internal/verify"
	"unsafe"
)

// coreBottleneck is the sources' core-0 bottleneck on this machine, in two
// namespaces of the test's own: a single-queue veth pair between a sender
// namespace and a receiver namespace, a UDP GSO sender pinned to CPU 0 and
// a bound socket in the receiver that is never read. veth hands each packet
// to the receiving device with netif_rx on the sending CPU, so with RPS off
// CPU 0 runs the sender and all of the receive softirq work; rps_cpus on
// the receiving veth's rx-0 moves the receive work to the CPUs it names.
type coreBottleneck struct {
	t              *testing.T
	sendNS, recvNS string
	recvDev        string
	exec           []string // ip netns exec recvNS
	// plain: the sender writes one 1400-byte datagram per send (no UDP
	// GSO), so each send is one packet to dispatch; measurements only.
	plain bool
}

// senderCPU is the CPU the sender is pinned to.
const senderCPU = 0

func newCoreBottleneck(t *testing.T) *coreBottleneck {
	t.Helper()
	livetest.NeedRoot(t, "ip")
	if runtime.NumCPU() < 2 {
		t.Skip("needs two CPUs")
	}
	b := &coreBottleneck{t: t, sendNS: livetest.Netns(t, livetest.Name("lv-s-")), recvNS: livetest.Netns(t, livetest.Name("lv-r-"))}
	sendDev, recvDev := livetest.Name("lv-s"), livetest.Name("lv-r")
	b.recvDev = recvDev
	b.exec = []string{"ip", "netns", "exec", b.recvNS}
	livetest.Run(t, "ip", "link", "add", sendDev, "netns", b.sendNS, "numrxqueues", "1", "numtxqueues", "1", "type", "veth",
		"peer", "name", recvDev, "netns", b.recvNS, "numrxqueues", "1", "numtxqueues", "1")
	livetest.Run(t, "ip", "-n", b.sendNS, "addr", "add", "10.233.0.1/24", "dev", sendDev)
	livetest.Run(t, "ip", "-n", b.recvNS, "addr", "add", "10.233.0.2/24", "dev", recvDev)
	livetest.Run(t, "ip", "-n", b.sendNS, "link", "set", sendDev, "up")
	livetest.Run(t, "ip", "-n", b.recvNS, "link", "set", recvDev, "up")
	b.setRPS("0")
	// The receiver: bound, never read, so each packet runs the whole
	// receive path and is dropped at the socket.
	var rx *net.UDPConn
	if err := kernel.InNetns(b.recvNS, func() error {
		c, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(10, 233, 0, 2), Port: 9000})
		rx = c
		return err
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rx.Close() })
	return b
}

// rpsPath is the receiving veth's rx-0 rps_cpus file (seen inside recvNS).
func (b *coreBottleneck) rpsPath() string {
	return "/sys/class/net/" + b.recvDev + "/queues/rx-0/rps_cpus"
}

// rps is the receiving veth's rx-0 rps_cpus mask as the kernel prints it.
func (b *coreBottleneck) rps() string {
	b.t.Helper()
	out, err := exec.Command("ip", "netns", "exec", b.recvNS, "cat", b.rpsPath()).Output()
	if err != nil {
		b.t.Fatalf("read %s: %v", b.rpsPath(), err)
	}
	return strings.TrimSpace(string(out))
}

func (b *coreBottleneck) setRPS(mask string) {
	b.t.Helper()
	livetest.Run(b.t, "ip", "netns", "exec", b.recvNS, "sh", "-c", "echo "+mask+" > "+b.rpsPath())
}

// sender is the UDP flood: a thread of this process pinned to senderCPU in
// sendNS, 16 connected sockets (flows) with UDP GSO so that one send(2)
// makes 40 packets of receive work. rate bounds the sends per second (0:
// as fast as the CPU allows); setRate changes it, stop ends the flood and
// reports the sends per second achieved.
type sender struct {
	tid  atomic.Int64  // the sending thread
	rate atomic.Uint64 // sends/s, float64 bits
	sent atomic.Int64
	done chan struct{}
	wg   sync.WaitGroup
	err  error
	t0   time.Time
}

func (b *coreBottleneck) send(rate float64) *sender {
	b.t.Helper()
	s := &sender{done: make(chan struct{}), t0: time.Now()}
	s.setRate(rate)
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		s.err = kernel.InNetns(b.sendNS, func() error {
			s.tid.Store(int64(unix.Gettid()))
			var one, all unix.CPUSet
			one.Set(senderCPU)
			if err := unix.SchedGetaffinity(0, &all); err != nil {
				return err
			}
			if err := unix.SchedSetaffinity(0, &one); err != nil {
				return err
			}
			// The thread goes back to the runtime's pool afterwards.
			defer unix.SchedSetaffinity(0, &all) //nolint:errcheck
			var fds []int
			defer func() {
				for _, fd := range fds {
					unix.Close(fd)
				}
			}()
			for i := 0; i < 16; i++ {
				fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM, 0)
				if err != nil {
					return err
				}
				fds = append(fds, fd)
				if b.plain {
					// one datagram, one packet
				} else if err := unix.SetsockoptInt(fd, unix.IPPROTO_UDP, unix.UDP_SEGMENT, 1400); err != nil {
					return fmt.Errorf("UDP_SEGMENT: %w", err)
				}
				if err := unix.Connect(fd, &unix.SockaddrInet4{Port: 9000, Addr: [4]byte{10, 233, 0, 2}}); err != nil {
					return err
				}
			}
			buf := make([]byte, 56000)
			if b.plain {
				buf = buf[:1400]
			}
			// Paced: no more sends than the rate allows since the rate
			// was last set.
			var base int64
			since := time.Now()
			last := s.rate.Load()
			for i := 0; ; i++ {
				if i%64 == 0 {
					select {
					case <-s.done:
						return nil
					default:
					}
				}
				if r := s.rate.Load(); r != last {
					last, base, since = r, s.sent.Load(), time.Now()
				}
				rate := math.Float64frombits(last)
				if rate > 0 {
					due := rate * time.Since(since).Seconds()
					if float64(s.sent.Load()-base) > due {
						time.Sleep(200 * time.Microsecond)
						continue
					}
					// Behind by more than 50 ms of sends (another
					// process held the CPU): forgive the debt
					// rather than burst to catch up.
					if lag := due - float64(s.sent.Load()-base); lag > rate/20 {
						base += int64(-lag)
					}
				}
				if _, err := rawWrite(fds[i%len(fds)], buf); err != nil && err != syscall.ECONNREFUSED && err != syscall.ENOBUFS && err != syscall.EAGAIN {
					return err
				}
				s.sent.Add(1)
			}
		})
	}()
	b.t.Cleanup(func() { s.stop() })
	return s
}

func (s *sender) setRate(r float64) { s.rate.Store(math.Float64bits(r)) }

// stop ends the flood (once) and returns the sends per second since it began.
func (s *sender) stop() float64 {
	select {
	case <-s.done:
	default:
		close(s.done)
	}
	s.wg.Wait()
	return float64(s.sent.Load()) / time.Since(s.t0).Seconds()
}

// saturatingRate is the send rate the sender reaches unpaced with RPS off:
// CPU 0 then runs both the sender and the receive work and is saturated.
func (b *coreBottleneck) saturatingRate() float64 {
	b.t.Helper()
	s := b.send(0)
	time.Sleep(500 * time.Millisecond)
	n0, t0 := s.sent.Load(), time.Now()
	time.Sleep(2 * time.Second)
	rate := float64(s.sent.Load()-n0) / time.Since(t0).Seconds()
	s.stop()
	if s.err != nil {
		b.t.Fatalf("sender: %v", s.err)
	}
	return rate
}

// irqpilot runs irqpilot (this test binary) inside the receiver's
// namespace and returns stdout, stderr and the exit status.
func (b *coreBottleneck) irqpilot(args ...string) (string, string, int) {
	b.t.Helper()
	out, errOut, err := runCmd(selfCmd(b.exec, args...))
	code := exitCode(err)
	if code < 0 {
		b.t.Fatalf("irqpilot %s: %v\n%s", strings.Join(args, " "), err, errOut)
	}
	return out, errOut, code
}

// verifyOutput is what the tests read of apply --verify --json and
// verify --json.
type verifyOutput struct {
	Journal      string `json:"journal"`
	Changed      int    `json:"changed"`
	Verification *struct {
		Verdict       string      `json:"verdict"`
		Reason        string      `json:"reason"`
		Note          string      `json:"note"`
		Repredicted   string      `json:"repredicted"`
		Journal       string      `json:"journal"`
		Reverted      bool        `json:"reverted"`
		Source        string      `json:"cost_source"`
		TrafficBefore float64     `json:"traffic_before_pps"`
		TrafficAfter  float64     `json:"traffic_after_pps"`
		Seconds       float64     `json:"window_seconds"`
		MeanBusy      float64     `json:"mean_abs_busy_error_pct"`
		MaxBusy       float64     `json:"max_abs_busy_error_pct"`
		MeanIRQ       float64     `json:"mean_abs_irq_error_pct"`
		MaxIRQ        float64     `json:"max_abs_irq_error_pct"`
		CPUs          []verifyCPU `json:"cpus"`
	} `json:"verification"`
}

func parseVerify(t *testing.T, out string) *verifyOutput {
	t.Helper()
	var v verifyOutput
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	return &v
}

// table is a verification's rows for the test log.
func (v *verifyOutput) table() string {
	if v.Verification == nil {
		return "(no verification)"
	}
	var b strings.Builder
	x := v.Verification
	fmt.Fprintf(&b, "verdict %s: %s\n", x.Verdict, x.Reason)
	fmt.Fprintf(&b, "packets/s %.0f before, %.0f after; cost %s; note %q\n", x.TrafficBefore, x.TrafficAfter, x.Source, x.Note)
	for _, c := range x.CPUs {
		fmt.Fprintf(&b, "CPU%d busy %.1f → predicted %.1f measured %.1f (%+.1f)  irq %.1f → predicted %.1f measured %.1f (%+.1f)  noise %.1f\n",
			c.CPU, c.BeforeBusy, c.PredictedBusy, c.MeasuredBusy, c.BusyError, c.BeforeIRQ, c.PredictedIRQ, c.MeasuredIRQ, c.IRQError, c.Noise)
	}
	return b.String()
}

func writePlan(t *testing.T, body string) string {
	t.Helper()
	f := filepath.Join(t.TempDir(), "plan.yaml")
	if err := os.WriteFile(f, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return f
}

// verdictExits are the documented exit statuses of apply --verify and verify.
var verdictExits = map[string]int{"confirmed": 0, "missed": 3, "worse": 4, "inconclusive": 5}

// check asserts what every verification must carry: the exit status of its
// verdict, a row per CPU with the before, predicted and measured figures
// and their errors, and the journal it verified.
func (v *verifyOutput) check(t *testing.T, code int, journal string) {
	t.Helper()
	x := v.Verification
	if x == nil {
		t.Fatalf("no verification in the output (exit %d)", code)
	}
	if want, ok := verdictExits[x.Verdict]; !ok || code != want {
		t.Errorf("verdict %q with exit status %d, want %d", x.Verdict, code, want)
	}
	if x.Reason == "" || x.Seconds <= 0 || (x.Source != "bpf" && x.Source != "counts") {
		t.Errorf("verification without reason, window or cost source: %+v", x)
	}
	if journal != "" && x.Journal != journal {
		t.Errorf("verification of journal %q, want %q", x.Journal, journal)
	}
	if len(x.CPUs) != runtime.NumCPU() {
		t.Fatalf("%d rows, want one per CPU (%d):\n%s", len(x.CPUs), runtime.NumCPU(), v.table())
	}
	for _, c := range x.CPUs {
		// A prediction above 100 % busy is compared as a full CPU, what
		// can be measured of it (docs/json.md).
		if d := math.Abs(c.MeasuredBusy - math.Min(c.PredictedBusy, 100) - c.BusyError); d > 0.11 {
			t.Errorf("CPU%d busy error %.1f is not measured %.1f minus predicted %.1f (at most 100)", c.CPU, c.BusyError, c.MeasuredBusy, c.PredictedBusy)
		}
		if d := math.Abs(c.MeasuredIRQ - c.PredictedIRQ - c.IRQError); d > 0.11 {
			t.Errorf("CPU%d interrupt error %.1f is not measured %.1f minus predicted %.1f", c.CPU, c.IRQError, c.MeasuredIRQ, c.PredictedIRQ)
		}
		if c.Noise < 2 || c.BeforeBusy < 0 || c.MeasuredBusy < 0 || c.MeasuredIRQ > c.MeasuredBusy+0.11 {
			t.Errorf("CPU%d row %+v", c.CPU, c)
		}
	}
}

// cpu is the verification's row of CPU c.
func (v *verifyOutput) cpu(c int) (before, predicted, measured, beforeIRQ, predictedIRQ, measuredIRQ float64) {
	for _, r := range v.Verification.CPUs {
		if r.CPU == c {
			return r.BeforeBusy, r.PredictedBusy, r.MeasuredBusy, r.BeforeIRQ, r.PredictedIRQ, r.MeasuredIRQ
		}
	}
	return
}

// senderGrew says how the verification missed only by the sender's own
// time on CPU 0 growing, "" when it missed otherwise: every other figure
// within the tolerance plus its noise (CPU 0's and CPU 1's interrupt time,
// CPU 1's busy time), and CPU 0's busy time measured above the prediction
// by no more than its time besides interrupts grew, plus the tolerance and
// its noise. With RPS handing a
// GSO veth's packets to CPU 1, the sending thread's system time on CPU 0
// was measured growing by 17 to 24 points at about 30,000 sends/s, which
// the model does not count.
func (v *verifyOutput) senderGrew() string {
	const tol = 10
	var c0, c1 *verifyCPU
	for i := range v.Verification.CPUs {
		switch r := &v.Verification.CPUs[i]; r.CPU {
		case 0:
			c0 = r
		case 1:
			c1 = r
		}
	}
	if c0 == nil || c1 == nil || !c1.Within || math.Abs(c0.IRQError) > tol+c0.IRQNoise {
		return ""
	}
	grew := (c0.MeasuredBusy - c0.MeasuredIRQ) - (c0.BeforeBusy - c0.BeforeIRQ)
	if c0.BusyError <= 0 || c0.BusyError-tol-c0.Noise > grew {
		return ""
	}
	return fmt.Sprintf("CPU 0 busy %.1f%% measured, %.1f%% predicted; its time besides interrupts grew by %.1f points; interrupt time within the tolerance on both CPUs, CPU 1 within it",
		c0.MeasuredBusy, c0.PredictedBusy, grew)
}

// verifyCPU is one row of verifyOutput's verification: the product's own
// row type, read back from its JSON.
type verifyCPU = verify.CPU

// disturbed says how another process disturbed a verification of the
// core-0 bottleneck, "" when nothing did: the receive work is all
// interrupt time, so CPU 1's other time (busy minus interrupts) is not ours
// and the sender uses at most half of CPU 0 besides its interrupts; a
// packet rate that moved is the workload changing.
func (v *verifyOutput) disturbed() string {
	x := v.Verification
	if x.Verdict == "inconclusive" {
		return "the packet rate moved: " + x.Reason
	}
	b0, _, m0, bi0, _, mi0 := v.cpu(0)
	b1, _, m1, bi1, _, mi1 := v.cpu(1)
	switch {
	case b1-bi1 > 20 || m1-mi1 > 20:
		return fmt.Sprintf("other processes ran on CPU 1 (%.0f%% then %.0f%% busy besides interrupts)", b1-bi1, m1-mi1)
	case b0-bi0 > 50 || m0-mi0 > 50:
		return fmt.Sprintf("other processes ran on CPU 0 (%.0f%% then %.0f%% busy besides interrupts)", b0-bi0, m0-mi0)
	}
	return ""
}

// Point 7, live: the core-0 bottleneck at a rate the machine carries both
// ways. auto plans, from the measured load, RPS on the receiving veth's
// rx-0 to CPU 1 (or, when auto keeps the machine as it is, the same move
// by hand); apply --verify measures before, applies in the receiver's
// namespace, measures after and confirms the prediction: CPU 0's interrupt
// time falls, CPU 1's rises, each within the tolerance. Another process
// loading a CPU makes the verdict inconclusive or off, rightly: such
// attempts are retried; each attempt's verdict (its exit status and
// reason) and revert are asserted, and when no attempt was quiet the test
// skips, saying that the move itself was not checked.
// An attempt that was quiet must confirm, or miss only by the sender's own
// time on CPU 0 (senderGrew: a term the model lacks, named in
// docs/benchmarks.md), the interrupt time moved as predicted either way.
// Then 'verify --journal' checks the journal's prediction again, later.
func TestLiveApplyVerifyConfirmsRPSMove(t *testing.T) {
	b := newCoreBottleneck(t)
	state := stateDir(t)
	var tables []string
	for attempt := 1; attempt <= 4; attempt++ {
		// Start when CPU 1 is quiet (up to 30 s): the move needs its
		// spare time.
		for i := 0; i < 10 && !cpu1Idle(t, 70); i++ {
			time.Sleep(2 * time.Second)
		}
		// Offer 60 % of what saturates CPU 0 with RPS off: carried
		// before and after the change, so the packet rate holds.
		sat := b.saturatingRate()
		s := b.send(0.6 * sat)
		time.Sleep(700 * time.Millisecond)
		planFile, how := b.autoOrHand(t)
		out, errOut, code := b.irqpilot("--json", "apply", "--verify=3s", "--state-dir", state, planFile)
		if code != 0 && code < 3 {
			s.stop()
			t.Fatalf("apply --verify: exit %d\n%s%s", code, out, errOut)
		}
		v := parseVerify(t, out)
		v.check(t, code, v.Journal)
		if v.Changed != 1 || v.Journal == "" || b.rps() == "0" {
			t.Fatalf("apply changed %d settings (journal %q), rps_cpus now %s", v.Changed, v.Journal, b.rps())
		}
		t.Logf("attempt %d (%s plan, offered %.0f sends/s of %.0f):\n%s", attempt, how, 0.6*sat, sat, v.table())
		tables = append(tables, v.table())
		x := v.Verification
		// Disturbed first: another process's work on a CPU (other test
		// packages run beside this one) is in every figure, whatever the
		// verdict; the move is judged only on a quiet attempt.
		why := v.disturbed()
		if x.Verdict == "confirmed" && why == "" {
			_, _, _, bi0, pi0, mi0 := v.cpu(0)
			_, _, _, bi1, pi1, mi1 := v.cpu(1)
			if !(mi0 < bi0/2 && pi0 < bi0/2 && bi0 > 10) {
				t.Errorf("CPU 0's interrupt time %.1f%% before, predicted %.1f%%, measured %.1f%%: the move did not take the receive work off it", bi0, pi0, mi0)
			}
			if !(mi1 > bi1+10 && pi1 > bi1+10) {
				t.Errorf("CPU 1's interrupt time %.1f%% before, predicted %.1f%%, measured %.1f%%: the receive work did not arrive", bi1, pi1, mi1)
			}
			b.verifyJournalLater(t, state, v.Journal)
			s.stop()
			return
		}
		if grew := v.senderGrew(); x.Verdict == "missed" && grew != "" && why == "" {
			// The model's missing term (docs/benchmarks.md, "The terms
			// that are still wrong"): the receive work moved as
			// predicted, and the sender's own time on CPU 0 grew.
			t.Logf("attempt %d: missed only by the sender's own time: %s", attempt, grew)
			_, _, _, bi0, pi0, mi0 := v.cpu(0)
			_, _, _, bi1, pi1, mi1 := v.cpu(1)
			if !(mi0 < bi0/2 && pi0 < bi0/2 && bi0 > 10) || !(mi1 > bi1+10 && pi1 > bi1+10) {
				t.Errorf("interrupt time CPU 0 %.1f%% → predicted %.1f%%, measured %.1f%%; CPU 1 %.1f%% → %.1f%%, %.1f%%: not the receive work's move", bi0, pi0, mi0, bi1, pi1, mi1)
			}
			b.verifyJournalLater(t, state, v.Journal)
			s.stop()
			return
		}
		s.stop()
		if _, errOut, code := b.irqpilot("revert", "--state-dir", state); code != 0 || strings.Trim(b.rps(), "0,") != "" {
			t.Fatalf("revert: exit %d, rps_cpus %s\n%s", code, b.rps(), errOut)
		}
		if why == "" {
			t.Errorf("attempt %d: nothing disturbed the machine, and the verdict is %s: %s\n%s", attempt, x.Verdict, x.Reason, v.table())
			return
		}
		// Disturbed: the verdict is the product's answer to a moving
		// machine, and its exit status was checked above; it must say why.
		if x.Reason == "" {
			t.Errorf("attempt %d: verdict %s without a reason", attempt, x.Verdict)
		}
		t.Logf("attempt %d disturbed (%s); again", attempt, why)
	}
	// Every attempt was disturbed by other processes: what was asserted is
	// that apply --verify said so (its exit status and reason) and that
	// revert restored the machine; the move itself was not checked, which
	// the skip says.
	t.Skipf("other processes disturbed every attempt; the verdicts and reverts were checked, the move was not:\n%s", strings.Join(tables, "\n"))
}

// autoOrHand is the plan for the move: auto's, made in the receiver's
// namespace from a measurement of the running flood, when it moves the
// receive work; else (auto rightly keeps a machine whose CPU 1 another
// process loads, or finds the gain marginal) the same move by hand.
func (b *coreBottleneck) autoOrHand(t *testing.T) (file, how string) {
	t.Helper()
	file, p := b.sampledPlan(t, "auto")
	for _, e := range p.RxQueues {
		if e.Device == b.recvDev && e.RPSCPUs != nil && e.RPSCPUs.Contains(1) && !e.RPSCPUs.Contains(senderCPU) {
			if p.Prediction == nil {
				t.Errorf("auto's plan made from a measurement carries no prediction")
			}
			return file, "auto"
		}
	}
	t.Logf("auto keeps the machine as it is: %s", p.Why)
	return writePlan(t, "version: 1\nrx_queues:\n  - {device: "+b.recvDev+", queue: 0, rps_cpus: 1, reason: receive work off the sender's CPU}\n"), "hand"
}

// verifyJournalLater runs 'verify --journal ID' while the flood still
// runs: the journal kept the prediction, so the change is checked again
// against it (the before is the prediction's). The machine may have been
// disturbed since; the verdict must still be one of the four with its
// exit status and the rows.
func (b *coreBottleneck) verifyJournalLater(t *testing.T, state, journal string) {
	t.Helper()
	text, _, code := b.irqpilot("verify", "--journal", journal, "--duration", "2s", "--state-dir", state)
	t.Logf("verify --journal %s: exit %d\n%s", journal, code, text)
	if m := regexp.MustCompile(`(?m)^verdict: (\w+) — `).FindStringSubmatch(text); m == nil || verdictExits[m[1]] != code {
		t.Errorf("verify's text: no verdict line for exit status %d", code)
	}
	out, errOut, code := b.irqpilot("--json", "verify", "--journal", journal, "--duration", "2s", "--state-dir", state)
	if code != 0 && code < 3 {
		t.Fatalf("verify --journal %s: exit %d\n%s%s", journal, code, out, errOut)
	}
	v := parseVerify(t, out)
	v.check(t, code, journal)
	t.Logf("verify --journal %s:\n%s", journal, v.table())
	if !strings.Contains(v.Verification.Note, "before is the measurement journal "+journal) {
		t.Errorf("verify does not say where its before comes from: %q", v.Verification.Note)
	}
}

// handMove is the move by hand: RPS on the receiving veth's rx-0 to CPU 1.
func (b *coreBottleneck) handMove() *plan.Plan {
	one := cpuset.Of(1)
	q := 0
	return &plan.Plan{Version: 1, RxQueues: []plan.RxQueueEntry{{Device: b.recvDev, Queue: &q, RPSCPUs: &one, Reason: "receive work off the sender's CPU"}}}
}

// withPrediction writes the hand move carrying a prediction of its own:
// the before measured now by 'plan --sample' (so the prediction describes
// the machine and apply --verify keeps it), the after as edit makes it from
// a prediction that nothing changes. It returns the file and the --cost
// the prediction was measured with, for apply to measure alike.
func (b *coreBottleneck) withPrediction(t *testing.T, edit func(p *plan.Prediction)) (file, cost string) {
	t.Helper()
	_, m := b.sampledPlan(t, "rps-spread")
	pred := m.Prediction
	if pred == nil || len(pred.CPUs) != runtime.NumCPU() {
		t.Fatalf("a plan made from a measurement carries no prediction for every CPU: %+v", pred)
	}
	for i := range pred.CPUs {
		c := &pred.CPUs[i]
		c.PredictedBusy, c.PredictedIRQ = c.BeforeBusy, c.BeforeIRQ
	}
	edit(pred)
	p := b.handMove()
	p.Prediction = pred
	data, err := p.MarshalFile()
	if err != nil {
		t.Fatal(err)
	}
	return writePlan(t, string(data)), pred.Source
}

// flood starts the sender at 60 % of the rate that saturates CPU 0 with
// RPS off: a rate the machine carries before and after the move.
func (b *coreBottleneck) flood() *sender {
	b.t.Helper()
	s := b.send(0.6 * b.saturatingRate())
	time.Sleep(700 * time.Millisecond)
	return s
}

// rpsOff says whether the receiving veth's RPS is off again (as before
// the change).
func (b *coreBottleneck) rpsOff() bool { return strings.Trim(b.rps(), "0,") == "" }

// Live: the workload stops between the measurement before the change and
// the one after (the sender ends as soon as rps_cpus changes): the verdict
// is inconclusive, with exit status 5, whatever was predicted.
func TestLiveApplyVerifyInconclusiveWhenTrafficStops(t *testing.T) {
	b := newCoreBottleneck(t)
	state := stateDir(t)
	for attempt := 1; ; attempt++ {
		s := b.flood()
		stopped := make(chan struct{})
		go func() {
			defer close(stopped)
			for b.rpsOff() {
				time.Sleep(20 * time.Millisecond)
			}
			s.stop()
		}()
		out, errOut, code := b.irqpilot("--json", "apply", "--verify=2s", "--state-dir", state, writePlanFile(t, b.handMove()))
		<-stopped
		v := b.judgedThenReverted(t, state, attempt, out, errOut, code)
		x := v.Verification
		if x.Verdict == "inconclusive" && strings.Contains(x.Reason, "the workload changed") && code == 5 {
			if x.TrafficAfter >= x.TrafficBefore {
				t.Errorf("the flood stopped, yet %.0f packets/s before and %.0f after", x.TrafficBefore, x.TrafficAfter)
			}
			return
		}
		// Only other traffic growing by as much as the flood could
		// hide it; that does not happen three times.
		if attempt == 3 {
			t.Fatalf("the flood stopped between the windows, and the verdict is %s (exit %d): %s", x.Verdict, code, x.Reason)
		}
	}
}

// sampledPlan writes policy's plan for the receiving veth, made from a
// 2 s measurement (so it carries a prediction), and reads it back.
func (b *coreBottleneck) sampledPlan(t *testing.T, policy string) (string, *plan.Plan) {
	t.Helper()
	file := filepath.Join(t.TempDir(), policy+".yaml")
	out, errOut, code := b.irqpilot("plan", "--policy", policy, "--device", b.recvDev, "--sample", "2s", "-o", file)
	if code != 0 {
		t.Fatalf("plan --policy %s --sample: exit %d\n%s%s", policy, code, out, errOut)
	}
	p, err := plan.LoadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	return file, p
}

// judgedThenReverted reads the verification apply --verify --json printed
// (exit status code, a verdict's), checks it, logs it as attempt's, and
// reverts the change: rps_cpus must be off again.
func (b *coreBottleneck) judgedThenReverted(t *testing.T, state string, attempt int, out, errOut string, code int) *verifyOutput {
	t.Helper()
	if code != 0 && code < 3 {
		t.Fatalf("apply --verify: exit %d\n%s%s", code, out, errOut)
	}
	v := parseVerify(t, out)
	v.check(t, code, v.Journal)
	t.Logf("attempt %d:\n%s", attempt, v.table())
	if _, errOut, code := b.irqpilot("revert", "--state-dir", state); code != 0 || !b.rpsOff() {
		t.Fatalf("revert: exit %d, rps_cpus %s\n%s", code, b.rps(), errOut)
	}
	return v
}

func writePlanFile(t *testing.T, p *plan.Plan) string {
	t.Helper()
	data, err := p.MarshalFile()
	if err != nil {
		t.Fatal(err)
	}
	return writePlan(t, string(data))
}

// Live: the plan carries a prediction whose before is the machine as
// measured and whose after says the move loads CPU 0 with 25 more points of
// interrupt time; the move takes the receive work off CPU 0 instead, so the
// figure moves the wrong way beyond the noise: worse, exit status 4, and
// with --revert-if worse the change is undone by itself, says so, and
// rps_cpus is back to its old value.
func TestLiveApplyVerifyWorseReverts(t *testing.T) {
	b := newCoreBottleneck(t)
	state := stateDir(t)
	var seen []string
	for attempt := 1; attempt <= 3; attempt++ {
		s := b.flood()
		file, cost := b.withPrediction(t, func(p *plan.Prediction) {
			c := p.CPU(senderCPU)
			c.PredictedBusy += 25
			c.PredictedIRQ += 25
		})
		out, errOut, code := b.irqpilot("apply", "--verify=2s", "--revert-if", "worse", "--cost", cost, "--state-dir", state, file)
		s.stop()
		t.Logf("attempt %d: exit %d\n%s%s", attempt, code, out, errOut)
		if code != 0 && code < 3 {
			t.Fatalf("apply --verify: exit %d\n%s%s", code, out, errOut)
		}
		verdict := regexp.MustCompile(`(?m)^verdict: (\w+) — (.*)$`).FindStringSubmatch(out)
		if verdict == nil {
			t.Fatalf("no verdict line in\n%s", out)
		}
		if want := verdictExits[verdict[1]]; code != want {
			t.Errorf("verdict %s, exit %d, want %d", verdict[1], code, want)
		}
		if verdict[1] == "worse" {
			if !strings.Contains(verdict[2], "CPU 0 interrupt time") && !strings.Contains(verdict[2], "CPU 0 busy") {
				t.Errorf("worse, but not for CPU 0 moving the wrong way: %s", verdict[2])
			}
			if !regexp.MustCompile(`(?m)^reverted: journal \S+ \(--revert-if worse\); the settings are as they were before the change$`).MatchString(out) {
				t.Errorf("worse with --revert-if worse, and the output does not say it reverted:\n%s", out)
			}
			if !b.rpsOff() {
				t.Errorf("reverted, yet rps_cpus is %s, not off as before", b.rps())
			}
			return
		}
		if strings.Contains(out, "reverted:") {
			t.Errorf("verdict %s, and yet reverted (--revert-if worse):\n%s", verdict[1], out)
		}
		if _, errOut, code := b.irqpilot("revert", "--state-dir", state); code != 0 || !b.rpsOff() {
			t.Fatalf("revert: exit %d, rps_cpus %s\n%s", code, b.rps(), errOut)
		}
		// The plan's prediction no longer described the machine (another
		// process changed it since 'plan' measured, so it was predicted
		// again), or the packet rate moved.
		if !strings.Contains(out, "the plan's prediction was made on another load") && verdict[1] != "inconclusive" {
			t.Fatalf("the plan's own prediction was judged, CPU 0's interrupt time fell, and the verdict is %s: %s", verdict[1], verdict[2])
		}
		seen = append(seen, verdict[1]+": "+verdict[2])
	}
	t.Skipf("other processes changed the machine in every attempt: %s", strings.Join(seen, "; "))
}

// Live: the plan's own prediction says the move takes CPU 0's interrupt
// work to CPU 1 and 40 points more with it (as if each packet cost far more
// on CPU 1); the move takes the work there at about its cost: every figure
// moved the way predicted, CPU 1 by far less — missed, exit status 3.
// Another process filling CPU 1 makes it worse by the headroom rule
// instead, rightly: retried.
func TestLiveApplyVerifyMissed(t *testing.T) {
	b := newCoreBottleneck(t)
	state := stateDir(t)
	var seen []string
	for attempt := 1; attempt <= 3; attempt++ {
		s := b.flood()
		file, cost := b.withPrediction(t, func(p *plan.Prediction) {
			c0, c1 := p.CPU(senderCPU), p.CPU(1)
			c0.PredictedBusy -= c0.BeforeIRQ
			c0.PredictedIRQ = 0
			c1.PredictedBusy += c0.BeforeIRQ + 40
			c1.PredictedIRQ += c0.BeforeIRQ + 40
		})
		out, errOut, code := b.irqpilot("--json", "apply", "--verify=2s", "--cost", cost, "--state-dir", state, file)
		s.stop()
		v := b.judgedThenReverted(t, state, attempt, out, errOut, code)
		x := v.Verification
		// Predicted again (the load changed between the plan and the
		// change): the verdict judges the model's prediction, not the
		// wrong one this plan carries, so it says nothing here.
		if x.Verdict == "missed" && x.Repredicted == "" {
			if !strings.Contains(x.Reason, "CPU 1") || !strings.Contains(x.Reason, "every figure moved the predicted way") {
				t.Errorf("missed, but not for CPU 1: %s", x.Reason)
			}
			_, _, _, bi1, pi1, mi1 := v.cpu(1)
			if pi1-bi1 < 40 || mi1 <= bi1 {
				t.Errorf("CPU 1: the plan's prediction (%.1f%% → %.1f%% interrupts) was not the one judged, or the work did not arrive (%.1f%%)", bi1, pi1, mi1)
			}
			return
		}
		switch {
		case x.Verdict == "inconclusive", x.Repredicted != "",
			x.Verdict == "worse" && strings.Contains(x.Reason, "headroom"):
			seen = append(seen, x.Verdict+": "+x.Reason)
		case v.disturbed() != "":
			// Other processes ran on a CPU: what the move does is not
			// all that moved there.
			seen = append(seen, x.Verdict+": "+x.Reason+" ("+v.disturbed()+")")
		default:
			t.Fatalf("the plan's prediction put 40 points more on CPU 1 than the move takes there, and the verdict is %s: %s\n%s", x.Verdict, x.Reason, v.table())
		}
	}
	t.Skipf("other processes changed the machine in every attempt: %s", strings.Join(seen, "; "))
}

// Live: on an idle namespace of our own, a plan that turns RPS on for a
// veth no packet crosses changes nothing measurable, and the model predicts
// exactly that: confirmed, exit status 0. Another process starting or
// stopping between the windows can put a CPU off by more than the
// tolerance; that is retried, and at least one of four attempts must
// confirm (else the test skips with the verdicts).
func TestLiveApplyVerifyConfirmsNoOp(t *testing.T) {
	ns := newVethPair(t)
	state := stateDir(t)
	file := writePlan(t, "version: 1\nrx_queues:\n  - {device: vq0, queue: 0, rps_cpus: 1, reason: test}\n")
	var seen []string
	for attempt := 1; attempt <= 4; attempt++ {
		out, errOut, err := runCmd(selfCmd(ns.exec, "--json", "apply", "--verify=2s", "--state-dir", state, file))
		code := exitCode(err)
		if code != 0 && code < 3 {
			t.Fatalf("apply --verify: exit %d\n%s%s", code, out, errOut)
		}
		v := parseVerify(t, out)
		v.check(t, code, v.Journal)
		if _, errOut, err := runCmd(selfCmd(ns.exec, "revert", "--state-dir", state)); err != nil {
			t.Fatalf("revert: %v\n%s", err, errOut)
		}
		x := v.Verification
		// Disturbed first: another process's work on a CPU (other test
		// packages run beside this one) is in every figure, whatever the
		// verdict; the move is judged only on a quiet attempt.
		why := v.disturbed()
		if x.Verdict == "confirmed" && why == "" {
			for _, c := range x.CPUs {
				if c.PredictedBusy != c.BeforeBusy || c.PredictedIRQ != c.BeforeIRQ || !c.Within {
					t.Errorf("CPU%d: no traffic, yet predicted %.1f%% → %.1f%% busy (%.1f%% → %.1f%% interrupts), within %v", c.CPU, c.BeforeBusy, c.PredictedBusy, c.BeforeIRQ, c.PredictedIRQ, c.Within)
				}
			}
			return
		}
		if x.Verdict == "worse" && !strings.Contains(x.Reason, "headroom") {
			t.Fatalf("a plan predicted to move nothing moved a figure the wrong way: %s\n%s", x.Reason, v.table())
		}
		seen = append(seen, x.Verdict+": "+x.Reason)
		t.Logf("attempt %d:\n%s", attempt, v.table())
	}
	t.Skipf("other processes changed the machine between the windows in every attempt: %s", strings.Join(seen, "; "))
}

// Live: verify's errors (exit status 2): a journal whose plan carried no
// prediction (applied without --verify), a journal no longer applied, a
// state directory that does not exist or holds no journal, a journal
// that does not exist; and apply's refusals of --revert-if
// without --verify and of --verify with --dry-run, before writing.
func TestLiveVerifyErrors(t *testing.T) {
	ns := newVethPair(t)
	state := stateDir(t)
	run := func(args ...string) (string, string, int) {
		out, errOut, err := runCmd(selfCmd(ns.exec, args...))
		return out, errOut, exitCode(err)
	}
	file := writePlan(t, "version: 1\nrx_queues:\n  - {device: vq0, queue: 0, rps_cpus: 1, reason: test}\n")
	for _, args := range [][]string{
		{"apply", "--revert-if", "worse", "--state-dir", state, file},
		{"apply", "--verify=1s", "--dry-run", "--state-dir", state, file},
		{"apply", "--verify=1s", "--revert-if", "better", "--state-dir", state, file},
	} {
		if out, errOut, code := run(args...); code != 2 || out != "" {
			t.Errorf("%v: exit %d, want 2 and nothing written\n%s%s", args, code, out, errOut)
		}
	}
	if _, _, code := run("apply", "--dry-run", "--state-dir", state, file); code != 0 {
		t.Fatalf("dry run: exit %d", code)
	}
	missing := filepath.Join(t.TempDir(), "none")
	if _, errOut, code := run("verify", "--state-dir", missing); code != 2 || !strings.Contains(errOut, "--state-dir "+missing+": no such directory") {
		t.Errorf("verify with a state directory that does not exist: exit %d, %q", code, errOut)
	}
	empty := stateDir(t)
	if _, errOut, code := run("verify", "--state-dir", empty); code != 2 || !strings.Contains(errOut, "no applied journal in "+empty) {
		t.Errorf("verify without journals: exit %d, %q", code, errOut)
	}
	if _, errOut, code := run("verify", "--state-dir", empty, "--journal", "20260101T000000Z"); code != 2 || !strings.Contains(errOut, `no journal "20260101T000000Z"`) {
		t.Errorf("verify of a journal that does not exist: exit %d, %q", code, errOut)
	}
	out, errOut, code := run("--json", "apply", "--state-dir", state, file)
	if code != 0 {
		t.Fatalf("apply: exit %d\n%s%s", code, out, errOut)
	}
	id := parseVerify(t, out).Journal
	for _, args := range [][]string{{"verify", "--state-dir", state, "--journal", id}, {"verify", "--state-dir", state}} {
		if _, errOut, code := run(args...); code != 2 || !strings.Contains(errOut, "journal "+id+" has no prediction to verify") {
			t.Errorf("%v on a journal without prediction: exit %d, %q", args, code, errOut)
		}
	}
	if _, errOut, code := run("revert", "--state-dir", state); code != 0 {
		t.Fatalf("revert: exit %d\n%s", code, errOut)
	}
	if _, errOut, code := run("verify", "--state-dir", state, "--journal", id); code != 2 || !strings.Contains(errOut, "journal "+id+" is reverted, not applied") {
		t.Errorf("verify of a reverted journal: exit %d, %q", code, errOut)
	}
	if _, errOut, code := run("verify", "--state-dir", state); code != 2 || !strings.Contains(errOut, "no applied journal in") {
		t.Errorf("verify with only a reverted journal: exit %d, %q", code, errOut)
	}
}

// captureFiles are the files load.Sampler reads (without tasks).
var captureFiles = []string{"proc/uptime", "proc/stat", "proc/interrupts", "proc/softirqs", "proc/net/softnet_stat"}

// Not a test: with IRQPILOT_CAPTURE_VERIFY=DIR it captures the core-0
// bottleneck's RPS move for internal/verify's tests (see
// internal/verify/testdata/README.md): the sampler's files at the start,
// middle and end of a 3 s window with RPS off (before/0, 1, 2), then of
// one with rps_cpus on the receiving veth's rx-0 set to CPU 1 (after/…),
// the flood held at 60 % of the rate that saturates CPU 0, and the
// receiver namespace's inventory (host.json).
func TestCaptureVerifyPair(t *testing.T) {
	dir := os.Getenv("IRQPILOT_CAPTURE_VERIFY")
	if dir == "" {
		t.Skip("set IRQPILOT_CAPTURE_VERIFY=DIR to capture")
	}
	b := newCoreBottleneck(t)
	// Only a quiet machine shows the move alone: wait (up to 5 minutes)
	// for a second in which CPU 1 is at least half idle.
	for i := 0; !cpu1Idle(t, 50); i++ {
		if i == 30 {
			t.Skip("CPU 1 was never idle")
		}
		time.Sleep(10 * time.Second)
	}
	s := b.flood()
	defer s.stop()
	inv, errOut, code := b.irqpilot("--json", "inventory")
	if code != 0 {
		t.Fatalf("inventory: %d %s", code, errOut)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "host.json"), []byte(inv), 0o644); err != nil {
		t.Fatal(err)
	}
	snap := func(window string, i int) {
		for _, f := range captureFiles {
			data, err := os.ReadFile("/" + f)
			if err != nil {
				t.Fatal(err)
			}
			p := filepath.Join(dir, window, fmt.Sprint(i), f)
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, data, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, w := range []string{"before", "after"} {
		if w == "after" {
			b.setRPS("2")
			time.Sleep(500 * time.Millisecond)
		}
		for i := 0; i < 3; i++ {
			if i > 0 {
				time.Sleep(1500 * time.Millisecond)
			}
			snap(w, i)
		}
	}
	b.setRPS("0")
	t.Logf("captured in %s; recv device %s", dir, b.recvDev)
}

// cpu1Idle says whether CPU 1 was at least pct idle over a second.
func cpu1Idle(t *testing.T, pct float64) bool {
	smp := load.NewSampler(kernel.New("/"))
	a, err := smp.Sample()
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second)
	z, err := smp.Sample()
	if err != nil {
		t.Fatal(err)
	}
	l, err := load.Rates(a, z)
	if err != nil {
		t.Fatal(err)
	}
	c := l.CPU(1)
	return c != nil && c.Idle >= pct
}

// rawWrite is write(2) without the race detector's annotation: under
// -race, unix.Write reads the whole buffer's shadow memory (56 KB a send),
// which made the flood's sender cost several times its own work and read
// as another process loading CPU 0.
func rawWrite(fd int, b []byte) (int, error) {
	n, _, errno := unix.Syscall(unix.SYS_WRITE, uintptr(fd), uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)))
	if errno != 0 {
		return int(n), errno
	}
	return int(n), nil
}
