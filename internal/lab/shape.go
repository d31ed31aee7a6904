// Package lab boots server-shaped virtual machines in QEMU with Debian's
// own kernel and drivers and irqpilot inside, so that irqpilot can be tried
// — and tested — on a 32-CPU, 4-node machine with multi-queue NICs and NVMe
// before it touches a real one.
//
// A machine is a Shape: CPUs in packages, cores and SMT threads, NUMA
// nodes, and devices (virtio-net with several queues on a chosen node,
// e1000e, NVMe, multi-queue virtio-blk). The kernel and its modules come
// from Debian's linux-image package, fetched with apt and cached
// (kernel.go); the guest is a busybox initramfs that loads the drivers,
// runs one script and powers off (initramfs.go); QEMU runs under TCG here
// (no /dev/kvm), which is right for behaviour and useless for speed.
//
// Every NIC's backend is a tap device inside a network namespace made for
// the run and deleted after it: nothing the guest sends reaches the host's
// own links.
package lab

import (
	"fmt"
	"os"
	"sort"
	"strings"
)

// NIC is one network device of a shape.
type NIC struct {
	// Model is QEMU's device: "virtio-net-pci", "e1000e", or one of the
	// older models of the nics shape: "vmxnet3" (MSI-X), "e1000" and
	// "rtl8139" (conventional PCI: one legacy interrupt line each).
	Model string
	// Queues is the number of queue pairs (virtio-net only; 1 otherwise).
	Queues int
	// Node is the NUMA node whose PCIe expander bridge the NIC sits
	// behind; -1 puts it on the root bus (no node).
	Node int
	// Slot, when set, is the NIC's slot on the root bus (hex, "0a"): two
	// conventional PCI devices in slots the chipset routes to one
	// interrupt line share it.
	Slot string
}

// Shape is a virtual machine's topology and devices.
type Shape struct {
	Name string
	// CPUs = Sockets × Cores × Threads.
	Sockets, Cores, Threads int
	// Nodes splits the CPUs into this many NUMA nodes, in CPU order.
	Nodes int
	// MemMiB per node.
	MemMiB int
	NICs   []NIC
	// NVMe adds one NVMe controller (one managed IRQ per CPU's queue).
	NVMe bool
	// BlkQueues adds a virtio-blk disk with this many queues (0: none).
	BlkQueues int
	// Note says what the shape is for.
	Note string
}

// hotplugSlots are the empty PCIe root ports every machine gets, so that a
// NIC can be hot-added through QEMU's monitor (q35's root bus takes none).
const hotplugSlots = 2

// CPUs is the number of vCPUs.
func (s Shape) CPUs() int { return s.Sockets * s.Cores * s.Threads }

// NodeCPUs returns the CPUs of node n: the nodes split the CPUs in order,
// so that SMT siblings and a package's cores stay in one node.
func (s Shape) NodeCPUs(n int) (first, last int) {
	per := s.CPUs() / s.Nodes
	return n * per, (n+1)*per - 1
}

// Shapes are the machines `irqpilot lab` knows.
var Shapes = map[string]Shape{
	"small": {
		// Two threads per core, so that what the policies do with SMT
		// siblings is checked on the shape `make test` boots.
		Name: "small", Sockets: 1, Cores: 4, Threads: 2, Nodes: 2, MemMiB: 512,
		NICs:      []NIC{{Model: "virtio-net-pci", Queues: 4, Node: 1}, {Model: "e1000e", Queues: 1, Node: -1}},
		NVMe:      true,
		BlkQueues: 4,
		Note:      "8 vCPUs (4 cores × 2 threads) in 2 nodes; a 4-queue virtio-net on node 1, an e1000e, NVMe and a 4-queue virtio-blk",
	},
	"server": {
		Name: "server", Sockets: 2, Cores: 8, Threads: 2, Nodes: 4, MemMiB: 512,
		NICs: []NIC{{Model: "virtio-net-pci", Queues: 8, Node: 2}, {Model: "e1000e", Queues: 1, Node: -1}},
		NVMe: true,
		Note: "32 vCPUs: 2 packages × 8 cores × 2 threads in 4 nodes; an 8-queue virtio-net on node 2, an e1000e and NVMe",
	},
	"big": {
		Name: "big", Sockets: 2, Cores: 16, Threads: 2, Nodes: 4, MemMiB: 512,
		NICs: []NIC{{Model: "virtio-net-pci", Queues: 16, Node: 3}},
		NVMe: true,
		Note: "64 vCPUs: 2 packages × 16 cores × 2 threads in 4 nodes; a 16-queue virtio-net on node 3 and NVMe",
	},
	"nics": {
		// The NIC models QEMU emulates with in-tree drivers besides the
		// others' two: what irqpilot makes of their interrupts.
		Name: "nics", Sockets: 1, Cores: 4, Threads: 1, Nodes: 1, MemMiB: 512,
		NICs: []NIC{{Model: "vmxnet3", Queues: 1, Node: -1}, {Model: "e1000", Queues: 1, Node: -1}, {Model: "rtl8139", Queues: 1, Node: -1, Slot: "0a"}},
		Note: "4 vCPUs; a vmxnet3, an e1000 and an rtl8139 (the last two on legacy interrupt lines)",
	},
}

