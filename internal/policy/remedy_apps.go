package policy

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/irqpilot/irqpilot/internal/cpuset"
	"github.com/irqpilot/irqpilot/internal/diagnose"
	"github.com/irqpilot/irqpilot/internal/kernel"
	"github.com/irqpilot/irqpilot/internal/plan"
)

// withApps adds to the first of bases (best first; none: no other change)
// that leaves room for it the move of each process the finding names that
// is an identified consumer of the device's traffic, onto CPUs with room
// left, when the rules pass; the others stay, and r.stays says why. It
// returns the plans with the moves, best first.
func (r *remedy) withApps(bases []judged) []judged {
	for _, pid := range r.f.PIDs {
		comm, threads := r.process(pid)
		if r.l.Consumers == nil {
			r.stays = append(r.stays, fmt.Sprintf("%s (pid %d) stays: which process consumes the traffic is known only from its sockets, read on the live machine, and a busy thread beside the interrupts may be the load generator.", comm, pid))
			continue
		}
		o := r.l.Consumer(pid)
		if o == nil {
			r.stays = append(r.stays, fmt.Sprintf("%s (pid %d) stays: it serves no listening socket, so it is not the consumer of the traffic here (a client or load generator), and moving it would not separate the traffic from its reader.", comm, pid))
			continue
		}
		comm = o.Comm
		if r.f.Device != "" && len(o.Devices) > 0 && !slices.Contains(o.Devices, r.f.Device) {
			r.stays = append(r.stays, fmt.Sprintf("%s (pid %d) stays: it serves the traffic of %s, not of %s, whose interrupts land on CPU %s.",
				comm, pid, strings.Join(o.Devices, ", "), r.f.Device, r.hot))
			continue
		}
		try := bases
		if len(try) == 0 {
			try = []judged{{p: &plan.Plan{}}}
		}
		var moved *judged
		for _, base := range try {
			if moved = r.moveApp(base, o, pid, threads); moved != nil {
				break
			}
		}
		if moved == nil {
			var total float64
			for _, t := range r.l.Tasks {
				if t.PID == pid && !t.Kernel && !r.others.Contains(t.CPU) {
					total += t.Busy
				}
			}
			r.stays = append(r.stays, fmt.Sprintf("%s. It stays: %s What would help instead: more CPUs, fewer of its threads, or the interrupt work spread over more queues.",
				consumerWhy(o), lowerFirst(r.noRoomFor(r.others, comm+"'s threads", total))))
			continue
		}
		bases = []judged{*moved}
	}
	return bases
}

// moveApp adds to base the move of consumer pid (threads busy threads)
// onto CPUs with room left after base: as many CPUs as it has busy
// threads, down to one, the least busy first, then each other single CPU.
// nil when no placement passes the rules.
func (r *remedy) moveApp(base judged, o *kernel.SocketOwner, pid, threads int) *judged {
	name := ""
	if base.name != "" {
		name = base.name + ", then "
	}
	m := newModel(r.h, r.l, steeredDevices(base.p))
	after := m.Predict(base.p)
	var roomy []int
	for _, c := range r.others.CPUs() {
		if hr := diagnose.HeadroomOf(r.l, c); hr.Measured && after.Busy[c] < diagnose.HeadroomBusyMaxPct {
			roomy = append(roomy, c)
		}
	}
	sort.SliceStable(roomy, func(i, j int) bool { return after.Busy[roomy[i]] < after.Busy[roomy[j]] })
	var sets []cpuset.Set
	for k := min(threads, len(roomy)); k > 1; k-- {
		sets = append(sets, cpuset.Of(roomy[:k]...))
	}
	for _, c := range roomy {
		sets = append(sets, cpuset.Of(c))
	}
	for _, set := range sets {
		p := base.p.Clone()
		p.Apps = append(p.Apps, plan.AppEntry{PID: pid, CPUs: set, Reason: consumerWhy(o) + fmt.Sprintf("; it leaves CPU %s to the interrupt work", r.hot)})
		j, reject := r.judge(fmt.Sprintf("%smove %s (pid %d) onto CPUs %s", name, o.Comm, pid, set), p)
		if reject == "" && j.gain > moveEpsilon {
			return &j
		}
	}
	return nil
}

// process is pid's name (its main thread's, else its busiest thread's)
// and how many of its threads the measurement saw busy.
func (r *remedy) process(pid int) (comm string, threads int) {
	for _, t := range r.l.Tasks {
		if t.PID != pid || t.Kernel {
			continue
		}
		if comm == "" || t.TID == pid {
			comm = t.Comm
		}
		threads++
	}
	return comm, threads
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

func lowerFirst(s string) string {
	if s == "" {
		return s
	}
	return strings.ToLower(s[:1]) + s[1:]
}
