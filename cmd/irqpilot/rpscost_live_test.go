package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/irqpilot/irqpilot/internal/kernel"
	"github.com/irqpilot/irqpilot/internal/kernel/bpfcost"
	"github.com/irqpilot/irqpilot/internal/livetest"
	"github.com/irqpilot/irqpilot/internal/load"
)

// threadNs is a thread's time on CPU so far (schedstat, ns): exact, and
// not disturbed by other processes sharing the CPU.
func threadNs(t *testing.T, tid int64) float64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/self/task/%d/schedstat", tid))
	if err != nil {
		t.Fatal(err)
	}
	v, _ := strconv.ParseFloat(strings.Fields(string(data))[0], 64)
	return v
}

// Not a test: with IRQPILOT_MEASURE_RPS=1 it measures what RPS costs per
// send on the core-0 bottleneck, the numbers policy/model.go's RPS terms
// cite. The sender runs at 6000 sends/s (what the machine carries with
// other processes on it); 8 windows of 3 s alternate RPS off and RPS to
// CPU 1. Per window it logs the sender thread's time per send (with RPS
// off it includes the receive softirq the thread ran at local_bh_enable)
// and each CPU's NET_RX time per send from the eBPF collector. The
// thread's time is its own, whatever else runs; NET_RX is the CPU's, so
// only windows in which no other process received packets count (RPS off:
// CPU 1's NET_RX per send near 0).
func TestMeasureRPSCostPerSend(t *testing.T) {
	if os.Getenv("IRQPILOT_MEASURE_RPS") == "" {
		t.Skip("set IRQPILOT_MEASURE_RPS=1 to measure")
	}
	b := newCoreBottleneck(t)
	rate := 6000.0
	// IRQPILOT_MEASURE_RPS=plain: one 1400-byte datagram per send, each a
	// packet of its own to dispatch; =plain-gro also turns GRO on for the
	// receiving veth, which then runs its own NAPI poll on the sending CPU.
	if m := os.Getenv("IRQPILOT_MEASURE_RPS"); strings.HasPrefix(m, "plain") {
		b.plain, rate = true, 60000
		if v, err := strconv.ParseFloat(os.Getenv("IRQPILOT_MEASURE_RATE"), 64); err == nil {
			rate = v
		}
		if m == "plain-gro" {
			livetest.Run(t, "ip", "netns", "exec", b.recvNS, "ethtool", "-K", b.recvDev, "gro", "on")
		}
	}
	s := b.send(rate)
	c, err := bpfcost.Open()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	smp := load.NewSampler(kernel.New("/"))
	smp.Cost = c
	time.Sleep(time.Second)
	defer b.setRPS("0")
	for i := 0; i < 8; i++ {
		mask := []string{"0", "2"}[i%2]
		b.setRPS(mask)
		time.Sleep(500 * time.Millisecond)
		a, _ := smp.Sample()
		n0, ns0 := s.sent.Load(), threadNs(t, s.tid.Load())
		time.Sleep(3 * time.Second)
		z, _ := smp.Sample()
		n1, ns1 := s.sent.Load(), threadNs(t, s.tid.Load())
		l, err := load.Rates(a, z)
		if err != nil {
			t.Fatal(err)
		}
		sends := float64(n1 - n0)
		secs := l.Interval.Seconds()
		c0, c1 := l.CPU(0), l.CPU(1)
		// Packets per second: a plain send is one, a GSO send 40.
		rx := sends / secs * 40
		if b.plain {
			rx = sends / secs
		}
		t.Logf("rps=%s pkts/s %.0f NET_RX ns/pkt CPU0 %.0f CPU1 %.0f | sends/s %.0f | sender thread %.0f ns/send (%.1f%% of a CPU) | NET_RX ns/send CPU0 %.0f CPU1 %.0f | NET_RX %% CPU0 %.1f CPU1 %.1f | CPU0 usr %.0f sys %.0f soft %.0f idle %.0f CPU1 usr %.0f sys %.0f soft %.0f idle %.0f",
			mask, rx, c0.SoftirqTime["NET_RX"]*1e9/rx, c1.SoftirqTime["NET_RX"]*1e9/rx, sends/secs, (ns1-ns0)/sends, 100*(ns1-ns0)/1e9/secs,
			c0.SoftirqTime["NET_RX"]*secs*1e9/sends, c1.SoftirqTime["NET_RX"]*secs*1e9/sends,
			100*c0.SoftirqTime["NET_RX"], 100*c1.SoftirqTime["NET_RX"],
			c0.User, c0.System, c0.SoftIRQ, c0.Idle, c1.User, c1.System, c1.SoftIRQ, c1.Idle)
	}
	s.stop()
}
