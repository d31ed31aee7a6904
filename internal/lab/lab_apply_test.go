package lab

import (
	"encoding/json"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/irqpilot/irqpilot/internal/cpuset"
	"github.com/irqpilot/irqpilot/internal/host"
	"github.com/irqpilot/irqpilot/internal/plan"
)

// applyRevertScript applies each policy's plan for the multi-queue NIC
// (eth0, the virtio-net), a machine-wide plan and a coalescing plan for
// the e1000e (eth1), reverting each and comparing every IRQ's affinity and
// every queue's steering with what they were before, byte for byte.
const applyRevertScript = `
snap() {
  for d in /proc/irq/[0-9]*; do printf '%s %s\n' "$d" "$(cat $d/smp_affinity_list)"; done
  for f in /sys/class/net/eth*/queues/*/rps_cpus /sys/class/net/eth*/queues/*/rps_flow_cnt /sys/class/net/eth*/queues/*/xps_cpus; do
    printf '%s %s\n' "$f" "$(cat $f 2>/dev/null)"
  done
  printf 'rps_sock_flow_entries %s\n' "$(cat /proc/sys/net/core/rps_sock_flow_entries)"
}
coal() { irqpilot coalesce show --json | tr -d ' \n' | grep -o '"name":"eth1"[^}]*' ; }
roundtrip() { # name plan-file
  irqpilot apply "$2" > /tmp/$1.apply 2>&1 || { echo "APPLY-FAIL $1"; cat /tmp/$1.apply; }
  snap > /tmp/during-$1
  cmp -s /tmp/before /tmp/during-$1 && echo "UNCHANGED $1" || echo "CHANGED $1"
  irqpilot revert > /tmp/$1.revert 2>&1 || { echo "REVERT-FAIL $1"; cat /tmp/$1.revert; }
  snap > /tmp/after-$1
  if cmp -s /tmp/before /tmp/after-$1; then echo "EXACT $1"; else echo "NOT-EXACT $1"; diff /tmp/before /tmp/after-$1; fi
}
snap > /tmp/before
for p in dedicated-core per-queue colocate rps-spread; do
  if irqpilot plan --policy $p --device eth0 -o /tmp/$p.yaml 2>/tmp/$p.plan.err; then roundtrip $p /tmp/$p.yaml
  else echo "PLAN-FAIL $p"; cat /tmp/$p.plan.err; fi
done
if irqpilot plan --policy dedicated-core --machine-wide -o /tmp/mw.yaml 2>/tmp/mw.err; then roundtrip machine-wide /tmp/mw.yaml
else echo "PLAN-FAIL machine-wide"; cat /tmp/mw.err; fi
echo "@@BEFORE"; cat /tmp/before
echo "@@DURING-MW"; cat /tmp/during-machine-wide
echo "@@PROBED"; irqpilot inventory --json --probe-managed
echo "@@END"
if [ -e /sys/class/net/eth1 ]; then # the e1000e (the big shape has none)
coal > /tmp/coal-before
cat > /tmp/coal.yaml <<PLAN
version: 1
policy: hand
why: the lab sets e1000e interrupt moderation through the driver
coalesce:
  - device: eth1
    rx_usecs: 50
    reason: lab
PLAN
irqpilot apply /tmp/coal.yaml > /tmp/coal.apply 2>&1 || { echo "APPLY-FAIL coalesce"; cat /tmp/coal.apply; }
coal > /tmp/coal-during
irqpilot revert > /tmp/coal.revert 2>&1 || { echo "REVERT-FAIL coalesce"; cat /tmp/coal.revert; }
coal > /tmp/coal-after
echo "COAL-BEFORE $(cat /tmp/coal-before)"
echo "COAL-DURING $(cat /tmp/coal-during)"
echo "COAL-AFTER $(cat /tmp/coal-after)"
fi
`

