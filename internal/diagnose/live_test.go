package diagnose

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/irqpilot/irqpilot/internal/cpuset"
	"github.com/irqpilot/irqpilot/internal/host"
	"github.com/irqpilot/irqpilot/internal/kernel"
	"github.com/irqpilot/irqpilot/internal/livetest"
	"github.com/irqpilot/irqpilot/internal/load"
	"unsafe"
)

// ratesSince samples s again and returns the rates since a.
func ratesSince(t *testing.T, s *load.Sampler, a *load.Sample) *load.Load {
	t.Helper()
	b, err := s.Sample()
	if err != nil {
		t.Fatal(err)
	}
	l, err := load.Rates(a, b)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// ipq runs ip(8) and fails the test with its output on error.
func ipq(t *testing.T, args ...string) {
	t.Helper()
	if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
		t.Fatalf("ip %s: %v: %s", strings.Join(args, " "), err, out)
	}
}

// The sources' core-0 bottleneck on this machine: a single-queue veth whose
// sender is pinned to one CPU, RPS off. veth hands each packet to the
// receiving device with netif_rx on the sending CPU, so that CPU runs all
// of the receive softirq work. doctor must name it; with rps_cpus set on
// the receiving veth's rx-0 to all CPUs, the finding must be gone.
func TestLiveDoctorCoreBottleneck(t *testing.T) {
	livetest.NeedRoot(t, "ip")
	if runtime.NumCPU() < 2 {
		t.Skip("needs two CPUs")
	}
	nsA, nsB := livetest.Netns(t, livetest.Name("irqp-e1a-")), livetest.Netns(t, livetest.Name("irqp-e1b-"))
	vA, vB := livetest.Name("ipe1a"), livetest.Name("ipe1b")
	ipq(t, "link", "add", vA, "netns", nsA, "numrxqueues", "1", "numtxqueues", "1", "type", "veth", "peer", "name", vB, "netns", nsB, "numrxqueues", "1", "numtxqueues", "1")
	ipq(t, "-n", nsA, "addr", "add", "10.231.0.1/24", "dev", vA)
	ipq(t, "-n", nsB, "addr", "add", "10.231.0.2/24", "dev", vB)
	ipq(t, "-n", nsA, "link", "set", vA, "up")
	ipq(t, "-n", nsB, "link", "set", vB, "up")

	rps := func(mask string) {
		t.Helper()
		// sysfs shows a namespace's devices only when mounted inside it;
		// `ip netns exec` does that.
		out, err := exec.Command("ip", "netns", "exec", nsB, "sh", "-c",
			fmt.Sprintf("echo %s > /sys/class/net/%s/queues/rx-0/rps_cpus && cat /sys/class/net/%s/queues/rx-0/rps_cpus", mask, vB, vB)).CombinedOutput()
		if err != nil {
			t.Fatalf("rps_cpus=%s: %v: %s", mask, err, out)
		}
	}
	rps("0")

	// The receiver: a bound socket that is never read, so packets are
	// dropped at the socket after the whole receive path ran.
	var rx *net.UDPConn
	if err := kernel.InNetns(nsB, func() error {
		c, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(10, 231, 0, 2), Port: 9000})
		rx = c
		return err
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rx.Close() })

	const cpu = 0
	// run sends from a thread pinned to cpu in nsA for d: 16 flows (source
	// ports) with UDP GSO, so that one send(2) makes ~40 packets of
	// receive work.
	//
	// rate bounds the sends per second (0: as fast as the CPU allows). The
	// returned stop function reports the rate achieved.
	run := func(d time.Duration, rate float64) (stop func() float64) {
		var sent atomic.Int64
		start := time.Now()
		var wg sync.WaitGroup
		done := make(chan struct{})
		errc := make(chan error, 1)
		wg.Add(1)
		go func() {
			defer wg.Done()
			errc <- kernel.InNetns(nsA, func() error {
				var set unix.CPUSet
				set.Set(cpu)
				if err := unix.SchedSetaffinity(0, &set); err != nil {
					return err
				}
				var fds []int
				for i := 0; i < 16; i++ {
					fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM, 0)
					if err != nil {
						return err
					}
					defer unix.Close(fd)
					if err := unix.SetsockoptInt(fd, unix.IPPROTO_UDP, unix.UDP_SEGMENT, 1400); err != nil {
						return fmt.Errorf("UDP_SEGMENT: %w", err)
					}
					if err := unix.Connect(fd, &unix.SockaddrInet4{Port: 9000, Addr: [4]byte{10, 231, 0, 2}}); err != nil {
						return err
					}
					fds = append(fds, fd)
				}
				buf := make([]byte, 56000)
				end := time.Now().Add(d)
				for i := 0; ; i++ {
					select {
					case <-done:
						return nil
					default:
					}
					if time.Now().After(end) {
						return nil
					}
					if rate > 0 && float64(i) > rate*time.Since(start).Seconds() {
						time.Sleep(200 * time.Microsecond)
						i--
						continue
					}
					if _, err := rawWrite(fds[i%len(fds)], buf); err != nil && err != syscall.ECONNREFUSED && err != syscall.ENOBUFS && err != syscall.EAGAIN {
						return err
					}
					sent.Add(1)
				}
			})
		}()
		return func() float64 {
			close(done)
			wg.Wait()
			if err := <-errc; err != nil {
				t.Fatalf("sender: %v", err)
			}
			return float64(sent.Load()) / time.Since(start).Seconds()
		}
	}

	var achieved float64
	measure := func(rate float64) (*load.Load, []Finding) {
		t.Helper()
		stop := run(10*time.Second, rate)
		defer func() { achieved = stop() }()
		time.Sleep(700 * time.Millisecond) // let the flood settle
		s := load.NewSampler(kernel.New("/"))
		a, err := s.Sample()
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(2 * time.Second)
		l := ratesSince(t, s, a)
		h, err := host.Read(kernel.New("/"), host.Options{})
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range l.CPUs {
			t.Logf("CPU%d usr %.1f sys %.1f irq %.1f soft %.1f idle %.1f NET_RX %.0f/s", c.ID, c.User, c.System, c.IRQ, c.SoftIRQ, c.Idle, c.NetRx)
		}
		return l, Diagnose(h, l)
	}

	// The scenario needs the other CPUs idle (that is what makes it the
	// sources' bottleneck). Other test binaries may run at the same time; try
	// a few windows and, if the machine never was quiet, assert what the
	// rules say of a busy one.
	var l *load.Load
	var fs []Finding
	for attempt := 1; ; attempt++ {
		l, fs = measure(0)
		var idle float64
		for _, o := range l.CPUs {
			if o.ID != cpu {
				idle += o.Idle / float64(len(l.CPUs)-1)
			}
		}
		// The sender's CPU must be ours too: another process running there
		// (user time; our sender spends ~1 % there) takes the time the
		// receive softirq work would show.
		if idle >= OthersIdlePct && l.CPU(cpu).User < 20 {
			break
		}
		if attempt == 4 {
			// Other processes kept the CPUs busy in every window. What
			// doctor says then is asserted instead: no CPU waits, so no
			// CPU is interrupt-bound ("the machine is simply busy"), and
			// any finding made carries the idle others it was made on.
			for _, f := range find(fs, IDInterruptBound) {
				if got := evidence(t, f, "other CPUs mean %idle"); got < OthersIdlePct {
					t.Errorf("interrupt-bound with the other CPUs %.0f%% idle: %s", got, f.Summary)
				}
			}
			if n := len(find(fs, IDInterruptBound)); idle < OthersIdlePct && n != 0 {
				t.Errorf("others %.0f%% idle (under %.0f%%), yet %d interrupt-bound findings: %v", idle, OthersIdlePct, n, ids(fs))
			}
			t.Logf("other processes kept the CPUs busy (others %.0f%% idle, CPU%d %.0f%% user) in 4 windows: asserted doctor's answer for a busy machine, not the scenario's", idle, cpu, l.CPU(cpu).User)
			return
		}
		t.Logf("other CPUs only %.0f%% idle (other processes running); measuring again", idle)
	}
	bound := find(fs, IDInterruptBound)
	if len(bound) != 1 || len(bound[0].CPUs) != 1 || bound[0].CPUs[0] != cpu {
		t.Fatalf("RPS off, sender on CPU%d: interrupt-bound findings %+v (all: %v)", cpu, bound, ids(fs))
	}
	c := l.CPU(cpu)
	f := bound[0]
	t.Logf("finding: %s", f.Summary)
	if evidence(t, f, fmt.Sprintf("CPU%d %%soft", cpu)) != round2(c.SoftIRQ) || evidence(t, f, fmt.Sprintf("CPU%d %%idle", cpu)) != round2(c.Idle) {
		t.Errorf("evidence %+v does not carry CPU%d's numbers (soft %.2f idle %.2f)", f.Evidence, cpu, c.SoftIRQ, c.Idle)
	}
	if c.SoftIRQ < BoundIRQPct || c.NetRx <= 0 || !strings.Contains(f.Summary, fmt.Sprintf("CPU%d", cpu)) {
		t.Errorf("CPU%d soft %.1f NET_RX %.0f summary %q", cpu, c.SoftIRQ, c.NetRx, f.Summary)
	}

	// RPS on over the other CPUs, as ClustrixDB core-0 write-up's fix does (housekeeping CPU
	// takes the interrupts, RPS spreads the protocol work over the rest):
	// the receive work leaves CPU0 and the finding goes. (With CPU0 in the
	// mask too, half the flows hash back onto the CPU that also runs the
	// busy sender, and it stays saturated.)
	online, err := os.ReadFile("/sys/devices/system/cpu/online")
	if err != nil {
		t.Fatal(err)
	}
	others := cpuset.MustParse(strings.TrimSpace(string(online))).Difference(cpuset.Of(cpu))
	rps(others.Mask(others.Max() + 1))
	t.Cleanup(func() { rps("0") })
	// The offered load must be one the machine can carry: an unbounded
	// flood saturates whichever single CPU receives it (with RPS to CPU1,
	// CPU1 then shows 99 % softirq and is rightly flagged). So the sender
	// now offers 90 % of the rate that saturated CPU0 above.
	flood := achieved
	t.Logf("flood rate with RPS off: %.0f sends/s; offering %.0f/s with RPS on", flood, 0.9*flood)
	l2, fs2 := measure(0.9 * flood)
	t.Logf("achieved %.0f sends/s; findings %v", achieved, ids(fs2))
	for _, sn := range l2.Softnet {
		// The finding must go because the work moved, not because packets
		// were dropped before anyone processed them.
		if sn.Dropped > 0 {
			t.Errorf("RPS on: CPU%d dropped %.0f packets/s at its backlog", sn.CPU, sn.Dropped)
		}
	}
	if soft0 := l2.CPU(cpu).SoftIRQ; soft0 > c.SoftIRQ/2 {
		t.Errorf("RPS on: CPU%d softirq %.1f%%, not at most half of %.1f%% (RPS/RFS on a single-queue NIC halved it)", cpu, soft0, c.SoftIRQ)
	}
	if bound := find(fs2, IDInterruptBound); len(bound) != 0 {
		t.Errorf("RPS on: still interrupt-bound: %+v", bound)
	}
	var othersSoft float64
	for _, o := range l2.CPUs {
		if o.ID != cpu {
			othersSoft += o.SoftIRQ
		}
	}
	if othersSoft < 5 {
		t.Errorf("RPS on: the other CPUs took no softirq work (%.1f%%)", othersSoft)
	}
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
