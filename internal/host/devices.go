package host

import (
	"bufio"
	"bytes"
	"errors"
	"io/fs"
	"maps"
	"path"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/irqpilot/irqpilot/internal/cpuset"
	"github.com/irqpilot/irqpilot/internal/kernel"
)

// rePCIAddr matches a PCI function's directory name in /sys/devices.
var rePCIAddr = regexp.MustCompile(`^` + pciRe + `$`)

var reVirtioDev = regexp.MustCompile(`^virtio\d+$`)

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

// readDeviceInfo follows a "device" link (sys/class/net/X/device,
// sys/block/X/device) to the device and its PCI function.
func readDeviceInfo(kfs *kernel.FS, h *Host, what, link string) deviceInfo {
	di := deviceInfo{node: -1}
	dir, err := kfs.Resolve(link)
	if err != nil {
		return di
	}
	di.dir = dir
	for p := dir; p != "/" && p != "/sys" && p != "/sys/devices"; p = path.Dir(p) {
		if rePCIAddr.MatchString(path.Base(p)) {
			di.pciDir = p
			break
		}
	}
	if reVirtioDev.MatchString(path.Base(dir)) {
		di.virtio = path.Base(dir)
	}
	top := di.pciDir
	if top == "" {
		top = dir
	}
	di.busAddr = path.Base(top)
	// The driver: the nearest device at or above dir with a driver link,
	// skipping the SCSI disk drivers (sd, sr), so that a disk reports its HBA.
	for p := dir; len(p) >= len(top); p = path.Dir(p) {
		if t, err := kfs.Readlink(p + "/driver"); err == nil {
			if d := path.Base(t); d != "sd" && d != "sr" {
				di.driver = d
				break
			}
		}
		if p == top {
			break
		}
	}
	for _, p := range []string{top, dir} {
		if n, err := kfs.ReadInt(p + "/numa_node"); err == nil {
			di.node = int(n)
			break
		}
	}
	for _, p := range []string{top, dir} {
		if s, err := kfs.ReadString(p + "/local_cpulist"); err == nil {
			if set, err := cpuset.Parse(s); err == nil {
				di.localCPUs = set
			} else {
				h.unavailable(what+" local_cpulist", p+"/local_cpulist", err)
			}
			break
		}
	}
	if di.pciDir != "" {
		if names, err := kfs.ReadDir(di.pciDir + "/msi_irqs"); err == nil {
			for _, n := range names {
				if v, err := strconv.Atoi(n); err == nil {
					di.msiIRQs = append(di.msiIRQs, v)
				}
			}
			sort.Ints(di.msiIRQs)
		}
	}
	return di
}

// readNICs reads every network interface but lo from /sys/class/net: its
// device, stacking, queues with their steering settings, and (live, or from
// a capture) ethtool channels and coalescing. The IRQs that sysfs ties to
// the NIC go into NIC.IRQs; classifyIRQs assigns them to queues.
func readNICs(kfs *kernel.FS, h *Host) {
	h.NICs = []NIC{}
	names, err := kfs.ReadDir("sys/class/net")
	if err != nil {
		h.unavailable("nics", "/sys/class/net", err)
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
		base := "sys/class/net/" + name
		n := NIC{Name: name, Node: -1, RxQueues: []RxQueue{}, TxQueues: []TxQueue{}, IRQs: []int{}}
		if real, err := kfs.Resolve(base); err == nil {
			n.Virtual = strings.HasPrefix(real, "/sys/devices/virtual/")
		}
		di := deviceInfo{node: -1}
		if !n.Virtual {
			di = readDeviceInfo(kfs, h, "nic "+name, base+"/device")
		}
		if di.dir != "" {
			n.Driver, n.Node, n.LocalCPUs, n.BusAddr = di.driver, di.node, di.localCPUs, di.busAddr
		}
		n.Kind = netKind(kfs, base)
		n.Lower = lowerDevice(kfs, base, name, vlans)
		readQueues(kfs, h, base, &n)
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

// netKind tells what kind of interface a netdev is from its class
// directory: the uevent DEVTYPE (vlan, bridge, bond, wlan, vxlan, …), or
// the bridge/ and bonding/ directories. "" when sysfs does not say (veth,
// physical NICs); readEthtool fills virtual devices from the driver name.
func netKind(kfs *kernel.FS, base string) string {
	if b, err := kfs.ReadFile(base + "/uevent"); err == nil {
		sc := bufio.NewScanner(bytes.NewReader(b))
		for sc.Scan() {
			if v, ok := strings.CutPrefix(sc.Text(), "DEVTYPE="); ok && v != "" {
				return v
			}
		}
	}
	if kfs.Exists(base + "/bridge") {
		return "bridge"
	}
	if kfs.Exists(base + "/bonding") {
		return "bond"
	}
	return ""
}

// lowerDevice is the device a stacked netdev sits on: its lower_* link
// (VLAN, macvlan, bond slaves — the first by name), else /proc/net/vlan/config.
func lowerDevice(kfs *kernel.FS, base, name string, vlans map[string]string) string {
	if ents, err := kfs.ReadDir(base); err == nil {
		for _, e := range ents {
			if l, ok := strings.CutPrefix(e, "lower_"); ok && l != "" {
				return l
			}
		}
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
func readQueues(kfs *kernel.FS, h *Host, base string, n *NIC) {
	ents, err := kfs.ReadDir(base + "/queues")
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			h.unavailable("nic "+n.Name+" queues", "/"+base+"/queues", err)
		}
		return
	}
	for _, e := range ents {
		kind, idxS, ok := strings.Cut(e, "-")
		idx, err := strconv.Atoi(idxS)
		if !ok || err != nil || idx < 0 {
			continue
		}
		dir := base + "/queues/" + e
		switch kind {
		case "rx":
			q := RxQueue{Index: idx}
			q.RPSCPUs = readMask(kfs, h, "nic "+n.Name+" "+e+" rps_cpus", dir+"/rps_cpus")
			if v, err := kfs.ReadInt(dir + "/rps_flow_cnt"); err == nil {
				c := int(v)
				q.RPSFlowCnt = &c
			} else if !errors.Is(err, fs.ErrNotExist) {
				h.unavailable("nic "+n.Name+" "+e+" rps_flow_cnt", "/"+dir+"/rps_flow_cnt", err)
			}
			n.RxQueues = append(n.RxQueues, q)
		case "tx":
			q := TxQueue{Index: idx}
			q.XPSCPUs = readMask(kfs, h, "nic "+n.Name+" "+e+" xps_cpus", dir+"/xps_cpus")
			n.TxQueues = append(n.TxQueues, q)
		}
	}
	sort.Slice(n.RxQueues, func(i, j int) bool { return n.RxQueues[i].Index < n.RxQueues[j].Index })
	sort.Slice(n.TxQueues, func(i, j int) bool { return n.TxQueues[i].Index < n.TxQueues[j].Index })
}

func readMask(kfs *kernel.FS, h *Host, what, p string) *cpuset.Set {
	s, err := kfs.ReadString(p)
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			h.unavailable(what, "/"+p, err)
		}
		return nil
	}
	set, err := cpuset.ParseMask(s)
	if err != nil {
		h.unavailable(what, "/"+p, err)
		return nil
	}
	return &set
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
