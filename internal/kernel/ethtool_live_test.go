package kernel_test

import (
	"errors"
	"os/exec"
	"runtime"
	"strings"
	"testing"

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
}
