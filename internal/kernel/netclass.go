package kernel

import (
	"bufio"
	"bytes"
	"path"
	"strconv"
	"strings"

	"github.com/irqpilot/irqpilot/internal/cpuset"
)

// NetDir is the directory of the network devices of the namespace whose
// /sys this is, relative to the root.
const NetDir = "sys/class/net"

// netDevPath is a network device's directory ("sys/class/net/eth0").
func netDevPath(dev string) string { return NetDir + "/" + dev }

// NetDevices lists the network devices (/sys/class/net), sorted by name,
// lo included.
func (f *FS) NetDevices() ([]string, error) { return f.readDir(NetDir) }

// NetDeviceVirtual reports whether a network device is a virtual one: its
// /sys/class/net/DEV link resolves below /sys/devices/virtual (lo, bridges,
// bonds, VLANs, veths), not to a device of a bus. An error when the link
// does not resolve.
func (f *FS) NetDeviceVirtual(dev string) (bool, error) {
	real, err := f.resolve(netDevPath(dev))
	if err != nil {
		return false, err
	}
	return strings.HasPrefix(real, "/sys/devices/virtual/"), nil
}

// NetDeviceParent reads the device a network device belongs to (its
// /sys/class/net/DEV/device link: a PCI function, a virtio device) with
// ReadDevice. Virtual devices have no such link: an error satisfying
// errors.Is(err, fs.ErrNotExist).
func (f *FS) NetDeviceParent(dev string) (*Device, error) {
	return f.ReadDevice(netDevPath(dev) + "/device")
}

// NetDeviceKind tells what kind of interface a network device is from its
// directory: DEVTYPE in /sys/class/net/DEV/uevent (vlan, bridge, bond,
// wlan, vxlan, …), else "bridge" or "bond" when it has a bridge/ or
// bonding/ directory. "" when sysfs does not say (veth, physical NICs, or
// no such device).
func (f *FS) NetDeviceKind(dev string) string {
	base := netDevPath(dev)
	if b, err := f.ReadFile(base + "/uevent"); err == nil {
		if t := parseUeventDevtype(b); t != "" {
			return t
		}
	}
	if f.Exists(base + "/bridge") {
		return "bridge"
	}
	if f.Exists(base + "/bonding") {
		return "bond"
	}
	return ""
}

// parseUeventDevtype is the first non-empty DEVTYPE= value of a uevent
// file, "" when it has none.
func parseUeventDevtype(b []byte) string {
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "DEVTYPE="); ok && v != "" {
			return v
		}
	}
	return ""
}

// NetDeviceLowers lists the devices a stacked network device sits on, from
// its lower_DEV links (a VLAN's or macvlan's one device, a bond's slaves),
// sorted by name; none for a device that is not stacked. An error when the
// device's directory cannot be listed.
func (f *FS) NetDeviceLowers(dev string) ([]string, error) {
	names, err := f.readDir(netDevPath(dev))
	if err != nil {
		return nil, err
	}
	return parseLowerLinks(names), nil
}

// parseLowerLinks picks the lower devices out of the names in a network
// device's directory ("lower_eth0" → "eth0"), in order; nil when none.
func parseLowerLinks(names []string) []string {
	var out []string
	for _, e := range names {
		if l, ok := strings.CutPrefix(e, "lower_"); ok && l != "" {
			out = append(out, l)
		}
	}
	return out
}

// NetDeviceMaster names the device a network device is enslaved to (the
// bridge or bond of its /sys/class/net/DEV/master link). A device without
// one gives an error satisfying errors.Is(err, fs.ErrNotExist).
func (f *FS) NetDeviceMaster(dev string) (string, error) {
	t, err := f.readlink(netDevPath(dev) + "/master")
	if err != nil {
		return "", err
	}
	return path.Base(t), nil
}

// DevNAPI is a network device's device-wide NAPI settings
// (/sys/class/net/DEV/{threaded,napi_defer_hard_irqs,gro_flush_timeout}),
// each nil when its file is absent, unreadable or holds no decimal (a
// capture keeps a file it did not read as an empty one).
type DevNAPI struct {
	Threaded        *uint64
	DeferHardIRQs   *uint64
	GROFlushTimeout *uint64
}

// ReadDevNAPI reads a network device's NAPI files, as apply reads them.
func (f *FS) ReadDevNAPI(dev string) DevNAPI {
	base := netDevPath(dev) + "/"
	return DevNAPI{
		Threaded:        f.readUintValue(base + "threaded"),
		DeferHardIRQs:   f.readUintValue(base + "napi_defer_hard_irqs"),
		GROFlushTimeout: f.readUintValue(base + "gro_flush_timeout"),
	}
}

