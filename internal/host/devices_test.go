package host

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/irqpilot/irqpilot/internal/cpuset"
	"github.com/irqpilot/irqpilot/internal/kernel"
)

// tree builds a hand-made kernel tree in a temporary directory. It is built
// by code rather than committed because sysfs paths hold colons (PCI
// addresses), which Go module zips and Windows checkouts refuse.
type devTree struct {
	t    *testing.T
	root string
}

func newDevTree(t *testing.T) *devTree { return &devTree{t: t, root: t.TempDir()} }

func (tr *devTree) file(p, content string) {
	tr.t.Helper()
	full := filepath.Join(tr.root, p)
	if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
		tr.t.Fatal(err)
	}
	if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
		tr.t.Fatal(err)
	}
}

func (tr *devTree) dir(p string) {
	tr.t.Helper()
	if err := os.MkdirAll(filepath.Join(tr.root, p), 0o755); err != nil {
		tr.t.Fatal(err)
	}
}

func (tr *devTree) link(p, target string) {
	tr.t.Helper()
	full := filepath.Join(tr.root, p)
	if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
		tr.t.Fatal(err)
	}
	if err := os.Symlink(target, full); err != nil {
		tr.t.Fatal(err)
	}
}

func devIntp(p *int) int {
	if p == nil {
		return -1
	}
	return *p
}

func devSetp(s *cpuset.Set) string {
	if s == nil {
		return "nil"
	}
	return s.String()
}

// TestNICQueuesNodeExporter: node_exporter's ens10f0 queue files from a
// 256-CPU kernel (8×32-bit masks), 8 rx and 8 tx queues.
func TestNICQueuesNodeExporter(t *testing.T) {
	kfs := kernel.New(filepath.Join(devFixtures, "node_exporter"))
	h := &Host{}
	readNICs(kfs, h)
	if len(h.NICs) != 1 || h.NICs[0].Name != "ens10f0" {
		t.Fatalf("NICs: %+v", h.NICs)
	}
	n := h.NICs[0]
	if len(n.RxQueues) != 8 || len(n.TxQueues) != 8 {
		t.Fatalf("%d rx %d tx queues, want 8 and 8", len(n.RxQueues), len(n.TxQueues))
	}
	for i, q := range n.RxQueues {
		if q.Index != i || q.RPSCPUs == nil || !q.RPSCPUs.IsEmpty() || devIntp(q.RPSFlowCnt) != 0 || q.IRQ != nil {
			t.Errorf("rx-%d: %+v rps=%s", i, q, devSetp(q.RPSCPUs))
		}
	}
	for i, q := range n.TxQueues {
		if q.Index != i || q.XPSCPUs == nil || !q.XPSCPUs.IsEmpty() {
			t.Errorf("tx-%d: xps=%s", i, devSetp(q.XPSCPUs))
		}
	}
	if n.Virtual || n.Node != -1 || n.Driver != "" || n.Channels != nil {
		t.Errorf("ens10f0: %+v", n)
	}
	if !devHasUnavailable(h, "nic channels and coalescing") {
		t.Errorf("missing ethtool.json not reported: %+v", h.Unavailable)
	}
}

func devHasUnavailable(h *Host, what string) bool {
	for _, u := range h.Unavailable {
		if u.What == what {
			return true
		}
	}
	return false
}

