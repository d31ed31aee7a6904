package load

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/irqpilot/irqpilot/internal/cpuset"
	"github.com/irqpilot/irqpilot/internal/host"
	"github.com/irqpilot/irqpilot/internal/kernel"
)

// A fix that moves work (application threads, IRQs, RPS) onto CPUs names
// only CPUs with measured headroom for the work moved (Headroom.Fits), and
// prints the prediction ("CPU 1 35% busy → 62% after"). Where no CPU has the
// room, it says so and what would help instead of a move. An application is
// moved only when it is an identified consumer of the traffic (it serves a
// listening socket): a busy thread beside the interrupts may just as well
// be the load generator.

// Prediction is one CPU's measured busy time and its predicted busy time
// after the work a fix moves onto it.
type Prediction struct {
	CPU   int     `json:"cpu"`
	Busy  float64 `json:"busy_pct"`
	After float64 `json:"after_pct"`
}

func (p Prediction) String() string {
	return fmt.Sprintf("CPU %d %.0f%% busy → %.0f%% after", p.CPU, p.Busy, p.After)
}

// Move is one move of work onto CPUs that a fix proposes (doctor --json):
// what moves, from which CPU, and the prediction for each CPU it goes to.
type Move struct {
	// What moves: "memcached (pid 123)", "irq 40", "eth1 receive work (RPS)".
	What string `json:"what"`
	// PID is the process moved (application moves only).
	PID  int          `json:"pid,omitempty"`
	From int          `json:"from_cpu"`
	To   []Prediction `json:"to"`
}

func predictions(ps []Prediction) string {
	s := make([]string, len(ps))
	for i, p := range ps {
		s[i] = p.String()
	}
	return strings.Join(s, ", ")
}

// budget is the CPUs' measured busy time plus what a fix has already placed
// on them: the second move of one fix sees the first.
type budget struct {
	l     *Load
	added map[int]float64
	moves []Move
}

// record notes a move the fix proposes.
func (b *budget) record(what string, pid, from int, ps []Prediction) {
	b.moves = append(b.moves, Move{What: what, PID: pid, From: from, To: ps})
}

func newBudget(l *Load) *budget { return &budget{l: l, added: map[int]float64{}} }

// headroom is cpu's headroom after the moves planned so far.
func (b *budget) headroom(cpu int) Headroom {
	h := b.l.Headroom(cpu)
	if h.Measured {
		h.Busy += b.added[cpu]
		h.Spare = max(0, HeadroomBusyMaxPct-h.Busy)
	}
	return h
}

// roomy are the CPUs of set with spare time left, most spare first.
func (b *budget) roomy(set cpuset.Set) []Headroom {
	var out []Headroom
	for _, c := range set.CPUs() {
		if h := b.headroom(c); h.Measured && h.Spare > 0 {
			out = append(out, h)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Spare > out[j].Spare })
	return out
}

// spread moves total percent of a CPU's work evenly over as many CPUs of
// targets as can take their share; with keep, the CPU it comes from keeps
// one share too (queue IRQs spread over it and the targets). It drops the
// CPU with the least room until every share fits, and commits the shares to
// the budget. No CPUs when none can take a share.
func (b *budget) spread(targets cpuset.Set, total float64, keep bool) (cpuset.Set, []Prediction) {
	return b.spreadAtMost(targets, total, keep, targets.Len())
}

// spreadAtMost is spread over at most n CPUs (n queues to spread).
func (b *budget) spreadAtMost(targets cpuset.Set, total float64, keep bool, n int) (cpuset.Set, []Prediction) {
	cand := b.roomy(targets)
	if len(cand) > n {
		cand = cand[:n]
	}
	for k := len(cand); k > 0; k-- {
		parts := float64(k)
		if keep {
			parts++
		}
		share := total / parts
		fits := true
		for _, h := range cand[:k] {
			if _, ok := h.Fits(share); !ok {
				fits = false
				break
			}
		}
		if !fits {
			continue
		}
		var set cpuset.Set
		var ps []Prediction
		for _, h := range cand[:k] {
			after, _ := h.Fits(share)
			set = set.Add(h.CPU)
			ps = append(ps, Prediction{h.CPU, h.Busy, after})
			b.added[h.CPU] += share
		}
		sort.Slice(ps, func(i, j int) bool { return ps[i].CPU < ps[j].CPU })
		return set, ps
	}
	return cpuset.Set{}, nil
}