// NICDrivers are the guest's drivers of QEMU's NIC models.
var NICDrivers = map[string]string{
	"virtio-net-pci": "virtio_net", "e1000e": "e1000e", "vmxnet3": "vmxnet3", "e1000": "e1000", "rtl8139": "8139cp",
}

// ShapeNames lists the shapes, sorted.
func ShapeNames() []string {
	var n []string
	for k := range Shapes {
		n = append(n, k)
	}
	sort.Strings(n)
	return n
}

// Lookup returns the named shape or an error that lists the known ones.
func Lookup(name string) (Shape, error) {
	s, ok := Shapes[name]
	if !ok {
		return Shape{}, fmt.Errorf("unknown lab shape %q (known: %s)", name, strings.Join(ShapeNames(), ", "))
	}
	return s, nil
}

// tcgThreads is how QEMU runs the guest's vCPUs: "single", one TCG thread
// taking the vCPUs in turn, unless IRQPILOT_LAB_TCG says "multi" (a thread
// per vCPU). Measured here (2 host cores), the server shape's inventory
// booted and ran in 16.5 s on one thread and 5 min 11 s on 32 under
// Debian's 5.10, and within 3 s of each other under 6.1 and 6.12 (small:
// 13.4 s and 16.6 s). With a thread per vCPU, 6.12 on 32 and 64 vCPUs also
// oopsed on an int3 while it patched its own code (at boot, and when RPS
// switched on a static key), four times in one run: a vCPU ran a
// breakpoint another vCPU's patching had already taken out. On one thread
// no vCPU runs code another is changing.
func tcgThreads() string {
	if os.Getenv("IRQPILOT_LAB_TCG") == "multi" {
		return "multi"
	}
	return "single"
}

// machineArgs are QEMU's arguments for the shape's CPUs, memory, nodes and
// devices. taps[i] is the tap device NIC i uses; disks are the image files
// of the NVMe and virtio-blk drives, in that order.
func (s Shape) machineArgs(taps []string, disks []string) []string {
	a := []string{
		"-accel", "tcg,thread=" + tcgThreads(), "-machine", "q35",
		// vendor=GenuineIntel: the kernel reads the SMT topology from
		// Intel's CPUID leaves; -cpu EPYC crashed QEMU 7.2 under TCG.
		"-cpu", "max,vendor=GenuineIntel",
		"-smp", fmt.Sprintf("%d,sockets=%d,cores=%d,threads=%d", s.CPUs(), s.Sockets, s.Cores, s.Threads),
		"-m", fmt.Sprintf("%dM", s.MemMiB*s.Nodes),
	}
	for n := 0; n < s.Nodes; n++ {
		f, l := s.NodeCPUs(n)
		a = append(a,
			"-object", fmt.Sprintf("memory-backend-ram,id=m%d,size=%dM", n, s.MemMiB),
			"-numa", fmt.Sprintf("node,nodeid=%d,cpus=%d-%d,memdev=m%d", n, f, l, n))
	}
	bus := 64
	for i, nic := range s.NICs {
		dev := "pcie.0"
		if nic.Node >= 0 {
			// A PCIe expander bridge on the node, a root port behind it.
			a = append(a,
				"-device", fmt.Sprintf("pxb-pcie,id=pxb%d,bus_nr=%d,numa_node=%d,bus=pcie.0", i, bus, nic.Node),
				"-device", fmt.Sprintf("pcie-root-port,id=rp%d,bus=pxb%d,chassis=%d", i, i, i+1))
			dev = fmt.Sprintf("rp%d", i)
			bus += 16
		}
		q := max(1, nic.Queues)
		netdev := fmt.Sprintf("tap,id=n%d,ifname=%s,script=no,downscript=no", i, taps[i])
		if nic.Model == "virtio-net-pci" && q > 1 {
			netdev += fmt.Sprintf(",queues=%d", q)
		}
		a = append(a, "-netdev", netdev)
		d := fmt.Sprintf("%s,netdev=n%d,bus=%s,mac=52:54:00:12:34:%02x", nic.Model, i, dev, 0x10+i)
		if nic.Slot != "" && nic.Node < 0 {
			d += ",addr=" + nic.Slot
		}
		if nic.Model == "virtio-net-pci" && q > 1 {
			// A vector per rx and tx queue, one for config, one for control.
			d += fmt.Sprintf(",mq=on,vectors=%d", 2*q+2)
		}
		a = append(a, "-device", d)
	}
	for i := 0; i < hotplugSlots; i++ {
		a = append(a, "-device", fmt.Sprintf("pcie-root-port,id=hp%d,chassis=%d,bus=pcie.0", i, 90+i))
	}
	k := 0
	if s.NVMe {
		a = append(a, "-drive", fmt.Sprintf("file=%s,if=none,id=d%d,format=raw", disks[k], k),
			"-device", fmt.Sprintf("nvme,drive=d%d,serial=irqpilotlab%d,bus=pcie.0", k, k))
		k++
	}
	if s.BlkQueues > 0 {
		a = append(a, "-drive", fmt.Sprintf("file=%s,if=none,id=d%d,format=raw", disks[k], k),
			"-device", fmt.Sprintf("virtio-blk-pci,drive=d%d,num-queues=%d,bus=pcie.0", k, s.BlkQueues))
	}
	return a
}

// disks is how many disk images the shape needs.
func (s Shape) disks() int {
	n := 0
	if s.NVMe {
		n++
	}
	if s.BlkQueues > 0 {
		n++
	}
	return n
}