// stackedTree is a 4-CPU machine with an e1000e NIC eth1 (vectors
// eth1-rx-0, eth1-tx-0 and the link vector "eth1"), VLANs eth1.10 (with
// lower_eth1 link, RPS set on the VLAN as in the Japanese source) and
// eth1.20 (known only from /proc/net/vlan/config), a bridge br0 over eth1.20,
// a veth without DEVTYPE, an NVMe disk with 3 hardware queues, a SATA disk
// behind ahci and a loop device.
func stackedTree(t *testing.T) *devTree {
	tr := newDevTree(t)
	pci := "sys/devices/pci0000:00/0000:00:1f.6"
	tr.dir("sys/bus/pci/drivers/e1000e")
	tr.link(pci+"/driver", "../../../bus/pci/drivers/e1000e")
	tr.file(pci+"/numa_node", "0\n")
	tr.file(pci+"/local_cpulist", "0-3\n")
	for _, n := range []string{"125", "126", "127"} {
		tr.file(pci+"/msi_irqs/"+n, "msix\n")
	}
	eth1 := pci + "/net/eth1"
	tr.file(eth1+"/uevent", "INTERFACE=eth1\nIFINDEX=2\n")
	tr.link(eth1+"/device", "../../../0000:00:1f.6")
	tr.file(eth1+"/queues/rx-0/rps_cpus", "0\n")
	tr.file(eth1+"/queues/rx-0/rps_flow_cnt", "0\n")
	tr.file(eth1+"/queues/tx-0/xps_cpus", "1\n")
	tr.link(eth1+"/upper_eth1.10", "../../../../virtual/net/eth1.10")
	v10 := "sys/devices/virtual/net/eth1.10"
	tr.file(v10+"/uevent", "DEVTYPE=vlan\nINTERFACE=eth1.10\nIFINDEX=5\n")
	tr.link(v10+"/lower_eth1", "../../../pci0000:00/0000:00:1f.6/net/eth1")
	tr.file(v10+"/queues/rx-0/rps_cpus", "f\n")
	tr.file(v10+"/queues/rx-0/rps_flow_cnt", "4096\n")
	tr.dir(v10 + "/queues/tx-0")
	tr.file("sys/devices/virtual/net/eth1.20/uevent", "DEVTYPE=vlan\nINTERFACE=eth1.20\n")
	tr.file("sys/devices/virtual/net/br0/uevent", "DEVTYPE=bridge\nINTERFACE=br0\n")
	tr.file("sys/devices/virtual/net/br0/bridge/stp_state", "0\n")
	tr.link("sys/devices/virtual/net/br0/lower_eth1.20", "../eth1.20")
	tr.file("sys/devices/virtual/net/veth0/uevent", "INTERFACE=veth0\nIFINDEX=7\n")
	tr.file("sys/devices/virtual/net/lo/uevent", "INTERFACE=lo\n")
	tr.link("sys/class/net/eth1", "../../devices/pci0000:00/0000:00:1f.6/net/eth1")
	for _, v := range []string{"eth1.10", "eth1.20", "br0", "veth0", "lo"} {
		tr.link("sys/class/net/"+v, "../../devices/virtual/net/"+v)
	}
	tr.file("proc/net/vlan/config", "VLAN Dev name\t | VLAN ID\nName-Type: VLAN_NAME_TYPE_RAW_PLUS_VID_NO_PAD\n"+
		"eth1.10        | 10  | eth1\neth1.20        | 20  | eth1\n")

	// NVMe: controller nvme0 on 0000:3b:00.0, namespace nvme0n1.
	nv := "sys/devices/pci0000:00/0000:00:1d.0/0000:3b:00.0"
	tr.dir("sys/bus/pci/drivers/nvme")
	tr.link(nv+"/driver", "../../../../bus/pci/drivers/nvme")
	tr.file(nv+"/numa_node", "1\n")
	for _, n := range []string{"130", "131", "132", "133"} {
		tr.file(nv+"/msi_irqs/"+n, "msix\n")
	}
	ns := nv + "/nvme/nvme0/nvme0n1"
	tr.link(ns+"/device", "../../nvme0")
	tr.file(ns+"/mq/0/cpu_list", "0\n")
	tr.file(ns+"/mq/1/cpu_list", "1, 2\n") // blk-mq's spaced cpulist
	tr.file(ns+"/mq/2/cpu_list", "3\n")
	tr.link("sys/block/nvme0n1", "../devices/pci0000:00/0000:00:1d.0/0000:3b:00.0/nvme/nvme0/nvme0n1")

	// SATA disk behind ahci: the disk's own driver is sd, the HBA's ahci.
	ah := "sys/devices/pci0000:00/0000:00:17.0"
	tr.dir("sys/bus/pci/drivers/ahci")
	tr.dir("sys/bus/scsi/drivers/sd")
	tr.link(ah+"/driver", "../../../bus/pci/drivers/ahci")
	tr.file(ah+"/msi_irqs/128", "msi\n")
	sd := ah + "/ata1/host0/target0:0:0/0:0:0:0"
	tr.link(sd+"/driver", "../../../../../../../bus/scsi/drivers/sd")
	tr.link(sd+"/block/sda/device", "../../../0:0:0:0")
	tr.file(sd+"/block/sda/mq/0/cpu_list", "0, 1, 2, 3\n")
	tr.link("sys/block/sda", "../devices/pci0000:00/0000:00:17.0/ata1/host0/target0:0:0/0:0:0:0/block/sda")

	tr.file("sys/devices/virtual/block/loop0/mq/0/cpu_list", "0, 1, 2, 3\n")
	tr.link("sys/block/loop0", "../devices/virtual/block/loop0")

	tr.file("proc/interrupts", `           CPU0       CPU1       CPU2       CPU3
   0:         40          0          0          0   IO-APIC   2-edge      timer
 125:        100          0          0          0  PCI-MSI-0000:00:1f.6    0-edge      eth1-rx-0
 126:          0        200          0          0  PCI-MSI-0000:00:1f.6    1-edge      eth1-tx-0
 127:          3          0          0          0  PCI-MSI-0000:00:1f.6    2-edge      eth1
 128:          0          0         50          0  PCI-MSI-0000:00:17.0    0-edge      ahci[0000:00:17.0]
 130:          9          0          0          0  PCI-MSIX-0000:3b:00.0   0-edge      nvme0q0
 131:         11          0          0          0  PCI-MSIX-0000:3b:00.0   1-edge      nvme0q1
 132:          0         12          0          0  PCI-MSIX-0000:3b:00.0   2-edge      nvme0q2
 133:          0          0          0         13  PCI-MSIX-0000:3b:00.0   3-edge      nvme0q3
NMI:          0          0          0          0   Non-maskable interrupts
`)
	return tr
}