// readUintValue reads a file holding one unsigned decimal: nil when it is
// absent, unreadable or holds anything else.
func (f *FS) readUintValue(p string) *uint64 {
	if !f.Exists(p) {
		return nil
	}
	s, err := f.readString(p)
	if err != nil {
		return nil
	}
	return parseUintValue(s)
}

// parseUintValue parses an unsigned decimal with white space around it; nil
// when s is anything else.
func parseUintValue(s string) *uint64 {
	v, err := strconv.ParseUint(strings.TrimSpace(s), 10, 64)
	if err != nil {
		return nil
	}
	return &v
}

// NetQueue is one queue directory of a network device
// (/sys/class/net/DEV/queues/rx-N or tx-N).
type NetQueue struct {
	Name  string // the directory's name ("rx-0"), which the queue's files are read by
	Rx    bool   // an rx queue; else a tx queue
	Index int    // N
}

// NetQueuesPath is the directory of a network device's queues
// ("sys/class/net/eth0/queues").
func NetQueuesPath(dev string) string { return netDevPath(dev) + "/queues" }

// RPSCPUsPath is an rx queue's RPS CPU mask (queue as NetQueues names it).
func RPSCPUsPath(dev, queue string) string { return NetQueuesPath(dev) + "/" + queue + "/rps_cpus" }

// RPSFlowCntPath is an rx queue's RFS flow-table size.
func RPSFlowCntPath(dev, queue string) string {
	return NetQueuesPath(dev) + "/" + queue + "/rps_flow_cnt"
}

// XPSCPUsPath is a tx queue's XPS CPU mask.
func XPSCPUsPath(dev, queue string) string { return NetQueuesPath(dev) + "/" + queue + "/xps_cpus" }

// NetQueues lists a network device's rx and tx queues in the order of
// their names (rx-0, rx-1, rx-10, rx-2, …, tx-0, …); other entries are
// left out. A device without a queues directory gives an error satisfying
// errors.Is(err, fs.ErrNotExist).
func (f *FS) NetQueues(dev string) ([]NetQueue, error) {
	names, err := f.readDir(NetQueuesPath(dev))
	if err != nil {
		return nil, err
	}
	var out []NetQueue
	for _, e := range names {
		if q, ok := parseNetQueue(e); ok {
			out = append(out, q)
		}
	}
	return out, nil
}

// parseNetQueue parses a queue directory's name: "rx-N" or "tx-N" with N a
// decimal (strconv.Atoi) of at least 0.
func parseNetQueue(name string) (NetQueue, bool) {
	kind, idxS, ok := strings.Cut(name, "-")
	idx, err := strconv.Atoi(idxS)
	if !ok || err != nil || idx < 0 || (kind != "rx" && kind != "tx") {
		return NetQueue{}, false
	}
	return NetQueue{Name: name, Rx: kind == "rx", Index: idx}, true
}

// RPSCPUs reads an rx queue's rps_cpus, the CPUs RPS steers its packets to
// (empty: RPS off). The kernel without CONFIG_RPS has no such file (an
// error satisfying errors.Is(err, fs.ErrNotExist)); a mask that does not
// parse is a *ValueError.
func (f *FS) RPSCPUs(dev, queue string) (cpuset.Set, error) {
	return f.readQueueMask(RPSCPUsPath(dev, queue))
}

// XPSCPUs reads a tx queue's xps_cpus, the CPUs that send on it (empty: XPS
// off). A single-queue device lists the file but fails its read with
// ENOENT; a mask that does not parse is a *ValueError.
func (f *FS) XPSCPUs(dev, queue string) (cpuset.Set, error) {
	return f.readQueueMask(XPSCPUsPath(dev, queue))
}

func (f *FS) readQueueMask(p string) (cpuset.Set, error) {
	s, err := f.readString(p)
	if err != nil {
		return cpuset.Set{}, err
	}
	set, err := cpuset.ParseMask(s)
	if err != nil {
		return cpuset.Set{}, &ValueError{Path: "/" + p, Err: err}
	}
	return set, nil
}

// RPSFlowCnt reads an rx queue's rps_flow_cnt, its share of the RFS flow
// table (0: RFS off for the queue). Absent without CONFIG_RPS (an error
// satisfying errors.Is(err, fs.ErrNotExist)); a value that is not an
// integer is an error naming the file.
func (f *FS) RPSFlowCnt(dev, queue string) (int, error) {
	v, err := f.readInt(RPSFlowCntPath(dev, queue))
	if err != nil {
		return 0, err
	}
	return int(v), nil
}