// TestLabApplyRevert: on the real kernel and drivers every policy's plan
// for the multi-queue NIC applies and reverts byte-exact, a machine-wide
// plan skips the managed NVMe and virtio-blk queue IRQs and fails nothing,
// and e1000e's coalescing (on the shapes that have one) is set through the driver, read back and
// reverted.
func TestLabApplyRevert(t *testing.T) {
	eachCase(t, func(t *testing.T, c labCase) {
		s := c.Shape
		r := runGuest(t, Options{Shape: s, Kernel: c.Kernel, Script: applyRevertScript})
		t.Logf("%s ran in %s:\n%s", s.Name, r.Elapsed.Round(100e6), r.Output)
		out := r.Output
		for _, bad := range []string{"PLAN-FAIL", "APPLY-FAIL", "REVERT-FAIL", "NOT-EXACT"} {
			if strings.Contains(out, bad) {
				t.Errorf("%s in the guest", bad)
			}
		}
		for _, p := range []string{"dedicated-core", "per-queue", "colocate", "rps-spread", "machine-wide"} {
			if !strings.Contains(out, "EXACT "+p+"\n") {
				t.Errorf("%s: not reverted exactly", p)
			}
		}
		// Every plan for an 8-CPU guest's 4-queue NIC changes
		// something: a plan that changes nothing also "reverts
		// exactly", so EXACT alone proves nothing.
		for _, p := range []string{"dedicated-core", "per-queue", "colocate", "rps-spread", "machine-wide"} {
			if !strings.Contains(out, "CHANGED "+p+"\n") {
				t.Errorf("%s changed nothing on the guest", p)
			}
		}
		// The machine-wide plan (every IRQ, not only the NICs')
		// leaves each kernel-managed IRQ (NVMe's and virtio-blk's
		// queue IRQs, found by the probe) as it was, and fails
		// nothing (APPLY-FAIL above).
		var probed host.Host
		if err := json.Unmarshal([]byte(section(out, "@@PROBED")), &probed); err != nil {
			t.Fatalf("probed inventory: %v", err)
		}
		irqBefore, irqDuring := affinities(section(out, "@@BEFORE")), affinities(section(out, "@@DURING-MW"))
		managed := 0
		for _, q := range probed.IRQs {
			if q.Managed != host.ManagedYes {
				continue
			}
			managed++
			if b, d := irqBefore[q.Number], irqDuring[q.Number]; b == "" || b != d {
				t.Errorf("managed IRQ %d (%v): affinity %q before the machine-wide plan, %q during it", q.Number, q.Actions, b, d)
			}
		}
		if managed == 0 {
			t.Errorf("the probe found no kernel-managed IRQ: the machine-wide plan's skip was not exercised")
		}
		if !hasNIC(s, "e1000e") {
			if strings.Contains(out, "COAL-BEFORE") {
				t.Errorf("the coalescing plan ran on a shape without an e1000e")
			}
			return
		}
		before, during, after := field(out, "COAL-BEFORE"), field(out, "COAL-DURING"), field(out, "COAL-AFTER")
		if !strings.Contains(during, `"rx_usecs":50`) {
			t.Errorf("e1000e rx_usecs not 50 after apply: %s", during)
		}
		if before == "" || before != after {
			t.Errorf("e1000e coalescing not reverted: before %s, after %s", before, after)
		}
	})
}

// policiesScript prints each placement policy's plan for the multi-queue
// NIC as JSON, applies per-queue and reads back what the kernel shows for
// every queue IRQ right after the write: the mask, and the CPU the IRQ is
// delivered to (x86 moves an MSI IRQ at its next interrupt, so an idle
// queue's effective CPU may still be the old one).
const policiesScript = `
for p in per-queue colocate; do
  echo "@@PLAN $p"
  irqpilot plan --policy $p --device eth0 --json 2>/dev/null
done
echo "@@APPLY"
irqpilot plan --policy per-queue --device eth0 -o /tmp/pq.yaml >/dev/null 2>&1
irqpilot apply /tmp/pq.yaml > /tmp/apply.out 2>&1; echo "APPLY-RC $?"
for i in $(awk '/-input\.[0-9]+$/ {sub(":","",$1); print $1}' /proc/interrupts); do
  echo "IRQ $i $(cat /proc/irq/$i/smp_affinity_list) $(cat /proc/irq/$i/effective_affinity_list)"
done
echo "@@APPLY-OUT"; cat /tmp/apply.out
`