func TestStackedNICsAndDisks(t *testing.T) {
	tr := stackedTree(t)
	tr.file("irqpilot/ethtool.json", `{"eth1":{"driver":"e1000e","channels_error":"operation not supported",
"coalesce":{"rx_usecs":3,"rx_frames":0,"tx_usecs":0,"tx_frames":0,"adaptive_rx":false,"adaptive_tx":false,
"rx_usecs_irq":0,"rx_frames_irq":0,"tx_usecs_irq":0,"tx_frames_irq":0,"rate_sample_interval":0}},
"eth1.10":{"driver":"802.1Q VLAN Support","channels_error":"operation not supported","coalesce_error":"operation not supported"},
"eth1.20":{"driver":"802.1Q VLAN Support"},"br0":{"driver":"bridge"},
"veth0":{"driver":"veth","channels":{"max_rx":4,"max_tx":4,"max_other":0,"max_combined":0,"rx":4,"tx":4,"other":0,"combined":0}}}`)
	kfs := kernel.New(tr.root)
	h := irqTable(t, kfs)
	readDevices(kfs, h)

	var names []string
	for _, n := range h.NICs {
		names = append(names, n.Name)
	}
	if strings.Join(names, " ") != "br0 eth1 eth1.10 eth1.20 veth0" {
		t.Fatalf("NICs %v", names)
	}
	eth1 := h.NIC("eth1")
	if eth1.Driver != "e1000e" || eth1.BusAddr != "0000:00:1f.6" || eth1.Node != 0 || eth1.LocalCPUs.String() != "0-3" ||
		eth1.Virtual || eth1.Kind != "" || eth1.Lower != "" {
		t.Errorf("eth1: %+v", eth1)
	}
	if got := intsString(eth1.IRQs); got != "125 126 127" {
		t.Errorf("eth1 IRQs %s", got)
	}
	if devIntp(eth1.RxQueues[0].IRQ) != 125 || devIntp(eth1.TxQueues[0].IRQ) != 126 ||
		devSetp(eth1.RxQueues[0].RPSCPUs) != "" || devSetp(eth1.TxQueues[0].XPSCPUs) != "0" {
		t.Errorf("eth1 queues %+v %+v", eth1.RxQueues, eth1.TxQueues)
	}
	if eth1.Channels != nil || eth1.Coalesce == nil || eth1.Coalesce.RxUsecs != 3 {
		t.Errorf("eth1 ethtool: %+v %+v", eth1.Channels, eth1.Coalesce)
	}
	v10 := h.NIC("eth1.10")
	if !v10.Virtual || v10.Kind != "vlan" || v10.Lower != "eth1" || len(v10.IRQs) != 0 || v10.BusAddr != "" ||
		devSetp(v10.RxQueues[0].RPSCPUs) != "0-3" || devIntp(v10.RxQueues[0].RPSFlowCnt) != 4096 || v10.TxQueues[0].XPSCPUs != nil {
		t.Errorf("eth1.10: %+v rx=%+v", v10, v10.RxQueues)
	}
	if v := h.NIC("eth1.20"); v.Kind != "vlan" || v.Lower != "eth1" {
		t.Errorf("eth1.20 (from /proc/net/vlan/config): %+v", v)
	}
	if b := h.NIC("br0"); b.Kind != "bridge" || b.Lower != "eth1.20" || !b.Virtual {
		t.Errorf("br0: %+v", b)
	}
	if v := h.NIC("veth0"); v.Kind != "veth" || v.Driver != "veth" || v.Channels == nil || v.Channels.Rx != 4 {
		t.Errorf("veth0 (kind from the ethtool driver): %+v", v)
	}
	checkIRQs(t, h, []wantIRQ{
		{0, ClassTimer, "", -1, ""},
		{125, ClassNetwork, "eth1", 0, "rx"},
		{126, ClassNetwork, "eth1", 0, "tx"},
		{127, ClassNetwork, "eth1", -1, ""},
		{128, ClassStorage, "sda", -1, ""},
		{130, ClassStorage, "nvme0", -1, ""},
		{131, ClassStorage, "nvme0", 0, ""},
		{133, ClassStorage, "nvme0", 2, ""},
	})

	if len(h.Block) != 2 {
		t.Fatalf("block devices %+v (loop0 has no backing device and must be skipped)", h.Block)
	}
	nv, sda := h.Block[0], h.Block[1]
	if nv.Name != "nvme0n1" || nv.Driver != "nvme" || nv.BusAddr != "0000:3b:00.0" || nv.Node != 1 ||
		intsString(nv.IRQs) != "130 131 132 133" || len(nv.Queues) != 3 {
		t.Errorf("nvme0n1: %+v", nv)
	}
	for i, want := range []struct {
		cpus string
		irq  int
	}{{"0", 131}, {"1-2", 132}, {"3", 133}} {
		if q := nv.Queues[i]; q.Index != i || q.CPUs.String() != want.cpus || devIntp(q.IRQ) != want.irq {
			t.Errorf("nvme0n1 queue %d: cpus %s irq %d, want %s %d", i, q.CPUs, devIntp(q.IRQ), want.cpus, want.irq)
		}
	}
	if sda.Name != "sda" || sda.Driver != "ahci" || sda.BusAddr != "0000:00:17.0" || intsString(sda.IRQs) != "128" ||
		len(sda.Queues) != 1 || sda.Queues[0].CPUs.String() != "0-3" || sda.Queues[0].IRQ != nil {
		t.Errorf("sda: %+v", sda)
	}
	// The JSON carries the stacking.
	b, _ := json.Marshal(h.NIC("eth1.10"))
	if !strings.Contains(string(b), `"kind":"vlan","lower":"eth1"`) {
		t.Errorf("JSON %s", b)
	}
}

func intsString(v []int) string {
	s := make([]string, len(v))
	for i, n := range v {
		s[i] = itoa(n)
	}
	return strings.Join(s, " ")
}

func itoa(n int) string {
	b, _ := json.Marshal(n)
	return string(b)
}