// place packs threads (percent of a CPU each; a thread runs on one CPU at
// a time) onto targets, busiest first onto the CPU with the most room left.
// ok is false, and nothing is committed, when one does not fit anywhere.
func (b *budget) place(targets cpuset.Set, threads []float64) (cpuset.Set, []Prediction, bool) {
	if len(threads) == 0 {
		return cpuset.Set{}, nil, false
	}
	ths := slices.Clone(threads)
	sort.Sort(sort.Reverse(sort.Float64Slice(ths)))
	trial := map[int]float64{}
	before := map[int]float64{}
	for _, w := range ths {
		best, bestSpare := -1, -1.0
		for _, h := range b.roomy(targets) {
			h.Busy += trial[h.CPU]
			h.Spare = max(0, HeadroomBusyMaxPct-h.Busy)
			if _, ok := h.Fits(w); ok && h.Spare > bestSpare {
				best, bestSpare = h.CPU, h.Spare
			}
		}
		if best < 0 {
			return cpuset.Set{}, nil, false
		}
		if _, seen := before[best]; !seen {
			before[best] = b.headroom(best).Busy
		}
		trial[best] += w
	}
	var set cpuset.Set
	var ps []Prediction
	for c, w := range trial {
		set = set.Add(c)
		ps = append(ps, Prediction{c, before[c], before[c] + w})
		b.added[c] += w
	}
	sort.Slice(ps, func(i, j int) bool { return ps[i].CPU < ps[j].CPU })
	return set, ps, true
}

// eachFits are the CPUs of targets that could each take all of work
// (one IRQ: the kernel delivers it to one CPU of its affinity list), with
// their predictions. The work is committed to each, to stay on the safe
// side for moves planned after it.
func (b *budget) eachFits(targets cpuset.Set, work float64) (cpuset.Set, []Prediction) {
	var set cpuset.Set
	var ps []Prediction
	for _, h := range b.roomy(targets) {
		if after, ok := h.Fits(work); ok {
			set = set.Add(h.CPU)
			ps = append(ps, Prediction{h.CPU, h.Busy, after})
		}
	}
	for _, p := range ps {
		b.added[p.CPU] += work
	}
	sort.Slice(ps, func(i, j int) bool { return ps[i].CPU < ps[j].CPU })
	return set, ps
}

// noRoom is the sentence for work that fits nowhere: the CPUs it could go
// to and how busy they are.
func (b *budget) noRoom(targets cpuset.Set, what string, pct float64) string {
	var hs []string
	for _, c := range targets.CPUs() {
		hs = append(hs, b.headroom(c).String())
	}
	if len(hs) == 0 {
		return fmt.Sprintf("No other CPU can take %s (%.0f%% of a CPU).", what, pct)
	}
	return fmt.Sprintf("No other CPU has the spare time for %s (%.0f%% of a CPU; %s; a CPU takes work only up to %.0f%% busy), so moving it would only move the wait.",
		what, pct, strings.Join(hs, ", "), HeadroomBusyMaxPct)
}

// cpuNICs are the network devices whose IRQs fired on cpu, busiest first.
func cpuNICs(h *host.Host, l *Load, cpu int) []string {
	var out []string
	for _, d := range cpuDevices(h, l, cpu) {
		if isNIC(h, d) {
			out = append(out, d)
		}
	}
	return out
}

func lowerFirst(s string) string {
	if s == "" {
		return s
	}
	return strings.ToLower(s[:1]) + s[1:]
}

// SetConsumers records which processes consume network traffic: of the
// socket owners (kernel.FS.SocketOwners, read on the live machine), those
// that serve connections or a UDP service port. Without it (captured
// state), doctor cannot tell a server from its load generator and moves no
// application.
func (l *Load) SetConsumers(owners []kernel.SocketOwner) {
	l.Consumers = []kernel.SocketOwner{}
	for _, o := range owners {
		if o.Serves() {
			l.Consumers = append(l.Consumers, o)
		}
	}
}

