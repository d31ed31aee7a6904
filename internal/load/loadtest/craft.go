// Package loadtest builds measured loads for the tests of the packages
// that judge them (diagnose, policy): a pair of samples one second apart,
// edited CPU by CPU, turned into a load.Load by load.Rates.
package loadtest

import (
	"encoding/json"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/irqpilot/irqpilot/internal/cpuset"
	"github.com/irqpilot/irqpilot/internal/host"
	"github.com/irqpilot/irqpilot/internal/kernel"
	"github.com/irqpilot/irqpilot/internal/load"
)

// Pair is two samples of an n-CPU machine one second apart in which every
// CPU was idle; tests then change the second sample (B).
type Pair struct{ A, B *load.Sample }

// Craft returns the idle pair of an n-CPU machine.
func Craft(n int) *Pair {
	mk := func(clock time.Duration) *load.Sample {
		s := &load.Sample{Clock: clock, ClockSource: load.ClockUptime, Interrupts: &kernel.Interrupts{}}
		for i := 0; i < n; i++ {
			s.CPUs = append(s.CPUs, load.CPUTimes{ID: i, CPUTime: load.CPUTime{User: 1000, System: 500, Idle: 50000}})
			s.Interrupts.CPUs = append(s.Interrupts.CPUs, i)
			s.Softnet = append(s.Softnet, load.SoftnetCounters{CPU: i, Processed: 1000, Columns: 13})
		}
		s.Softirqs = &kernel.Softirqs{CPUs: s.Interrupts.CPUs, Types: []string{"NET_RX", "NET_TX", "BLOCK"}}
		for range s.Softirqs.Types {
			s.Softirqs.Counts = append(s.Softirqs.Counts, make([]uint64, n))
		}
		return s
	}
	c := &Pair{A: mk(100 * time.Second), B: mk(101 * time.Second)}
	for i := range c.B.CPUs {
		c.B.CPUs[i].Idle++ // 100% idle over the second
	}
	return c
}

// CPU sets CPU id's use over the interval, in percent.
func (c *Pair) CPU(id int, user, sys, irq, soft, idle float64) *Pair {
	a, b := &c.A.CPUs[id], &c.B.CPUs[id]
	b.User, b.System, b.IRQ, b.SoftIRQ, b.Idle = a.User+user/100, a.System+sys/100, a.IRQ+irq/100, a.SoftIRQ+soft/100, a.Idle+idle/100
	return c
}

// IRQ adds numbered IRQ n with per-CPU rates (1 s interval: counts = rates).
func (c *Pair) IRQ(n int, rates ...uint64) *Pair {
	for k, s := range []*load.Sample{c.A, c.B} {
		line := kernel.InterruptLine{Name: strconv.Itoa(n), IRQ: n, Counts: make([]uint64, len(s.CPUs)), Chip: "PCI-MSIX"}
		for i := range line.Counts {
			line.Counts[i] = 5000
			if k == 1 && i < len(rates) {
				line.Counts[i] += rates[i]
			}
		}
		s.Interrupts.Lines = append(s.Interrupts.Lines, line)
	}
	return c
}

// Softirq adds rate softirqs of type typ on cpu.
func (c *Pair) Softirq(typ string, cpu int, rate uint64) *Pair {
	for t, name := range c.B.Softirqs.Types {
		if name == typ {
			c.B.Softirqs.Counts[t][cpu] += rate
		}
	}
	return c
}

// Softnet adds softnet_stat events on cpu.
func (c *Pair) Softnet(cpu int, processed, dropped, squeeze, rps uint32) *Pair {
	s := &c.B.Softnet[cpu]
	s.Processed += processed
	s.Dropped += dropped
	s.TimeSqueeze += squeeze
	s.ReceivedRPS += rps
	return c
}

// Load is the pair's rates.
func (c *Pair) Load(t testing.TB) *load.Load {
	t.Helper()
	l, err := load.Rates(c.A, c.B)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// HostN is a one-node host with n online CPUs.
func HostN(n int) *host.Host {
	h := &host.Host{}
	h.Topology.Online = cpuset.Range(0, n-1)
	for i := 0; i < n; i++ {
		h.Topology.CPUs = append(h.Topology.CPUs, host.CPU{ID: i, Online: true, Node: 0})
	}
	h.Topology.Nodes = []host.Node{{ID: 0, CPUs: h.Topology.Online}}
	h.CPUs = h.Topology.CPUs
	return h
}

// TasksPair samples dir/{a,b} with the threads, as doctor does (dir: a
// directory of internal/load/testdata).
func TasksPair(t testing.TB, dir string) *load.Load {
	t.Helper()
	var s [2]*load.Sample
	for i, d := range []string{"a", "b"} {
		sm := load.NewSampler(kernel.New(dir + "/" + d))
		sm.Tasks = true
		smp, err := sm.Sample()
		if err != nil {
			t.Fatalf("%s/%s: %v", dir, d, err)
		}
		s[i] = smp
	}
	l, err := load.Rates(s[0], s[1])
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// Consumers are the socket owners read on the machine while dir was
// captured (dir/consumers.json, kernel.FS.SocketOwners as JSON).
func Consumers(t testing.TB, dir string) []kernel.SocketOwner {
	t.Helper()
	b, err := os.ReadFile(dir + "/consumers.json")
	if err != nil {
		t.Fatal(err)
	}
	var o []kernel.SocketOwner
	if err := json.Unmarshal(b, &o); err != nil {
		t.Fatal(err)
	}
	return o
}
