package kernel

import (
	"errors"
	"io/fs"
	"path/filepath"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// deviceView is a Device with its CPU set as text, for comparison.
type deviceView struct {
	Dir, PCIDir, BusAddr, Driver, Virtio, LocalCPUs string
	Node                                            int
	MSIIRQs                                         []int
}

func viewDevice(d *Device) deviceView {
	return deviceView{Dir: d.Dir, PCIDir: d.PCIDir, BusAddr: d.BusAddr, Driver: d.Driver, Virtio: d.Virtio,
		LocalCPUs: d.LocalCPUs.String(), Node: d.Node, MSIIRQs: d.MSIIRQs}
}

// The lab capture's NICs and disks, each through its device link.
func TestReadDeviceLabSmall(t *testing.T) {
	f := openSnapshotFixture(t, labSmall61)
	for _, c := range []struct {
		name string
		read func() (*Device, error)
		want deviceView
	}{
		// virtio NIC behind a PCIe port: the nearest PCI function, the
		// driver of the virtio device, node and CPUs of the function.
		{"eth0", func() (*Device, error) { return f.NetDeviceParent("eth0") }, deviceView{
			Dir:    "/sys/devices/pci0000:40/0000:40:00.0/0000:41:00.0/virtio1",
			PCIDir: "/sys/devices/pci0000:40/0000:40:00.0/0000:41:00.0", BusAddr: "0000:41:00.0",
			Driver: "virtio_net", Virtio: "virtio1", LocalCPUs: "4-7", Node: 1,
			MSIIRQs: []int{27, 28, 29, 30, 31, 32, 33, 34, 35},
		}},
		// The link leads to the PCI function itself; numa_node -1.
		{"eth1", func() (*Device, error) { return f.NetDeviceParent("eth1") }, deviceView{
			Dir:    "/sys/devices/pci0000:00/0000:00:02.0",
			PCIDir: "/sys/devices/pci0000:00/0000:00:02.0", BusAddr: "0000:00:02.0",
			Driver: "e1000e", LocalCPUs: "0-7", Node: -1, MSIIRQs: []int{41, 42, 43},
		}},
		{"vda", func() (*Device, error) { return f.ReadDevice(BlockDir + "/vda/device") }, deviceView{
			Dir:    "/sys/devices/pci0000:00/0000:00:06.0/virtio0",
			PCIDir: "/sys/devices/pci0000:00/0000:00:06.0", BusAddr: "0000:00:06.0",
			Driver: "virtio_blk", Virtio: "virtio0", LocalCPUs: "0-7", Node: -1,
			MSIIRQs: []int{36, 37, 38, 39, 40},
		}},
		// The NVMe controller has no driver link: its PCI function's.
		{"nvme0n1", func() (*Device, error) { return f.ReadDevice(BlockDir + "/nvme0n1/device") }, deviceView{
			Dir:    "/sys/devices/pci0000:00/0000:00:05.0/nvme/nvme0",
			PCIDir: "/sys/devices/pci0000:00/0000:00:05.0", BusAddr: "0000:00:05.0",
			Driver: "nvme", LocalCPUs: "0-7", Node: -1,
			MSIIRQs: []int{44, 45, 46, 47, 48, 49, 50, 51, 52},
		}},
	} {
		d, err := c.read()
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if diff := cmp.Diff(c.want, viewDevice(d)); diff != "" || d.LocalCPUsErr != nil {
			t.Errorf("%s (-want +got):\n%s%v", c.name, diff, d.LocalCPUsErr)
		}
	}
	if _, err := f.NetDeviceParent("lo"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("lo has a device: %v", err)
	}
}

// A SCSI disk names its HBA's driver (sd skipped); a device off PCI is its
// own bus address and takes numa_node and local_cpulist from its own
// directory; a local_cpulist that does not parse is reported, not guessed.
func TestReadDeviceTree(t *testing.T) {
	const host = "sys/devices/pci0000:00/0000:00:1f.2/ata1/host0"
	f := New(tree(t, map[string]string{
		"sys/block/sda/device":                              "->../../../" + host + "/target0:0:0/0:0:0:0",
		host + "/target0:0:0/0:0:0:0/driver":                "->../../../../../../../bus/scsi/drivers/sd",
		"sys/devices/pci0000:00/0000:00:1f.2/driver":        "->../../../bus/pci/drivers/ahci",
		"sys/devices/pci0000:00/0000:00:1f.2/local_cpulist": "0-x\n",
		"sys/devices/pci0000:00/0000:00:1f.2/msi_irqs/120":  "",
		"sys/devices/pci0000:00/0000:00:1f.2/msi_irqs/99":   "",
		"sys/devices/pci0000:00/0000:00:1f.2/msi_irqs/x":    "",
		"sys/class/net/eth0/device":                         "->../../../devices/platform/soc/eth@1",
		"sys/devices/platform/soc/eth@1/numa_node":          "0\n",
		"sys/devices/platform/soc/eth@1/local_cpulist":      "0-3\n",
		"sys/devices/platform/soc/eth@1/driver":             "->../../../../bus/platform/drivers/stmmac",
	}))
	d, err := f.ReadDevice("sys/block/sda/device")
	if err != nil {
		t.Fatal(err)
	}
	if d.Driver != "ahci" || d.BusAddr != "0000:00:1f.2" || !slices.Equal(d.MSIIRQs, []int{99, 120}) || d.Node != -1 {
		t.Errorf("sda = %+v", viewDevice(d))
	}
	if e := d.LocalCPUsErr; e == nil || e.Path != "/sys/devices/pci0000:00/0000:00:1f.2/local_cpulist" || !d.LocalCPUs.IsEmpty() {
		t.Errorf("sda local_cpulist 0-x: %v, %v", e, d.LocalCPUs)
	}
	d, err = f.NetDeviceParent("eth0")
	if err != nil {
		t.Fatal(err)
	}
	want := deviceView{Dir: "/sys/devices/platform/soc/eth@1", BusAddr: "eth@1", Driver: "stmmac", LocalCPUs: "0-3", Node: 0}
	if diff := cmp.Diff(want, viewDevice(d)); diff != "" {
		t.Errorf("eth0 (-want +got):\n%s", diff)
	}
}

func TestNetDevicesLabSmall(t *testing.T) {
	f := openSnapshotFixture(t, labSmall61)
	names, err := f.NetDevices()
	if err != nil || !slices.Equal(names, []string{"eth0", "eth1", "lo"}) {
		t.Fatalf("NetDevices = %q, %v", names, err)
	}
	for dev, want := range map[string]bool{"eth0": false, "eth1": false, "lo": true} {
		if v, err := f.NetDeviceVirtual(dev); err != nil || v != want {
			t.Errorf("NetDeviceVirtual(%s) = %v, %v", dev, v, err)
		}
	}
	if _, err := f.NetDeviceVirtual("eth9"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("NetDeviceVirtual(eth9): %v", err)
	}
	// Plain NICs: no DEVTYPE in uevent, not stacked, no master.
	if k := f.NetDeviceKind("eth0"); k != "" {
		t.Errorf("NetDeviceKind(eth0) = %q", k)
	}
	if l, err := f.NetDeviceLowers("eth0"); err != nil || l != nil {
		t.Errorf("NetDeviceLowers(eth0) = %q, %v", l, err)
	}
	if _, err := f.NetDeviceMaster("eth0"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("NetDeviceMaster(eth0): %v", err)
	}
	n := f.ReadDevNAPI("eth0")
	for name, v := range map[string]*uint64{"threaded": n.Threaded, "napi_defer_hard_irqs": n.DeferHardIRQs, "gro_flush_timeout": n.GROFlushTimeout} {
		if v == nil || *v != 0 {
			t.Errorf("eth0 %s = %v, want 0", name, v)
		}
	}
}

// Stacked devices as the kernel shows them: a VLAN (DEVTYPE and a lower
// link), a bridge and a bond known by their directories, a port's master.
func TestNetDeviceStacking(t *testing.T) {
	f := New(tree(t, map[string]string{
		"sys/class/net/eth0.10/uevent":            "DEVTYPE=vlan\nINTERFACE=eth0.10\n",
		"sys/class/net/eth0.10/lower_eth0":        "->../eth0",
		"sys/class/net/bond0/uevent":              "DEVTYPE=\nINTERFACE=bond0\n",
		"sys/class/net/bond0/bonding/":            "",
		"sys/class/net/bond0/lower_eth2":          "->../eth2",
		"sys/class/net/bond0/lower_eth1":          "->../eth1",
		"sys/class/net/br0/bridge/":               "",
		"sys/class/net/eth1/master":               "->../bond0",
		"sys/class/net/eth0/threaded":             "1\n",
		"sys/class/net/eth0/gro_flush_timeout":    "",
		"sys/class/net/eth0/napi_defer_hard_irqs": "x\n",
	}))
	for dev, want := range map[string]string{"eth0.10": "vlan", "bond0": "bond", "br0": "bridge", "eth0": "", "none": ""} {
		if k := f.NetDeviceKind(dev); k != want {
			t.Errorf("NetDeviceKind(%s) = %q, want %q", dev, k, want)
		}
	}
	if l, err := f.NetDeviceLowers("bond0"); err != nil || !slices.Equal(l, []string{"eth1", "eth2"}) {
		t.Errorf("NetDeviceLowers(bond0) = %q, %v", l, err)
	}
	if l, err := f.NetDeviceLowers("eth0.10"); err != nil || !slices.Equal(l, []string{"eth0"}) {
		t.Errorf("NetDeviceLowers(eth0.10) = %q, %v", l, err)
	}
	if _, err := f.NetDeviceLowers("none"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("NetDeviceLowers(none): %v", err)
	}
	if m, err := f.NetDeviceMaster("eth1"); err != nil || m != "bond0" {
		t.Errorf("NetDeviceMaster(eth1) = %q, %v", m, err)
	}
	// An empty file (a capture's unread one) and a non-decimal hold no
	// value; a missing one neither.
	n := f.ReadDevNAPI("eth0")
	if n.Threaded == nil || *n.Threaded != 1 || n.DeferHardIRQs != nil || n.GROFlushTimeout != nil {
		t.Errorf("ReadDevNAPI(eth0) = %v %v %v", n.Threaded, n.DeferHardIRQs, n.GROFlushTimeout)
	}
	if n := f.ReadDevNAPI("br0"); n != (DevNAPI{}) {
		t.Errorf("ReadDevNAPI(br0) = %+v", n)
	}
}

func TestNetQueuesFixtures(t *testing.T) {
	f := openSnapshotFixture(t, labSmall61)
	qs, err := f.NetQueues("eth0")
	want := []NetQueue{{"rx-0", true, 0}, {"rx-1", true, 1}, {"rx-2", true, 2}, {"rx-3", true, 3},
		{"tx-0", false, 0}, {"tx-1", false, 1}, {"tx-2", false, 2}, {"tx-3", false, 3}}
	if err != nil || !slices.Equal(qs, want) {
		t.Errorf("NetQueues(eth0) = %v, %v", qs, err)
	}
	if s, err := f.RPSCPUs("eth0", "rx-0"); err != nil || !s.IsEmpty() {
		t.Errorf("RPSCPUs(eth0, rx-0) = %v, %v", s, err)
	}
	if n, err := f.RPSFlowCnt("eth0", "rx-0"); err != nil || n != 0 {
		t.Errorf("RPSFlowCnt(eth0, rx-0) = %d, %v", n, err)
	}
	if s, err := f.XPSCPUs("eth0", "tx-0"); err != nil || s.String() != "0-1" {
		t.Errorf("XPSCPUs(eth0, tx-0) = %v, %v", s, err)
	}
	if _, err := f.NetQueues("lo9"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("NetQueues(lo9): %v", err)
	}

	// node_exporter's NIC on a 256-CPU kernel: masks of eight 32-bit words.
	ne := New(filepath.Join(fixtures, "node_exporter"))
	if qs, err := ne.NetQueues("ens10f0"); err != nil || len(qs) != 16 || qs[7] != (NetQueue{"rx-7", true, 7}) || qs[8] != (NetQueue{"tx-0", false, 0}) {
		t.Errorf("NetQueues(ens10f0) = %v, %v", qs, err)
	}
	if s, err := ne.RPSCPUs("ens10f0", "rx-0"); err != nil || !s.IsEmpty() {
		t.Errorf("RPSCPUs(ens10f0, rx-0) = %v, %v", s, err)
	}
	if s, err := ne.XPSCPUs("ens10f0", "tx-7"); err != nil || !s.IsEmpty() {
		t.Errorf("XPSCPUs(ens10f0, tx-7) = %v, %v", s, err)
	}
}

// Queue names in directory order, other entries left out; a mask that does
// not parse is a *ValueError naming the file, a flow count an error.
func TestNetQueuesTree(t *testing.T) {
	f := New(tree(t, map[string]string{
		"sys/class/net/eth0/queues/rx-10/rps_cpus":    "f\n",
		"sys/class/net/eth0/queues/rx-2/rps_cpus":     "zz\n",
		"sys/class/net/eth0/queues/rx-2/rps_flow_cnt": "many\n",
		"sys/class/net/eth0/queues/rx-x/":             "",
		"sys/class/net/eth0/queues/rx--1/":            "",
		"sys/class/net/eth0/queues/foo-1/":            "",
		"sys/class/net/eth0/queues/tx-0/":             "",
	}))
	qs, err := f.NetQueues("eth0")
	if want := []NetQueue{{"rx-10", true, 10}, {"rx-2", true, 2}, {"tx-0", false, 0}}; err != nil || !slices.Equal(qs, want) {
		t.Errorf("NetQueues = %v, %v; want %v", qs, err, want)
	}
	if s, err := f.RPSCPUs("eth0", "rx-10"); err != nil || s.String() != "0-3" {
		t.Errorf("RPSCPUs(rx-10) = %v, %v", s, err)
	}
	var bad *ValueError
	if _, err := f.RPSCPUs("eth0", "rx-2"); !errors.As(err, &bad) || bad.Path != "/"+RPSCPUsPath("eth0", "rx-2") {
		t.Errorf("RPSCPUs(rx-2) of zz: %v", err)
	}
	if _, err := f.RPSFlowCnt("eth0", "rx-2"); err == nil {
		t.Error("RPSFlowCnt of many: no error")
	}
	if _, err := f.XPSCPUs("eth0", "tx-0"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("XPSCPUs(tx-0) without the file: %v", err)
	}
	if p := XPSCPUsPath("eth0", "tx-0"); p != "sys/class/net/eth0/queues/tx-0/xps_cpus" {
		t.Errorf("XPSCPUsPath = %q", p)
	}
}