// consumer is pid's entry in Consumers, nil when it is not one.
func (l *Load) consumer(pid int) *kernel.SocketOwner {
	for i := range l.Consumers {
		if l.Consumers[i].PID == pid {
			return &l.Consumers[i]
		}
	}
	return nil
}

// consumerWhy is "memcached (pid 123) reads the traffic of veth0: it owns
// the listening socket on tcp 10.0.0.2:11211 (32 connections)".
func consumerWhy(o *kernel.SocketOwner) string {
	var socks []string
	for _, s := range o.Listening {
		d := fmt.Sprintf("%s %s", s.Proto, s.Addr)
		if s.Proto == "tcp" {
			d += fmt.Sprintf(" (%d connections)", s.Accepted)
		}
		socks = append(socks, d)
	}
	what := "network traffic"
	if len(o.Devices) > 0 {
		what = "the traffic of " + strings.Join(o.Devices, ", ")
	}
	noun := "the listening socket"
	if len(socks) > 1 {
		noun = "the listening sockets"
	}
	return fmt.Sprintf("%s (pid %d) reads %s: it owns %s on %s", o.Comm, o.PID, what, noun, strings.Join(socks, "; "))
}

// appMoves decides, for the busy application processes on cpu, which a
// fix moves and where: only identified consumers of the traffic, only onto
// other CPUs with the headroom for all of the process's threads that would
// move. It returns the fix's sentences (one per process) and the commands.
func appMoves(h *host.Host, l *Load, b *budget, cpu int, pids []int) (sentences, commands []string) {
	others := otherCPUs(h, l, cpu)
	for _, pid := range pids {
		// The process's name: its main thread's (threads may rename
		// themselves), else its busiest thread's (Tasks is busiest first).
		comm := ""
		var threads []float64
		var total float64
		for _, t := range l.Tasks {
			if t.PID != pid || t.Kernel {
				continue
			}
			if comm == "" || t.TID == pid {
				comm = t.Comm
			}
			// taskset -a moves every thread of the process onto the
			// targets: the work moved is the busy time of those not
			// already running on one of the other CPUs.
			if !others.Contains(t.CPU) {
				threads = append(threads, t.Busy)
				total += t.Busy
			}
		}
		if l.Consumers == nil {
			sentences = append(sentences, fmt.Sprintf("%s (pid %d) stays: which process consumes the traffic is known only from its sockets, read on the live machine, and a busy thread beside the interrupts may be the load generator.", comm, pid))
			continue
		}
		o := l.consumer(pid)
		if o == nil {
			sentences = append(sentences, fmt.Sprintf("%s (pid %d) stays: it serves no listening socket, so it is not the consumer of the traffic here (a client or load generator), and moving it would not separate the traffic from its reader.", comm, pid))
			continue
		}
		comm = o.Comm
		if nics := cpuNICs(h, l, cpu); len(nics) > 0 && len(o.Devices) > 0 && !slices.ContainsFunc(o.Devices, func(d string) bool { return slices.Contains(nics, d) }) {
			sentences = append(sentences, fmt.Sprintf("%s (pid %d) stays: it serves the traffic of %s, not of %s, whose interrupts land on CPU%d.",
				comm, pid, strings.Join(o.Devices, ", "), strings.Join(nics, ", "), cpu))
			continue
		}
		set, ps, ok := b.place(others, threads)
		if !ok {
			sentences = append(sentences, fmt.Sprintf("%s. It stays: %s What would help instead: more CPUs, fewer of its threads, or the interrupt work spread over more queues.",
				consumerWhy(o), lowerFirst(b.noRoom(others, comm+"'s threads", total))))
			continue
		}
		b.record(fmt.Sprintf("%s (pid %d)", comm, pid), pid, cpu, ps)
		cmd := fmt.Sprintf("`taskset -apc %s %d`", set, pid)
		commands = append(commands, cmd)
		sentences = append(sentences, fmt.Sprintf("%s. Move it off CPU%d: %s (%s).", consumerWhy(o), cpu, cmd, predictions(ps)))
	}
	return sentences, commands
}
