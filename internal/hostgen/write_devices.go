package hostgen

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/irqpilot/irqpilot/internal/cpuset"
)

func (L *Layout) writeIRQs(w *writer) {
	for _, q := range L.IRQs {
		d := fmt.Sprintf("proc/irq/%d/", q.Number)
		w.file(d+"smp_affinity", L.mask(q.Affinity)+"\n")
		w.file(d+"smp_affinity_list", q.Affinity.String()+"\n")
		w.file(d+"effective_affinity_list", q.Effective.String()+"\n")
		w.file(d+"node", strconv.Itoa(q.Node)+"\n")
		for _, a := range q.Actions {
			w.mkdir(d + a)
		}
		k := fmt.Sprintf("sys/kernel/irq/%d/", q.Number)
		w.file(k+"actions", strings.Join(q.Actions, ",")+"\n")
		w.file(k+"chip_name", q.Chip+"\n")
		w.file(k+"hwirq", strconv.Itoa(q.HWIRQ)+"\n")
		w.file(k+"name", q.Trigger+"\n")
		typ := "edge"
		if q.Trigger == "fasteoi" {
			typ = "level"
		}
		w.file(k+"type", typ+"\n")
		var pc strings.Builder
		for _, c := range L.Possible.CPUs() { // per_cpu_count lists every possible CPU
			if c > 0 {
				pc.WriteByte(',')
			}
			pc.WriteString(strconv.FormatUint(L.at(q.Base[c], q.Rate[c]), 10))
		}
		w.file(k+"per_cpu_count", pc.String()+"\n")
	}
}

// pciDevice writes the PCI function's directory and the bus/driver links.
func (L *Layout) pciDevice(w *writer, pci, driver, vendor, device, class string, node int, irqs []int) string {
	dev := "sys/devices/pci0000:00/" + pci
	w.file(dev+"/vendor", vendor+"\n")
	w.file(dev+"/device", device+"\n")
	w.file(dev+"/class", class+"\n")
	w.file(dev+"/numa_node", strconv.Itoa(node)+"\n")
	w.file(dev+"/local_cpulist", L.Nodes[node].String()+"\n")
	w.file(dev+"/local_cpus", L.mask(L.Nodes[node])+"\n")
	w.file(dev+"/irq", "0\n")
	w.file(dev+"/enable", "1\n")
	for _, n := range irqs {
		w.file(fmt.Sprintf("%s/msi_irqs/%d", dev, n), "msix\n")
	}
	w.link(dev+"/driver", "../../../bus/pci/drivers/"+driver)
	w.link(dev+"/subsystem", "../../../bus/pci")
	w.link("sys/bus/pci/drivers/"+driver+"/"+pci, "../../../../devices/pci0000:00/"+pci)
	w.link("sys/bus/pci/devices/"+pci, "../../../devices/pci0000:00/"+pci)
	return dev
}

