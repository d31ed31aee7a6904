package host

import (
	"regexp"
	"sort"
	"strings"
)

// This file turns IRQ action names (and the devices found in sysfs) into a
// class, a device and a queue for every IRQ. The action names are the
// drivers' own conventions, read by parseAction (classify_action.go),
// whose patterns name the drivers they come from. Name parsing alone
// already classifies a snapshot that holds only /proc/interrupts; sysfs
// (NIC.IRQs, BlockDev.IRQs from msi_irqs) decides ownership when it is
// there.

// classifyIRQs sets Class, Device, Queue and QueueKind of every IRQ and fills
// NIC.IRQs, RxQueue.IRQ, TxQueue.IRQ, BlockDev.IRQs and BlockQueue.IRQ to
// match. readNICs and readBlock have put into NIC.IRQs and BlockDev.IRQs the
// IRQs that sysfs ties to each device (msi_irqs, virtio and name matches);
// everything else is decided by the action names alone.
func classifyIRQs(h *Host) {
	infos := make([]actionInfo, len(h.IRQs))
	for i := range h.IRQs {
		infos[i] = irqInfo(&h.IRQs[i])
	}
	assignGVEQueues(h, infos)

	// Owners from sysfs.
	nicOwners := map[int][]int{} // irq → NIC indexes
	for i := range h.NICs {
		for _, n := range h.NICs[i].IRQs {
			nicOwners[n] = append(nicOwners[n], i)
		}
	}
	blkOwners := map[int][]int{} // irq → block indexes
	for i := range h.Block {
		for _, n := range h.Block[i].IRQs {
			blkOwners[n] = append(blkOwners[n], i)
		}
	}
	// What the IRQ table itself says about PCI functions: a queue vector
	// "ice-ens3f0-TxRx-0" on chip "IR-PCI-MSIX-0000:4b:00.0" ties that
	// function to ens3f0, so "ice-0000:4b:00.0:misc" belongs to ens3f0 too.
	pciNet := map[string]string{}
	pciBlk := map[string]string{}
	netdevs := map[string]bool{}
	for i := range h.NICs {
		netdevs[h.NICs[i].Name] = true
		if a := h.NICs[i].BusAddr; a != "" && !h.NICs[i].Virtual {
			if _, ok := pciNet[a]; !ok {
				pciNet[a] = h.NICs[i].Name
			}
		}
	}
	// A virtio device with "input.N" queues is a NIC, with "req.N" a disk:
	// its "virtioN-config" vector belongs to the same class.
	virtClass := map[string]Class{}
	for i := range h.IRQs {
		ai := infos[i]
		cp := chipPCI(h.IRQs[i].Chip)
		if ai.virtio != "" && ai.class != "" {
			virtClass[ai.virtio] = ai.class
		}
		if ai.netdev != "" {
			netdevs[ai.netdev] = true
			if cp != "" {
				if _, ok := pciNet[cp]; !ok {
					pciNet[cp] = ai.netdev
				}
			}
		}
		if ai.class == ClassStorage && ai.ctrl != "" && cp != "" {
			if _, ok := pciBlk[cp]; !ok {
				pciBlk[cp] = ai.ctrl
			}
		}
	}

	tieSinglePort(infos, pciNet)
	corroborateStems(h, infos, netdevs)

	for i := range h.IRQs {
		q := &h.IRQs[i]
		ai := infos[i]
		q.Class, q.Device, q.Queue, q.QueueKind, q.ByName, q.SharedWith = ClassOther, "", nil, "", false, nil
		sysfs := false
		switch {
		case ai.class == ClassTimer:
			q.Class = ClassTimer
		case len(nicOwners[q.Number]) > 0:
			q.Class = ClassNetwork
			owner := nicOwners[q.Number][0]
			for _, o := range nicOwners[q.Number] {
				if h.NICs[o].Name == ai.netdev {
					owner = o
				}
			}
			q.Device = h.NICs[owner].Name
			sysfs = true
		case len(blkOwners[q.Number]) > 0:
			q.Class = ClassStorage
			q.Device = ai.ctrl
			if q.Device == "" {
				q.Device = h.Block[blkOwners[q.Number][0]].Name
			}
			sysfs = true
		case ai.class == ClassNetwork || ai.netdev != "":
			q.Class = ClassNetwork
			q.Device = firstNonEmpty(ai.netdev, pciNet[ai.pci], ai.virtio, ai.pci)
		case ai.class == ClassStorage:
			q.Class = ClassStorage
			q.Device = firstNonEmpty(ai.ctrl, pciBlk[ai.pci], ai.virtio, ai.pci)
		case ai.pci != "" && pciNet[ai.pci] != "":
			q.Class, q.Device = ClassNetwork, pciNet[ai.pci]
		case ai.pci != "" && pciBlk[ai.pci] != "":
			q.Class, q.Device = ClassStorage, pciBlk[ai.pci]
		case ai.virtio != "" && virtClass[ai.virtio] != "":
			q.Class, q.Device = virtClass[ai.virtio], ai.virtio
		default:
			for _, a := range q.Actions {
				if netdevs[a] { // ixgbe/e1000e name their link vector after the netdev: "eno3"
					q.Class, q.Device = ClassNetwork, a
					break
				}
			}
			if q.Class == ClassOther && ai.virtio != "" {
				// "virtio0-cursor", "virtio3-virtqueues": a virtio device
				// that is neither net nor blk still owns its vectors.
				q.Device = ai.virtio
			}
		}
		q.ByName = !sysfs && (q.Class == ClassNetwork || q.Class == ClassStorage)
		if ai.queue >= 0 {
			switch {
			case q.Class == ClassNetwork && ai.kind != "":
				v := ai.queue
				q.Queue, q.QueueKind = &v, ai.kind
			case q.Class == ClassStorage:
				v := ai.queue
				q.Queue = &v
			}
		}
	}
	// Sharing is a legacy line's: a queue vector (MSI-X) is its queue's,
	// even where two netdevs own one PCI function (a switchdev
	// representor beside its PF).
	for i := range h.IRQs {
		if q := &h.IRQs[i]; q.Class == ClassNetwork && q.Device != "" && q.Queue == nil {
			q.SharedWith = sharedWith(h, q, nicOwners[q.Number], netdevs)
		}
	}
	fillDeviceIRQs(h)
}

