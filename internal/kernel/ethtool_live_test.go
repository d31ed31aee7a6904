package kernel_test

import (
	"errors"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/safchain/ethtool"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/irqpilot/irqpilot/internal/kernel"
	"github.com/irqpilot/irqpilot/internal/livetest"
)

// On a veth pair in a namespace of its own: the driver name and channel
// counts the kernel fills into heap buffers, and the driver's refusal of
// coalescing (veth has none) as a bare errno.
func TestEthtoolVeth(t *testing.T) {
	livetest.NeedRoot(t, "ip")
	ns := livetest.Netns(t, livetest.Name("irqp-kern-"))
	ip := func(args ...string) {
		t.Helper()
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %s: %v: %s", strings.Join(args, " "), err, out)
		}
	}
	ip("-n", ns, "link", "add", "ka", "numrxqueues", "3", "numtxqueues", "2", "type", "veth", "peer", "name", "kb")

	type result struct {
		driver        string
		ch            *ethtool.Channels
		getErr, setEr error
		stats         map[string]uint64
		err           error
	}
	done := make(chan result, 1)
	go func() {
		// The thread enters the namespace and is never handed back to the
		// scheduler: the goroutine exits locked, so the runtime drops it.
		runtime.LockOSThread()
		var r result
		defer func() { done <- r }()
		h, err := netns.GetFromName(ns)
		if err != nil {
			r.err = err
			return
		}
		defer h.Close()
		if r.err = netns.Set(h); r.err != nil {
			return
		}
		et, err := kernel.OpenEthtool()
		if err != nil {
			r.err = err
			return
		}
		defer et.Close()
		if r.driver, r.err = et.Driver("ka"); r.err != nil {
			return
		}
		if r.ch, r.err = et.Channels("ka"); r.err != nil {
			return
		}
		_, r.getErr = et.Coalesce("ka")
		r.setEr = et.SetCoalesce("ka", &ethtool.Coalesce{RxCoalesceUsecs: 8})
		r.stats, r.err = et.Stats("ka")
	}()
	r := <-done
	if r.err != nil {
		t.Fatal(r.err)
	}
	if r.driver != "veth" || r.ch.RxCount != 3 || r.ch.TxCount != 2 {
		t.Errorf("ka: driver %q channels %+v, want veth with 3 rx and 2 tx", r.driver, r.ch)
	}
	for what, err := range map[string]error{"get": r.getErr, "set": r.setEr} {
		if !errors.Is(err, unix.EOPNOTSUPP) {
			t.Errorf("veth coalesce %s: %v, want EOPNOTSUPP", what, err)
		}
	}
	// The statistics are ethtool -S's, name for name and value for value
	// (no traffic crosses the pair: the counters stand still).
	if _, err := exec.LookPath("ethtool"); err != nil {
		t.Skip("no ethtool (Debian package ethtool) to compare the statistics with")
	}
	out, err := exec.Command("ip", "netns", "exec", ns, "ethtool", "-S", "ka").CombinedOutput()
	if err != nil {
		t.Fatalf("ethtool -S ka: %v: %s", err, out)
	}
	want := map[string]uint64{}
	for _, l := range strings.Split(string(out), "\n")[1:] {
		k, v, ok := strings.Cut(strings.TrimSpace(l), ": ")
		if !ok {
			continue
		}
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("ethtool -S line %q: %v", l, err)
		}
		want[k] = n
	}
	if len(want) < 10 || want["rx_queue_2_xdp_packets"] != 0 || want["peer_ifindex"] == 0 {
		t.Fatalf("ethtool -S ka printed %d statistics: not veth's with 3 rx queues\n%s", len(want), out)
	}
	if d := cmp.Diff(want, r.stats); d != "" {
		t.Errorf("Stats(ka) differs from ethtool -S (-ethtool +Stats):\n%s", d)
	}
}