func (L *Layout) writeNICs(w *writer) {
	s := L.Spec
	lo := "sys/devices/virtual/net/lo"
	w.link("sys/class/net/lo", "../../devices/virtual/net/lo")
	w.file(lo+"/ifindex", "1\n")
	w.file(lo+"/type", "772\n")
	w.file(lo+"/operstate", "unknown\n")
	writeNAPIFiles(w, lo)
	w.file(lo+"/queues/rx-0/rps_cpus", L.mask(cpuset.Set{})+"\n")
	w.file(lo+"/queues/rx-0/rps_flow_cnt", "0\n")
	w.file(lo+"/queues/tx-0/xps_cpus", L.mask(cpuset.Set{})+"\n")
	for i, n := range L.NICs {
		irqs := append([]int{n.MiscIRQ}, n.QueueIRQs...)
		dev := L.pciDevice(w, n.PCI, n.Spec.Driver, "0x8086", "0x159b", "0x020000", n.Spec.Node, irqs)
		nd := dev + "/net/" + n.Spec.Name
		w.link("sys/class/net/"+n.Spec.Name, "../../devices/pci0000:00/"+n.PCI+"/net/"+n.Spec.Name)
		w.link(nd+"/device", "../../../"+n.PCI)
		w.file(nd+"/ifindex", strconv.Itoa(i+2)+"\n")
		w.file(nd+"/iflink", strconv.Itoa(i+2)+"\n")
		w.file(nd+"/type", "1\n")
		w.file(nd+"/address", fmt.Sprintf("b4:96:91:a5:%02x:%02x\n", n.Spec.Slot, i))
		w.file(nd+"/operstate", "up\n")
		w.file(nd+"/carrier", "1\n")
		w.file(nd+"/mtu", "1500\n")
		w.file(nd+"/speed", "100000\n")
		w.file(nd+"/tx_queue_len", "1000\n")
		w.file(nd+"/flags", "0x1003\n")
		writeNAPIFiles(w, nd)
		for q, irq := range n.QueueIRQs {
			rx := fmt.Sprintf("%s/queues/rx-%d/", nd, q)
			w.file(rx+"rps_cpus", L.mask(s.RPSCPUs)+"\n")
			w.file(rx+"rps_flow_cnt", strconv.Itoa(s.RPSFlowCnt)+"\n")
			tx := fmt.Sprintf("%s/queues/tx-%d/", nd, q)
			w.file(tx+"xps_cpus", L.mask(L.irq(irq).Affinity)+"\n")
			w.file(tx+"tx_maxrate", "0\n")
		}
	}
}

func (L *Layout) irq(n int) *IRQ {
	i := sort.Search(len(L.IRQs), func(i int) bool { return L.IRQs[i].Number >= n })
	return &L.IRQs[i]
}

func (L *Layout) writeNVMe(w *writer) {
	nv := L.NVMe
	if nv == nil {
		return
	}
	irqs := append([]int{nv.AdminIRQ}, nv.QueueIRQs...)
	dev := L.pciDevice(w, nv.PCI, "nvme", "0x144d", "0xa824", "0x010802", nv.Node, irqs)
	ctrl := dev + "/nvme/nvme0"
	w.link("sys/class/nvme/nvme0", "../../devices/pci0000:00/"+nv.PCI+"/nvme/nvme0")
	w.link(ctrl+"/device", "../../../"+nv.PCI)
	w.file(ctrl+"/model", "SAMSUNG MZQL23T8HCLS-00A07\n")
	w.file(ctrl+"/transport", "pcie\n")
	w.file(ctrl+"/numa_node", strconv.Itoa(nv.Node)+"\n")
	ns := ctrl + "/nvme0n1"
	w.link("sys/block/nvme0n1", "../devices/pci0000:00/"+nv.PCI+"/nvme/nvme0/nvme0n1")
	w.link("sys/class/block/nvme0n1", "../../devices/pci0000:00/"+nv.PCI+"/nvme/nvme0/nvme0n1")
	w.link(ns+"/device", "../../nvme0")
	w.file(ns+"/queue/nr_requests", "1023\n")
	w.file(ns+"/queue/scheduler", "[none] mq-deadline\n")
	w.file(ns+"/queue/rq_affinity", "1\n")
	for i, cpus := range nv.QueueCPUs {
		m := fmt.Sprintf("%s/mq/%d/", ns, i)
		// blk-mq prints its cpu_list with ", " between CPUs.
		ids := cpus.CPUs()
		strs := make([]string, len(ids))
		for j, c := range ids {
			strs[j] = strconv.Itoa(c)
		}
		w.file(m+"cpu_list", strings.Join(strs, ", ")+"\n")
		w.file(m+"nr_tags", "1023\n")
		w.file(m+"nr_reserved_tags", "0\n")
	}
}

// writeNAPIFiles writes a device's NAPI files as a 6.x kernel shows them.
func writeNAPIFiles(w *writer, dir string) {
	w.file(dir+"/threaded", "0\n")
	w.file(dir+"/napi_defer_hard_irqs", "0\n")
	w.file(dir+"/gro_flush_timeout", "0\n")
}