// TestLabPolicies: on the shape's real topology (the kernel's own view of
// packages, SMT siblings and nodes, the NIC behind its node's bridge)
// per-queue gives each queue IRQ its own physical core on the NIC's node,
// SMT siblings only after every core has one, and leaves the application
// at least half of the CPUs (docs/policies.md: each queue its own CPU of the
// NIC's node while half the usable CPUs stay free of queue IRQs); colocate
// keeps the NIC's work on its node;
// the kernel takes every mask.
func TestLabPolicies(t *testing.T) {
	eachCase(t, func(t *testing.T, c labCase) {
		s := c.Shape
		r := runGuest(t, Options{Shape: s, Kernel: c.Kernel, Script: policiesScript})
		t.Logf("%s ran in %s:\n%s", s.Name, r.Elapsed.Round(100e6), r.Output)
		nic := s.NICs[0]
		first, last := s.NodeCPUs(nic.Node)
		node := map[int]bool{}
		for c := first; c <= last; c++ {
			node[c] = true
		}
		// QEMU numbers threads within a core consecutively.
		core := func(c int) int { return c / s.Threads }
		plans := map[string]*plan.Plan{}
		for _, p := range []string{"per-queue", "colocate"} {
			js := section(r.Output, "@@PLAN "+p)
			var wrap struct {
				Plan plan.Plan `json:"plan"`
			}
			if err := json.Unmarshal([]byte(js), &wrap); err != nil {
				t.Fatalf("%s plan: %v\n%s", p, err, js)
			}
			pl := &wrap.Plan
			plans[p] = pl
			cpus := map[int]bool{}
			cores := map[int]bool{}
			for _, e := range pl.IRQs {
				for _, c := range e.CPUs.CPUs() {
					if !node[c] {
						t.Errorf("%s: IRQ %v on CPU %d, off the NIC's node %d (%d-%d)", p, e.IRQ, c, nic.Node, first, last)
					}
					cpus[c] = true
					cores[core(c)] = true
				}
			}
			if len(cpus) == 0 {
				t.Fatalf("%s placed no queue IRQ", p)
			}
			// One physical core per queue IRQ while the node has
			// cores left; SMT siblings only once every core has one.
			// (Counting against the queue IRQs, not the CPUs used:
			// every IRQ on one CPU uses one core of one CPU.)
			physical := (last - first + 1) / s.Threads
			if want := min(physical, nic.Queues); len(cores) < want {
				t.Errorf("%s: %d IRQ entries on CPUs %v use %d cores of the node's %d; want at least %d (one per queue while cores last)", p, len(pl.IRQs), keys(cpus), len(cores), physical, want)
			}
			// In the plan's order (queue by queue; a virtio-net queue
			// has two IRQs, placed together), the first queues' CPUs
			// each take a core of their own: no SMT sibling of an
			// earlier one while a core of the node has none (able to
			// fail on a shape with two threads per core, as the small
			// one is).
			if p == "per-queue" && s.Threads > 1 {
				var order []int
				for _, e := range pl.IRQs {
					if c := e.CPUs.Min(); !slices.Contains(order, c) {
						order = append(order, c)
					}
				}
				// One CPU per queue while the node has CPUs: two
				// queues on one CPU would pass the core check below.
				if want := min(last-first+1, nic.Queues); len(order) < want {
					t.Errorf("per-queue: queue IRQs on %d CPUs %v, want %d (one per queue)", len(order), order, want)
				}
				seen := map[int]int{}
				for i, c := range order[:min(len(order), physical, nic.Queues)] {
					if j, dup := seen[core(c)]; dup {
						t.Errorf("per-queue: queue CPUs in plan order %v: CPU %d (the %d. placed) shares core %d with CPU %d while the node has %d cores", order, c, i+1, core(c), order[j], physical)
					}
					seen[core(c)] = i
				}
			}
			t.Logf("%s: queue IRQ CPUs %v, app_cpus %v", p, keys(cpus), pl.AppCPUs)
		}
		// At least half, and exactly the CPUs without a queue IRQ.
		if a := plans["per-queue"].AppCPUs; a == nil || 2*len(a.CPUs()) < s.CPUs() {
			t.Errorf("per-queue leaves the application %v of %d CPUs, less than half", a, s.CPUs())
		} else {
			irqCPUs := cpuset.Set{}
			for _, e := range plans["per-queue"].IRQs {
				irqCPUs = irqCPUs.Union(e.CPUs)
			}
			if !a.Intersect(irqCPUs).IsEmpty() || a.Union(irqCPUs).Len() != s.CPUs() {
				t.Errorf("per-queue: application CPUs %s and queue IRQ CPUs %s overlap or leave CPUs unused", a, irqCPUs)
			}
		}
		if got := field(r.Output, "APPLY-RC"); got != "0" {
			t.Errorf("apply per-queue: rc %s\n%s", got, section(r.Output, "@@APPLY-OUT"))
		}
		pending := 0
		for _, l := range strings.Split(r.Output, "\n") {
			f := strings.Fields(l)
			if len(f) == 4 && f[0] == "IRQ" {
				if f[2] != f[3] && !strings.Contains(","+f[2]+",", ","+f[3]+",") {
					pending++
				}
			}
		}
		// apply counts the moves pending when it wrote; some may land
		// before the read-back here, none can start pending after it.
		said := 0
		if m := regexp.MustCompile(`(\d+) moves pending`).FindStringSubmatch(section(r.Output, "@@APPLY-OUT")); m != nil {
			said, _ = strconv.Atoi(m[1])
		} else if strings.Contains(section(r.Output, "@@APPLY-OUT"), "move pending") {
			said = 1
		}
		if pending > said {
			t.Errorf("%d queue IRQs still delivered outside their new mask, apply said %d moves pending:\n%s", pending, said, section(r.Output, "@@APPLY-OUT"))
		}
	})
}