// sharedWith are the network devices other than q.Device that own q's line
// (sysfs: each PCI function's irq) or name a handler on it ("eth1, eth2"
// in /proc/interrupts), and the other drivers' handlers on it by action
// name ("uhci_hcd:usb1"), sorted.
func sharedWith(h *Host, q *IRQ, owners []int, netdevs map[string]bool) []string {
	other := map[string]bool{}
	for _, o := range owners {
		other[h.NICs[o].Name] = true
	}
	for _, a := range q.Actions {
		switch {
		case netdevs[a]:
			other[a] = true
		case len(q.Actions) > 1 && a != q.Device && !strings.HasPrefix(a, q.Device+"-"):
			// Another driver's handler on the line ("uhci_hcd:usb1,
			// eth0"): moving the line moves its interrupts too.
			other[a] = true
		}
	}
	delete(other, q.Device)
	if len(other) == 0 {
		return nil
	}
	out := make([]string, 0, len(other))
	for n := range other {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// tieSinglePort gives a driver's non-queue vectors named by PCI address
// ("i40e-0001:00:0f.0:misc") to its netdev when the table shows that driver
// with exactly one netdev ("i40e-enP1s15-TxRx-0") and one PCI function: with
// no PCI address in the chip name (a "PCI-MSI" chip), nothing else ties them.
func tieSinglePort(infos []actionInfo, pciNet map[string]string) {
	nets := map[string]map[string]bool{}
	pcis := map[string]map[string]bool{}
	add := func(m map[string]map[string]bool, k, v string) {
		if m[k] == nil {
			m[k] = map[string]bool{}
		}
		m[k][v] = true
	}
	for _, ai := range infos {
		if ai.class != ClassNetwork || ai.driver == "" {
			continue
		}
		if ai.netdev != "" {
			add(nets, ai.driver, ai.netdev)
		}
		if ai.pci != "" {
			add(pcis, ai.driver, ai.pci)
		}
	}
	for drv, ps := range pcis {
		if len(ps) != 1 || len(nets[drv]) != 1 {
			continue
		}
		for p := range ps {
			if _, ok := pciNet[p]; !ok {
				for n := range nets[drv] {
					pciNet[p] = n
				}
			}
		}
	}
}

// corroborateStems decides the "<netdev>-<n>" vector names: a plausible
// netdev with a vector suffix is a NIC's only when the table agrees, with
// several vectors of the same stem ("eth0-0" … "eth0-6") or the stem known
// as a NIC elsewhere (sysfs, or another IRQ named after it). A lone
// "eth1-2" stays other: many things are named "<word><digit>-<n>".
func corroborateStems(h *Host, infos []actionInfo, netdevs map[string]bool) {
	n := map[string]int{}
	for _, ai := range infos {
		if ai.stem != "" && ai.class == "" {
			n[ai.stem]++
		}
	}
	for i := range infos {
		ai := &infos[i]
		if ai.stem == "" || ai.class != "" || ai.netdev != "" {
			continue
		}
		if n[ai.stem] >= 2 || netdevs[ai.stem] || h.NIC(ai.stem) != nil {
			ai.class, ai.netdev = ClassNetwork, ai.stem
		}
	}
}

// assignGVEQueues maps gve notify blocks to queues: the driver gives the
// first half of its blocks to tx queues and the second half to rx queues
// (gve_tx_idx_to_ntfy / gve_rx_idx_to_ntfy).
func assignGVEQueues(h *Host, infos []actionInfo) {
	count := map[string]int{}
	for i := range infos {
		if infos[i].driver == "gve" && infos[i].queue >= 0 {
			count[infos[i].pci]++
		}
	}
	for i := range infos {
		ai := &infos[i]
		if ai.driver != "gve" || ai.queue < 0 {
			continue
		}
		half := count[ai.pci] / 2
		if ai.queue < half {
			ai.kind = "tx"
		} else {
			ai.queue -= half
			ai.kind = "rx"
		}
	}
}

func firstNonEmpty(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}

// fillDeviceIRQs makes the device side agree with the IRQ side.
func fillDeviceIRQs(h *Host) {
	byDev := map[string][]*IRQ{}
	for i := range h.IRQs {
		q := &h.IRQs[i]
		for _, d := range q.SharedWith {
			byDev[d] = append(byDev[d], q) // a shared line is each sharer's
		}
		if q.Device != "" {
			byDev[q.Device] = append(byDev[q.Device], q)
		}
	}
	for i := range h.NICs {
		n := &h.NICs[i]
		n.IRQs = []int{}
		for r := range n.RxQueues {
			n.RxQueues[r].IRQ = nil
		}
		for t := range n.TxQueues {
			n.TxQueues[t].IRQ = nil
		}
		for _, q := range byDev[n.Name] {
			if q.Class != ClassNetwork {
				continue
			}
			n.IRQs = append(n.IRQs, q.Number)
			if q.Queue == nil || q.Device != n.Name {
				continue
			}
			num := q.Number
			if q.QueueKind == "rx" || q.QueueKind == "rxtx" {
				for r := range n.RxQueues {
					if n.RxQueues[r].Index == *q.Queue && n.RxQueues[r].IRQ == nil {
						n.RxQueues[r].IRQ = &num
					}
				}
			}
			if q.QueueKind == "tx" || q.QueueKind == "rxtx" {
				for t := range n.TxQueues {
					if n.TxQueues[t].Index == *q.Queue && n.TxQueues[t].IRQ == nil {
						n.TxQueues[t].IRQ = &num
					}
				}
			}
		}
		sort.Ints(n.IRQs)
	}
	for i := range h.Block {
		b := &h.Block[i]
		mine := map[int]bool{}
		for _, n := range b.IRQs {
			mine[n] = true
		}
		// Without sysfs ownership (a snapshot), claim the IRQs the names tie to this disk.
		for _, q := range byDev[b.Name] {
			mine[q.Number] = true
		}
		if c := nvmeController(b.Name); c != "" {
			for _, q := range byDev[c] {
				mine[q.Number] = true
			}
		}
		b.IRQs = []int{}
		for q := range b.Queues {
			b.Queues[q].IRQ = nil
		}
		for n := range mine {
			q := h.IRQ(n)
			if q == nil || q.Class != ClassStorage {
				continue
			}
			b.IRQs = append(b.IRQs, n)
			if q.Queue == nil {
				continue
			}
			num := n
			for k := range b.Queues {
				if b.Queues[k].Index == *q.Queue && b.Queues[k].IRQ == nil {
					b.Queues[k].IRQ = &num
				}
			}
		}
		sort.Ints(b.IRQs)
	}
}

var reNVMeNS = regexp.MustCompile(`^(nvme\d+)(?:c\d+)?n\d+$`)

// nvmeController returns "nvme0" for "nvme0n1" (and "nvme0c0n1"), "" otherwise.
func nvmeController(name string) string {
	if m := reNVMeNS.FindStringSubmatch(name); m != nil {
		return m[1]
	}
	return ""
}
