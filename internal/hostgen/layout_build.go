package hostgen

import (
	"fmt"
	"math/rand"
	"sort"

	"github.com/irqpilot/irqpilot/internal/cpuset"
)

// Build computes the layout without writing anything.
func Build(spec Spec) (*Layout, error) {
	s := spec
	s.fill()
	if s.CPUs <= 0 || s.CPUs > cpuset.MaxCPU {
		return nil, fmt.Errorf("hostgen: %d CPUs out of range", s.CPUs)
	}
	if s.ThreadsPerCore < 1 || s.CPUs%s.ThreadsPerCore != 0 {
		return nil, fmt.Errorf("hostgen: %d CPUs do not split into cores of %d threads", s.CPUs, s.ThreadsPerCore)
	}
	cores := s.CPUs / s.ThreadsPerCore
	if s.Packages < 1 || cores%s.Packages != 0 || s.Nodes < s.Packages || s.Nodes%s.Packages != 0 {
		return nil, fmt.Errorf("hostgen: %d cores, %d packages and %d nodes do not divide evenly", cores, s.Packages, s.Nodes)
	}
	corePerPkg := cores / s.Packages
	nodesPerPkg := s.Nodes / s.Packages
	if corePerPkg%nodesPerPkg != 0 {
		return nil, fmt.Errorf("hostgen: %d cores per package do not split into %d nodes", corePerPkg, nodesPerPkg)
	}
	corePerNode := corePerPkg / nodesPerPkg
	L := &Layout{Spec: s, Possible: cpuset.Range(0, s.CPUs-1)}
	if s.Offline.Contains(0) || s.Offline.Max() >= s.CPUs {
		return nil, fmt.Errorf("hostgen: offline set %s must exclude CPU 0 and stay below %d", s.Offline, s.CPUs)
	}
	L.Offline = *s.Offline
	L.Online = L.Possible.Difference(L.Offline)

	// Linux x86 enumeration: first threads of all cores, then second threads.
	L.CPUs = make([]CPU, s.CPUs)
	pkgCPUs := make([]cpuset.Set, s.Packages)
	coreCPUs := make([]cpuset.Set, cores)
	nodeAll := make([]cpuset.Set, s.Nodes)
	for id := 0; id < s.CPUs; id++ {
		k := id % cores
		pkg := k / corePerPkg
		inPkg := k % corePerPkg
		node := pkg*nodesPerPkg + inPkg/corePerNode
		L.CPUs[id] = CPU{ID: id, Core: inPkg, Package: pkg, Node: node, Online: L.Online.Contains(id)}
		nodeAll[node] = nodeAll[node].Add(id)
		if L.CPUs[id].Online {
			pkgCPUs[pkg] = pkgCPUs[pkg].Add(id)
			coreCPUs[k] = coreCPUs[k].Add(id)
		}
	}
	L.Nodes = make([]cpuset.Set, s.Nodes)
	for n := range nodeAll {
		L.Nodes[n] = nodeAll[n].Intersect(L.Online)
	}
	for id := range L.CPUs {
		if c := &L.CPUs[id]; c.Online {
			c.Siblings = coreCPUs[id%cores]
			c.L3 = pkgCPUs[c.Package]
		}
	}
	if err := L.buildIRQs(nodeAll); err != nil {
		return nil, err
	}
	L.buildCounters()
	return L, nil
}

