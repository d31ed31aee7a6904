package main

import (
	"fmt"
	"time"

	"github.com/irqpilot/irqpilot/internal/kernel"
	"github.com/irqpilot/irqpilot/internal/load"
)

// measurement is one measurement of the machine's load, taken the same way
// by every verb that judges or predicts from one (doctor, plan, apply
// --verify): the eBPF interrupt-time collector where it loads, the
// threads, and on the live machine the processes that serve the traffic.
type measurement struct {
	Load *load.Load
	// CostNote says how interrupt time is known: "measured with eBPF" or
	// "estimated from counts" and why.
	CostNote string
	// Unavailable are the counters either sample could not read.
	Unavailable []string
	// OwnersRead is true when the socket owners were read (live only), and
	// then Load.Consumers holds the processes that serve traffic;
	// OwnersErr is why they could not be.
	OwnersRead bool
	OwnersErr  error
}

// measureSpec is how to measure.
type measureSpec struct {
	Duration time.Duration
	// Cost is --cost: auto, bpf or counts (startCost).
	Cost string
	// Tasks samples the threads too (application placement, doctor's
	// app-on-irq-cpu).
	Tasks bool
	// Wait waits between the two samples (a progress display); nil sleeps.
	Wait func(time.Duration)
}

// measureLive measures the live machine fs for d: the eBPF collector as
// cost asks (auto: where it loads), a sample, d, a sample, and the socket
// owners. note says how interrupt time is known. doctor and plan call it;
// apply --verify's liveMeter (verify.go) takes its sampler from the same
// measureSpec.sampler and its consumers from the same serveConsumers, but
// samples three times (a window and its halves, for the noise), so a
// prediction and its check rest on the same measurement.
func measureLive(fs *kernel.FS, d time.Duration, cost string, tasks bool) (*load.Load, string, error) {
	m, err := measureSpec{Duration: d, Cost: cost, Tasks: tasks}.live(fs)
	if err != nil {
		return nil, "", err
	}
	return m.Load, m.CostNote, nil
}

// live measures the live machine fs.
func (s measureSpec) live(fs *kernel.FS) (*measurement, error) {
	if s.Duration <= 0 {
		return nil, fmt.Errorf("measuring for %v: the duration must be positive", s.Duration)
	}
	smp, stopCost, note, err := s.sampler(fs)
	if err != nil {
		return nil, err
	}
	defer stopCost()
	first, err := smp.Sample()
	if err != nil {
		return nil, err
	}
	if s.Wait != nil {
		s.Wait(s.Duration)
	} else {
		time.Sleep(s.Duration)
	}
	second, err := smp.Sample()
	if err != nil {
		return nil, err
	}
	m, err := rates(first, second, note)
	if err != nil {
		return nil, err
	}
	m.OwnersErr = serveConsumers(fs, m.Load)
	m.OwnersRead = m.OwnersErr == nil
	return m, nil
}

// sampler is the live sampler every measurement uses: the interrupt-cost
// reader s.Cost asks for (startCost; stop ends it), and the threads when
// s.Tasks. note says how interrupt time is known.
func (s measureSpec) sampler(fs *kernel.FS) (smp *load.Sampler, stop func(), note string, err error) {
	reader, stop, note, err := startCost(s.Cost, fs)
	if err != nil {
		return nil, nil, "", err
	}
	smp = load.NewSampler(fs)
	smp.Tasks = s.Tasks
	smp.Cost = reader
	return smp, stop, note, nil
}

// serveConsumers marks in l who reads the traffic: the processes serving
// listening sockets, in every network namespace (read-only netlink dumps).
// The error says why they could not be read; l is then unchanged.
func serveConsumers(fs *kernel.FS, l *load.Load) error {
	owners, err := fs.SocketOwners()
	if err != nil {
		return err
	}
	l.SetConsumers(owners)
	return nil
}

// measureCaptured measures between two captures of one machine: first
// (--root/--snapshot) and second (--after). Captures have counts only, and
// no sockets: nothing tells a server from its load generator.
func measureCaptured(first, second *kernel.FS, cost string, tasks bool) (*measurement, error) {
	_, _, note, err := startCost(cost, first)
	if err != nil {
		return nil, err
	}
	smp := make([]*load.Sample, 2)
	for i, fs := range []*kernel.FS{first, second} {
		s := load.NewSampler(fs)
		s.Tasks = tasks
		if smp[i], err = s.Sample(); err != nil {
			return nil, err
		}
	}
	return rates(smp[0], smp[1], note)
}

// rates turns two samples into the measurement; note is startCost's line,
// corrected when the collector ran but its maps could not be read.
func rates(first, second *load.Sample, note string) (*measurement, error) {
	l, err := load.Rates(first, second)
	if err != nil {
		return nil, err
	}
	if l.CostSource != load.CostBPF && note == costMeasuredNote {
		note = "interrupt cost: estimated from counts (the eBPF maps could not be read in both samples)"
	}
	m := &measurement{Load: l, CostNote: note}
	m.Unavailable = append(append(m.Unavailable, first.Unavailable...), second.Unavailable...)
	return m, nil
}
