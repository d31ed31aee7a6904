package host

import (
	"errors"
	"io/fs"
	"maps"
	"slices"
	"sort"

	"github.com/irqpilot/irqpilot/internal/cpuset"
	"github.com/irqpilot/irqpilot/internal/kernel"
)

// deviceInfo is what sysfs says about the device behind a netdev or a disk.
type deviceInfo struct {
	dir       string // resolved device directory ("/sys/devices/pci0000:00/0000:00:03.0/virtio2"), "" if none
	pciDir    string // the PCI function at or above dir, "" if none
	busAddr   string // PCI address, or the device's own name when not on PCI
	driver    string
	node      int
	localCPUs cpuset.Set
	virtio    string // "virtio2" when the device is a virtio device
	msiIRQs   []int  // the PCI function's msi_irqs
}

// readDeviceInfo follows a "device" link (sys/block/X/device) to the
// device and its PCI function (kernel.FS.ReadDevice).
func readDeviceInfo(kfs *kernel.FS, h *Host, what, link string) deviceInfo {
	d, err := kfs.ReadDevice(link)
	return deviceInfoOf(h, what, d, err)
}

// deviceInfoOf is what a ReadDevice call returned, as a deviceInfo (no
// device: node -1, the rest empty). A local_cpulist that does not parse is
// recorded in h.Unavailable.
func deviceInfoOf(h *Host, what string, d *kernel.Device, err error) deviceInfo {
	if err != nil {
		return deviceInfo{node: -1}
	}
	if bad := d.LocalCPUsErr; bad != nil {
		h.unavailable(what+" local_cpulist", bad.Path, bad.Err)
	}
	return deviceInfo{
		dir:       d.Dir,
		pciDir:    d.PCIDir,
		busAddr:   d.BusAddr,
		driver:    d.Driver,
		node:      d.Node,
		localCPUs: d.LocalCPUs,
		virtio:    d.Virtio,
		msiIRQs:   d.MSIIRQs,
	}
}

// readNICs reads every network interface but lo from /sys/class/net: its
// device, stacking, queues with their steering settings, and (live, or from
// a capture) ethtool channels and coalescing. The IRQs that sysfs ties to
// the NIC go into NIC.IRQs; classifyIRQs assigns them to queues.
func readNICs(kfs *kernel.FS, h *Host) {
	h.NICs = []NIC{}
	names, err := kfs.NetDevices()
	if err != nil {
		h.unavailable("nics", "/"+kernel.NetDir, err)
		return
	}
	vlans := readVLANConfig(kfs)
	infos := make([]actionInfo, len(h.IRQs))
	for i := range h.IRQs {
		infos[i] = irqInfo(&h.IRQs[i])
	}
	for _, name := range names {
		if name == "lo" {
			continue
		}
		n := NIC{Name: name, Node: -1, RxQueues: []RxQueue{}, TxQueues: []TxQueue{}, IRQs: []int{}}
		if virtual, err := kfs.NetDeviceVirtual(name); err == nil {
			n.Virtual = virtual
		}
		di := deviceInfo{node: -1}
		if !n.Virtual {
			d, err := kfs.NetDeviceParent(name)
			di = deviceInfoOf(h, "nic "+name, d, err)
		}
		if di.dir != "" {
			n.Driver, n.Node, n.LocalCPUs, n.BusAddr = di.driver, di.node, di.localCPUs, di.busAddr
		}
		n.Kind = kfs.NetDeviceKind(name) // "" for veths and physical NICs: readEthtool fills virtual ones from the driver name
		n.Lower = lowerDevice(kfs, name, vlans)
		readQueues(kfs, h, &n)
		n.IRQs = nicIRQs(h, infos, &n, di)
		h.NICs = append(h.NICs, n)
	}
	readEthtool(kfs, h)
}