func (L *Layout) buildIRQs(nodeAll []cpuset.Set) error {
	s := L.Spec
	r := rand.New(rand.NewSource(s.Counts.Seed))
	first := func(set cpuset.Set) cpuset.Set {
		if m := set.Intersect(L.Online).Min(); m >= 0 {
			return cpuset.Of(m)
		}
		return cpuset.Of(set.Min())
	}
	add := func(q IRQ) {
		q.Base, q.Rate = map[int]uint64{}, map[int]uint64{}
		L.IRQs = append(L.IRQs, q)
	}
	all := L.Possible
	cpu0 := cpuset.Of(0)
	add(IRQ{Number: 0, Chip: "IO-APIC", HWIRQ: 2, Trigger: "edge", Actions: []string{"timer"}, Affinity: cpu0, Effective: cpu0, Managed: true, Queue: -1})
	add(IRQ{Number: 8, Chip: "IO-APIC", HWIRQ: 8, Trigger: "edge", Actions: []string{"rtc0"}, Affinity: all, Effective: cpu0, Queue: -1})
	add(IRQ{Number: 9, Chip: "IO-APIC", HWIRQ: 9, Trigger: "fasteoi", Actions: []string{"acpi"}, Affinity: all, Effective: cpu0, Queue: -1})
	add(IRQ{Number: 16, Chip: "IO-APIC", HWIRQ: 16, Trigger: "fasteoi", Actions: []string{"i801_smbus"}, Affinity: all, Effective: cpu0, Queue: -1})
	next := 24
	add(IRQ{Number: next, Chip: "DMAR-MSI", HWIRQ: 0, Trigger: "edge", Actions: []string{"dmar0"}, Affinity: all, Effective: cpu0, Queue: -1})
	next++

	if s.NVMeQueues > 0 {
		if s.NVMeQueues > s.CPUs {
			return fmt.Errorf("hostgen: %d NVMe queues exceed %d CPUs", s.NVMeQueues, s.CPUs)
		}
		if s.NVMeNode < 0 || s.NVMeNode >= s.Nodes {
			return fmt.Errorf("hostgen: NVMe node %d out of range", s.NVMeNode)
		}
		pci := "0000:00:04.0"
		chip := "IR-PCI-MSIX-" + pci
		nv := &NVMe{PCI: pci, Node: s.NVMeNode, AdminIRQ: next}
		local := L.Nodes[s.NVMeNode]
		add(IRQ{Number: next, Chip: chip, HWIRQ: 0, Trigger: "edge", Actions: []string{"nvme0q0"}, Affinity: all, Effective: first(local), Node: s.NVMeNode, Device: "nvme0", Queue: 0})
		next++
		nv.QueueCPUs = spreadManaged(nodeAll, s.NVMeQueues)
		for i, cpus := range nv.QueueCPUs {
			node := L.CPUs[cpus.Min()].Node
			add(IRQ{Number: next, Chip: chip, HWIRQ: i + 1, Trigger: "edge", Actions: []string{fmt.Sprintf("nvme0q%d", i+1)},
				Affinity: cpus, Effective: first(cpus), Node: node, Managed: true, Device: "nvme0", Queue: i + 1})
			nv.QueueIRQs = append(nv.QueueIRQs, next)
			next++
		}
		L.NVMe = nv
	}
	for _, ns := range s.NICs {
		if ns.Node < 0 || ns.Node >= s.Nodes || ns.Queues < 1 {
			return fmt.Errorf("hostgen: NIC %s: node %d or %d queues out of range", ns.Name, ns.Node, ns.Queues)
		}
		if ns.Driver == "" {
			ns.Driver = "ice"
		}
		pci := fmt.Sprintf("0000:00:%02x.0", ns.Slot)
		chip := "IR-PCI-MSIX-" + pci
		n := NIC{Spec: ns, PCI: pci, Local: L.Nodes[ns.Node], MiscIRQ: next}
		add(IRQ{Number: next, Chip: chip, HWIRQ: 0, Trigger: "edge", Actions: []string{"ice-" + pci + ":misc"},
			Affinity: all, Effective: first(n.Local), Node: ns.Node, Device: ns.Name, Queue: -1})
		next++
		spread := localSpread(n.Local, L.Online)
		for q := 0; q < ns.Queues; q++ {
			c := cpuset.Of(spread[q%len(spread)])
			add(IRQ{Number: next, Chip: chip, HWIRQ: q + 1, Trigger: "edge",
				Actions:  []string{fmt.Sprintf("%s-%s-TxRx-%d", ns.Driver, ns.Name, q)},
				Affinity: c, Effective: c, Node: ns.Node, Device: ns.Name, Queue: q})
			n.QueueIRQs = append(n.QueueIRQs, next)
			next++
		}
		L.NICs = append(L.NICs, n)
	}
	sort.Slice(L.IRQs, func(i, j int) bool { return L.IRQs[i].Number < L.IRQs[j].Number })

	// Counts: each IRQ fires on its effective CPU; a little history on CPU 0
	// from before the affinity was set.
	for i := range L.IRQs {
		q := &L.IRQs[i]
		var rate uint64
		switch {
		case q.Number == 0:
			rate = 0
		case q.Device == "nvme0" && q.Queue > 0: // I/O queue
			rate = 100 + uint64(r.Intn(3000))
		case q.Device != "" && q.Device != "nvme0" && q.Queue >= 0: // NIC TxRx queue
			rate = 2000 + uint64(r.Intn(8000))
		case q.Device != "": // admin queue, misc vector
			rate = uint64(r.Intn(3))
		default:
			rate = uint64(r.Intn(2))
		}
		c := q.Effective.Min()
		if L.Online.Contains(c) {
			q.Rate[c] = rate
			q.Base[c] = rate*uptime + uint64(r.Intn(1000))
		}
		q.Base[0] += uint64(r.Intn(50))
		if q.Number == 0 {
			q.Base[0] = 45
		}
	}
	return nil
}

// localSpread orders CPUs the way cpumask_local_spread hands them to a
// driver: the device node's online CPUs first, then all others.
func localSpread(local, online cpuset.Set) []int {
	out := local.CPUs()
	return append(out, online.Difference(local).CPUs()...)
}