// TestLabNVMeCoalescing: the NVMe controller takes irqpilot's Set Features
// 08h (interrupt coalescing) through the admin passthrough, with reads in
// flight to decide on.
func TestLabNVMeCoalescing(t *testing.T) {
	eachKernel(t, labNVMeCoalescing)
}

func labNVMeCoalescing(t *testing.T, c labCase) {
	s := c.Shape
	if !s.NVMe {
		t.Skipf("shape %s has no NVMe", s.Name)
	}
	r := runGuest(t, Options{Shape: s, Kernel: c.Kernel, Script: `
for i in 1 2 3 4 5 6 7 8; do (while :; do echo 3 > /proc/sys/vm/drop_caches; dd if=/dev/nvme0n1 of=/dev/null bs=64k 2>/dev/null; done) & done
irqpilot coalesce nvme --dry-run=false --count 3 --epoch 1s --cif-threshold 1 --trickle-iops 1; echo "NVME-RC $?"
`})
	t.Logf("%s:\n%s", s.Name, r.Output)
	if got := field(r.Output, "NVME-RC"); got != "0" {
		t.Fatalf("coalesce nvme exited %s", got)
	}
	if !strings.Contains(r.Output, "set features 08h") || !strings.Contains(r.Output, " sent") {
		t.Errorf("no Set Features 08h was sent to the controller")
	}
}

// affinities reads snap's "/proc/irq/N smp_affinity_list" lines.
func affinities(snap string) map[int]string {
	out := map[int]string{}
	for _, l := range strings.Split(snap, "\n") {
		f := strings.Fields(l)
		if len(f) != 2 {
			continue
		}
		if n, err := strconv.Atoi(strings.TrimPrefix(f[0], "/proc/irq/")); err == nil {
			out[n] = f[1]
		}
	}
	return out
}

// hasNIC reports whether the shape has a NIC of QEMU's model.
func hasNIC(s Shape, model string) bool {
	for _, n := range s.NICs {
		if n.Model == model {
			return true
		}
	}
	return false
}
