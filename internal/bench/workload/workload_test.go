package workload

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/irqpilot/irqpilot/internal/cpuset"
	"github.com/irqpilot/irqpilot/internal/kernel"
	"github.com/irqpilot/irqpilot/internal/program"
)

// udpCapturedRate is the last field of testdata/udp-send.txt.
const udpCapturedRate = 677033

func TestParseUDPCaptured(t *testing.T) {
	// The udp-send helper's line from a 2 s run on this machine (sender on
	// CPU 0, sink on CPU 1, single-queue veth).
	r, err := ParseUDP(read(t, "udp-send.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if r.Unit != "dgram/s" || r.Throughput != udpCapturedRate {
		t.Errorf("got %+v, want %v dgram/s", r, udpCapturedRate)
	}
	if _, err := ParseUDP([]byte("udp-send: connection refused\n")); err == nil || !strings.Contains(err.Error(), "connection refused") {
		t.Errorf("error output: %v", err)
	}
}

// runMarked calls a mark's function when the program writes that line to
// standard error — split across writes or not — and keeps the output whole.
func TestRunMarkedCallsMarks(t *testing.T) {
	var got []string
	marks := map[string]func(){
		udpTrafficOn:  func() { got = append(got, "on") },
		udpTrafficOff: func() { got = append(got, "off") },
	}
	script := `printf 'udp-send: traf' >&2; sleep 0.1; printf 'fic on\n' >&2; echo result; echo '` + udpTrafficOff + `' >&2; echo 'udp-send: traffic on (not alone)' >&2`
	rec := &program.Recorder{}
	out, err := runMarked(context.Background(), Placement{Programs: rec}, time.Second, cpuset.Set{}, []string{"sh", "-c", script}, marks)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(got, ",") != "on,off" {
		t.Errorf("marks called: %v", got)
	}
	// Started through the placement's runner, not by os/exec directly.
	if lines := rec.Lines(); len(lines) != 1 || lines[0][0] != "sh" {
		t.Errorf("started through the runner: %v", lines)
	}
	for _, want := range []string{"result", udpTrafficOn, udpTrafficOff, "(not alone)"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("output lost %q: %q", want, out)
		}
	}
}

// The storage workload refuses an ioengine it does not drive before it
// lays out any file; psync always runs one read at a time.
func TestStorageEngine(t *testing.T) {
	dir := t.TempDir()
	w := &StorageWorkload{Dir: dir, Engine: "io_uring"}
	if _, err := w.Prepare(); err == nil || !strings.Contains(err.Error(), `"io_uring"`) {
		t.Errorf("io_uring: %v", err)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Errorf("left %d files", len(ents))
	}
	if _, err := exec.LookPath("fio"); err != nil {
		t.Skip("fio not installed (make deps)")
	}
	// On the disk (make test's TMPDIR is tmpfs, which has no block device).
	disk, err := os.MkdirTemp("/var/tmp", "irqpilot-storage-test-")
	if err != nil {
		t.Skip(err)
	}
	t.Cleanup(func() { os.RemoveAll(disk) })
	w = &StorageWorkload{Dir: disk, SizeMB: 1, Engine: "psync", IODepth: 16, FS: kernel.New("/")}
	if _, err := w.Prepare(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	if w.IODepth != 1 {
		t.Errorf("psync with --iodepth 16 runs at depth %d, want 1", w.IODepth)
	}
}

// The load generator's defaults: memcaslap one thread more than the CPUs
// (so runs do not settle into one arrangement, see clientThreads), wrk 2,
// 16 connections a thread; given values are kept.
func TestNetClientDefaults(t *testing.T) {
	for _, c := range []struct {
		kind       string
		cpus       int
		in         NetOptions
		thr, conns int
	}{
		{"memcached", 2, NetOptions{}, 3, 48},
		{"memcached", 8, NetOptions{}, 9, 144},
		{"memcached", 0, NetOptions{}, 2, 32}, // CPUs unknown
		{"nginx", 2, NetOptions{}, 2, 32},
		{"udp", 4, NetOptions{}, 2, 32},
		{"memcached", 2, NetOptions{ClientThreads: 2, Connections: 8}, 2, 8},
		{"memcached", 2, NetOptions{ClientThreads: 4}, 4, 64},
	} {
		o := c.in
		o.defaults(c.kind, c.cpus)
		if o.ClientThreads != c.thr || o.Connections != c.conns {
			t.Errorf("%s on %d CPUs, given %d×%d: got %d threads, %d connections; want %d, %d",
				c.kind, c.cpus, c.in.ClientThreads, c.in.Connections, o.ClientThreads, o.Connections, c.thr, c.conns)
		}
	}
	if n := machineCPUs(kernel.New("/")); n < 1 {
		t.Errorf("machineCPUs() = %d on this machine", n)
	}
}

// Busy polling is the udp sink's: other workloads refuse it in their
// options, and the udp sink refuses more than a millisecond.
func TestBusyPollOnlyUDP(t *testing.T) {
	if _, err := NewNet("memcached", NetOptions{BusyPoll: BusyPoll{SocketUsecs: 50}}); err == nil || !strings.Contains(err.Error(), "udp") {
		t.Errorf("memcached with busy poll: %v", err)
	}
	if _, err := NewNet("udp", NetOptions{BusyPoll: BusyPoll{EpollUsecs: 5000}}); err == nil {
		t.Error("udp with 5 ms epoll busy poll accepted")
	}
}