// spreadManaged splits the possible CPUs into n groups the way the kernel's
// group_cpus_evenly does for managed IRQs: vectors are shared out between
// nodes in proportion to their CPUs, and each node's CPUs are cut into
// consecutive, nearly equal groups.
func spreadManaged(nodes []cpuset.Set, n int) []cpuset.Set {
	total := 0
	for _, s := range nodes {
		total += s.Len()
	}
	per := make([]int, len(nodes))
	given := 0
	for i, s := range nodes {
		per[i] = n * s.Len() / total
		if per[i] == 0 && s.Len() > 0 {
			per[i] = 1
		}
		given += per[i]
	}
	for i := 0; given < n; i = (i + 1) % len(nodes) {
		if per[i] < nodes[i].Len() {
			per[i]++
			given++
		}
	}
	for i := len(nodes) - 1; given > n; i = (i + len(nodes) - 1) % len(nodes) {
		if per[i] > 1 {
			per[i]--
			given--
		}
	}
	var out []cpuset.Set
	for i, s := range nodes {
		cpus := s.CPUs()
		v := per[i]
		for g := 0; g < v; g++ {
			lo, hi := g*len(cpus)/v, (g+1)*len(cpus)/v
			out = append(out, cpuset.Of(cpus[lo:hi]...))
		}
	}
	return out
}

var softirqNames = []string{"HI", "TIMER", "NET_TX", "NET_RX", "BLOCK", "IRQ_POLL", "TASKLET", "SCHED", "HRTIMER", "RCU"}

var summaryRows = []struct{ name, desc string }{
	{"NMI", "Non-maskable interrupts"}, {"LOC", "Local timer interrupts"}, {"SPU", "Spurious interrupts"},
	{"PMI", "Performance monitoring interrupts"}, {"IWI", "IRQ work interrupts"}, {"RTR", "APIC ICR read retries"},
	{"RES", "Rescheduling interrupts"}, {"CAL", "Function call interrupts"}, {"TLB", "TLB shootdowns"},
	{"TRM", "Thermal event interrupts"}, {"THR", "Threshold APIC interrupts"}, {"DFR", "Deferred Error APIC interrupts"},
	{"MCE", "Machine check exceptions"}, {"MCP", "Machine check polls"},
}

func (L *Layout) buildCounters() {
	r := rand.New(rand.NewSource(L.Spec.Counts.Seed + 1))
	netRate := map[int]uint64{}
	blkRate := map[int]uint64{}
	for _, q := range L.IRQs {
		for c, v := range q.Rate {
			switch {
			case q.Device == "nvme0":
				blkRate[c] += v
			case q.Device != "":
				netRate[c] += v
			}
		}
	}
	L.SoftirqBase, L.SoftirqRate = map[string]map[int]uint64{}, map[string]map[int]uint64{}
	for _, n := range softirqNames {
		L.SoftirqBase[n], L.SoftirqRate[n] = map[int]uint64{}, map[int]uint64{}
	}
	L.SummaryBase, L.SummaryRate = map[string]map[int]uint64{}, map[string]map[int]uint64{}
	for _, row := range summaryRows {
		L.SummaryBase[row.name], L.SummaryRate[row.name] = map[int]uint64{}, map[int]uint64{}
	}
	L.TicksBase, L.TicksRate = map[int][10]uint64{}, map[int][10]uint64{}
	L.SoftnetBase, L.SoftnetRate = map[int]uint64{}, map[int]uint64{}
	for _, c := range L.Possible.CPUs() {
		on := L.Online.Contains(c)
		rates := map[string]uint64{}
		if on {
			rates = map[string]uint64{
				"TIMER": 250, "NET_RX": netRate[c], "NET_TX": netRate[c] / 10, "BLOCK": blkRate[c],
				"SCHED": 50 + uint64(r.Intn(100)), "RCU": 100 + uint64(r.Intn(200)), "TASKLET": uint64(r.Intn(2)),
			}
		}
		for _, n := range softirqNames {
			L.SoftirqRate[n][c] = rates[n]
			L.SoftirqBase[n][c] = rates[n]*uptime + uint64(r.Intn(100))
		}
		srates := map[string]uint64{}
		if on {
			srates = map[string]uint64{"LOC": 250, "RES": 20 + uint64(r.Intn(50)), "CAL": 10 + uint64(r.Intn(30)),
				"TLB": uint64(r.Intn(10)), "NMI": 1, "PMI": 1, "IWI": uint64(r.Intn(3)), "MCP": 0}
		}
		for _, row := range summaryRows {
			L.SummaryRate[row.name][c] = srates[row.name]
			L.SummaryBase[row.name][c] = srates[row.name] * uptime
		}
		if !on {
			continue
		}
		// USER_HZ = 100 ticks per second per CPU:
		// user nice system idle iowait irq softirq steal guest guest_nice.
		soft := min(netRate[c]/200+blkRate[c]/1000, 80)
		irq := uint64(0)
		if netRate[c]+blkRate[c] > 0 {
			irq = 2
		}
		user, sys := 10+uint64(r.Intn(10)), 5+uint64(r.Intn(5))
		if user+sys+irq+soft > 100 {
			user, sys = 100-irq-soft, 0
		}
		rate := [10]uint64{user, 0, sys, 100 - user - sys - irq - soft, 0, irq, soft, 0, 0, 0}
		var base [10]uint64
		for i := range rate {
			base[i] = rate[i] * uptime
		}
		L.TicksRate[c], L.TicksBase[c] = rate, base
		L.SoftnetRate[c] = netRate[c] * 8
		L.SoftnetBase[c] = netRate[c] * 8 * uptime
	}
}