// nicIRQs are the IRQs sysfs or the action names tie to the NIC: the PCI
// function's msi_irqs, vectors named after the netdev, and for virtio NICs
// the vectors of its virtio device ("virtio2-input.0" for eth0 on virtio2).
func nicIRQs(h *Host, infos []actionInfo, n *NIC, di deviceInfo) []int {
	set := knownMSIIRQs(h, di)
	for i := range h.IRQs {
		ai := infos[i]
		switch {
		case ai.netdev != "" && ai.netdev == n.Name,
			di.virtio != "" && ai.virtio == di.virtio,
			n.BusAddr != "" && ai.pci == n.BusAddr:
			set[h.IRQs[i].Number] = true
		default:
			for _, a := range h.IRQs[i].Actions {
				if a == n.Name {
					set[h.IRQs[i].Number] = true
				}
			}
		}
	}
	return slices.Sorted(maps.Keys(set))
}

// lowerDevice is the device a stacked netdev sits on: its lower_* link
// (VLAN, macvlan, bond slaves — the first by name), else /proc/net/vlan/config.
func lowerDevice(kfs *kernel.FS, name string, vlans map[string]string) string {
	if lowers, err := kfs.NetDeviceLowers(name); err == nil && len(lowers) > 0 {
		return lowers[0]
	}
	return vlans[name]
}

// readVLANConfig is /proc/net/vlan/config: each VLAN's lower device (none
// when unreadable).
func readVLANConfig(kfs *kernel.FS) map[string]string {
	out, err := kfs.VLANs()
	if err != nil {
		return map[string]string{}
	}
	return out
}

// readQueues reads queues/rx-N and queues/tx-N with rps_cpus, rps_flow_cnt
// and xps_cpus. A file the kernel does not offer (no CONFIG_RPS, xps_cpus
// on a single-queue device, which returns ENOENT even though listed) leaves
// the field nil.
func readQueues(kfs *kernel.FS, h *Host, n *NIC) {
	qs, err := kfs.NetQueues(n.Name)
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			h.unavailable("nic "+n.Name+" queues", "/"+kernel.NetQueuesPath(n.Name), err)
		}
		return
	}
	for _, q := range qs {
		what := "nic " + n.Name + " " + q.Name
		if q.Rx {
			rq := RxQueue{Index: q.Index}
			set, err := kfs.RPSCPUs(n.Name, q.Name)
			rq.RPSCPUs = queueMask(h, what+" rps_cpus", kernel.RPSCPUsPath(n.Name, q.Name), set, err)
			if c, err := kfs.RPSFlowCnt(n.Name, q.Name); err == nil {
				rq.RPSFlowCnt = &c
			} else if !errors.Is(err, fs.ErrNotExist) {
				h.unavailable(what+" rps_flow_cnt", "/"+kernel.RPSFlowCntPath(n.Name, q.Name), err)
			}
			n.RxQueues = append(n.RxQueues, rq)
		} else {
			set, err := kfs.XPSCPUs(n.Name, q.Name)
			n.TxQueues = append(n.TxQueues, TxQueue{Index: q.Index,
				XPSCPUs: queueMask(h, what+" xps_cpus", kernel.XPSCPUsPath(n.Name, q.Name), set, err)})
		}
	}
	sort.Slice(n.RxQueues, func(i, j int) bool { return n.RxQueues[i].Index < n.RxQueues[j].Index })
	sort.Slice(n.TxQueues, func(i, j int) bool { return n.TxQueues[i].Index < n.TxQueues[j].Index })
}

// queueMask is a queue's mask as a kernel.FS method read it: nil when the
// file is absent or could not be read or parsed, the last two recorded in
// h.Unavailable under p.
func queueMask(h *Host, what, p string, set cpuset.Set, err error) *cpuset.Set {
	var bad *kernel.ValueError
	switch {
	case err == nil:
		return &set
	case errors.As(err, &bad):
		h.unavailable(what, "/"+p, bad.Err)
	case !errors.Is(err, fs.ErrNotExist):
		h.unavailable(what, "/"+p, err)
	}
	return nil
}

// knownMSIIRQs is the set of the device's msi_irqs that the IRQ table holds
// (a vector can be allocated but not requested, so not in /proc/interrupts).
func knownMSIIRQs(h *Host, di deviceInfo) map[int]bool {
	set := map[int]bool{}
	have := make(map[int]bool, len(h.IRQs))
	for i := range h.IRQs {
		have[h.IRQs[i].Number] = true
	}
	for _, q := range di.msiIRQs {
		if have[q] {
			set[q] = true
		}
	}
	return set
}
