package host

import (
	"bytes"
	"compress/bzip2"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/irqpilot/irqpilot/internal/kernel"
)

const devFixtures = "../../../shared/fixtures"

// openSnapshot opens one of the shared ghw-format captures. It unpacks into
// /dev/shm where there is one: creating the ~19 000 small files of a
// must-gather capture takes 10 s on this machine's ext4 disk, 0.3 s in tmpfs.
func openSnapshot(t *testing.T, rel string) *kernel.FS {
	t.Helper()
	if st, err := os.Stat("/dev/shm"); err == nil && st.IsDir() && os.Getenv("TMPDIR") == "" {
		t.Setenv("TMPDIR", "/dev/shm")
	}
	kfs, cleanup, err := kernel.OpenSnapshot(filepath.Join(devFixtures, rel))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cleanup)
	return kfs
}

type wantIRQ struct {
	irq    int
	class  Class
	device string
	queue  int // -1: nil
	kind   string
}

func checkIRQs(t *testing.T, h *Host, want []wantIRQ) {
	t.Helper()
	for _, w := range want {
		q := h.IRQ(w.irq)
		if q == nil {
			t.Errorf("irq %d missing", w.irq)
			continue
		}
		gotQ := -1
		if q.Queue != nil {
			gotQ = *q.Queue
		}
		if q.Class != w.class || q.Device != w.device || gotQ != w.queue || q.QueueKind != w.kind {
			t.Errorf("irq %d %v: got class=%s device=%q queue=%d kind=%q, want %s %q %d %q",
				w.irq, q.Actions, q.Class, q.Device, gotQ, q.QueueKind, w.class, w.device, w.queue, w.kind)
		}
	}
}

// count returns how many IRQs have the class, device and queue kind
// (kind "-" matches non-queue IRQs).
func irqCount(h *Host, class Class, device, kind string) int {
	n := 0
	for _, q := range h.IRQs {
		if q.Class != class || q.Device != device {
			continue
		}
		if kind == "-" && q.Queue != nil || kind != "-" && (q.Queue == nil || q.QueueKind != kind) {
			continue
		}
		n++
	}
	return n
}

// TestClassifyMasterSnapshot: 2× Xeon 6330 OpenShift node, 112 CPUs. Its
// capture has no sys/class/net or sys/block, so everything comes from the
// action names and the PCI addresses in the chip names.
func TestClassifyMasterSnapshot(t *testing.T) {
	kfs := openSnapshot(t, "cluster-node-tuning-operator/bare-metal-master.internal-sysinfo.tgz")
	h := irqTable(t, kfs)
	readDevices(kfs, h)
	checkIRQs(t, h, []wantIRQ{
		{0, ClassTimer, "", -1, ""},
		{8, ClassOther, "", -1, ""},                 // rtc0
		{144, ClassStorage, "nvme0", -1, ""},        // nvme0q0: admin queue
		{148, ClassStorage, "nvme0", 0, ""},         // nvme0q1 → blk-mq hctx 0
		{597, ClassStorage, "nvme3", 111, ""},       // nvme3q112
		{260, ClassStorage, "0000:00:11.5", -1, ""}, // ahci[0000:00:11.5]
		{598, ClassNetwork, "eno12399", -1, ""},     // i40e-0000:31:00.0:misc, tied by PCI address
		{599, ClassNetwork, "eno12399", 0, "rxtx"},  // i40e-eno12399-TxRx-0
		{711, ClassNetwork, "eno12399", -1, ""},     // i40e-0000:31:00.0:fdir-TxRx-0 is not a queue
		{1087, ClassNetwork, "ens3f0", -1, ""},      // ice-0000:4b:00.0:misc
		{1089, ClassNetwork, "ens3f0", 0, "rxtx"},   // ice-ens3f0-TxRx-0
		{1201, ClassNetwork, "ens3f0", -1, ""},      // irdma-0000:4b:00.0-AEQ
		{1202, ClassNetwork, "ens3f0", -1, ""},      // irdma-0000:4b:00.0-CEQ-0
		{1317, ClassNetwork, "ens3f0", -1, ""},      // ice-0000:4b:00.0:ctrl-TxRx-0
		{1896, ClassNetwork, "ens6f1", 111, "rxtx"}, // ice-ens6f1-TxRx-111
		{2009, ClassNetwork, "ens6f1", -1, ""},      // irdma-0000:98:00.1-CEQ-111
		{2015, ClassNetwork, "eno8303", 0, "tx"},    // eno8303-tx-0 (tg3)
		{2024, ClassNetwork, "eno8403", 4, "rx"},    // eno8403-rx-4
	})
	// 112 CPUs: every Intel port has one TxRx vector per CPU.
	for _, dev := range []string{"eno12399", "eno12409", "eno12419", "eno12429", "ens3f0", "ens3f1", "ens6f0", "ens6f1"} {
		if n := irqCount(h, ClassNetwork, dev, "rxtx"); n != 112 {
			t.Errorf("%s: %d TxRx IRQs, want 112", dev, n)
		}
	}
	// ice ports: misc, ll_ts, ctrl, irdma AEQ and 112 irdma CEQs.
	if n := irqCount(h, ClassNetwork, "ens3f0", "-"); n != 116 {
		t.Errorf("ens3f0: %d non-queue IRQs, want 116", n)
	}
	for _, dev := range []string{"nvme0", "nvme1", "nvme2", "nvme3"} {
		if n := irqCount(h, ClassStorage, dev, ""); n != 112 {
			t.Errorf("%s: %d queue IRQs, want 112", dev, n)
		}
	}
	if len(h.IRQs) != 1862 {
		t.Errorf("%d numbered IRQs, want 1862", len(h.IRQs))
	}
	if len(h.NICs) != 0 || len(h.Block) != 0 {
		t.Errorf("capture has no class/net or block, got %d NICs %d disks", len(h.NICs), len(h.Block))
	}
}

func TestClassifyWorkerSnapshot(t *testing.T) {
	kfs := openSnapshot(t, "cluster-node-tuning-operator/bare-metal-worker1.internal-sysinfo.tgz")
	h := irqTable(t, kfs)
	readDevices(kfs, h)
	checkIRQs(t, h, []wantIRQ{
		{0, ClassTimer, "", -1, ""},
		{24, ClassOther, "", -1, ""},            // dmar5
		{69, ClassStorage, "megasas1", 0, ""},   // megasas1-msix0: reply queue 0
		{149, ClassStorage, "megasas1", 80, ""}, // megasas1-msix80
		{150, ClassNetwork, "eno3", -1, ""},     // ixgbe link vector named after the netdev
		{151, ClassNetwork, "eno3", 0, "rxtx"},  // eno3-TxRx-0
		{161, ClassStorage, "nvme0", -1, ""},    // nvme0q0
		{241, ClassStorage, "nvme0", 79, ""},    // nvme0q80
		{332, ClassNetwork, "eno1", 79, "rxtx"}, // i40e-eno1-TxRx-79
		{333, ClassNetwork, "eno1", -1, ""},     // i40e-0000:19:00.0:fdir-TxRx-0
	})
	if n := irqCount(h, ClassStorage, "megasas1", ""); n != 81 {
		t.Errorf("megasas1: %d reply-queue IRQs, want 81", n)
	}
	if n := irqCount(h, ClassNetwork, "eno3", "rxtx"); n != 8 {
		t.Errorf("eno3: %d TxRx IRQs, want 8", n)
	}
}

func TestClassifySNOSnapshot(t *testing.T) {
	kfs := openSnapshot(t, "cluster-node-tuning-operator/sno-sysinfo.tgz")
	h := irqTable(t, kfs)
	readDevices(kfs, h)
	checkIRQs(t, h, []wantIRQ{
		{22, ClassOther, "virtio4", -1, ""},    // virtio4 on INTx, nothing says what it is but its device
		{39, ClassOther, "virtio5", -1, ""},    // virtio5-input: virtio-rng, not a NIC (no ".N")
		{53, ClassStorage, "virtio3", -1, ""},  // virtio3-config of a virtio-blk
		{54, ClassStorage, "virtio3", 0, ""},   // virtio3-req.0
		{66, ClassStorage, "virtio3", 11, ""},  // virtio3-req.11
		{67, ClassOther, "virtio2", -1, ""},    // virtio2-virtqueues
		{68, ClassNetwork, "virtio1", -1, ""},  // virtio1-config of the virtio-net
		{69, ClassNetwork, "virtio1", 0, "rx"}, // virtio1-input.0
		{70, ClassNetwork, "virtio1", 0, "tx"}, // virtio1-output.0
		{71, ClassStorage, "0000:00:1f.2", -1, ""},
		{73, ClassOther, "virtio0", -1, ""}, // virtio0-control (virtio-gpu): its device all the same
		{24, ClassOther, "", -1, ""},        // PCIe PME, aerdrv
	})
}

func TestClassifyProcfsAndNodeExporterFixtures(t *testing.T) {
	for _, tc := range []struct {
		dir, file string
		want      []wantIRQ
	}{
		{"procfs", "proc/interrupts", []wantIRQ{
			{0, ClassTimer, "", -1, ""},
			{25, ClassStorage, "virtio5", 0, ""},
			{28, ClassStorage, "virtio5", 3, ""},
			{29, ClassStorage, "0000:00:1f.2", -1, ""},
			{30, ClassOther, "", -1, ""}, // xhci_hcd
			{35, ClassNetwork, "virtio0", -1, ""},
			{36, ClassNetwork, "virtio0", 0, "rx"},
			{37, ClassNetwork, "virtio0", 0, "tx"},
		}},
		{"node_exporter", "proc/interrupts", []wantIRQ{
			{0, ClassTimer, "", -1, ""},
			{43, ClassStorage, "", -1, ""},
			{44, ClassOther, "", -1, ""},
			{46, ClassNetwork, "", -1, ""},
		}},
		{"node_exporter", "proc/interrupts_aarch64", []wantIRQ{
			{10, ClassTimer, "", -1, ""},
			{51, ClassStorage, "nvme0", -1, ""},
			{53, ClassStorage, "nvme0", 0, ""},
			{57, ClassNetwork, "0000:00:05.0", -1, ""},
			{58, ClassNetwork, "eth0", 0, "rxtx"},
		}},
	} {
		t.Run(tc.dir+"/"+tc.file, func(t *testing.T) {
			b, err := os.ReadFile(filepath.Join(devFixtures, tc.dir, tc.file))
			if err != nil {
				t.Fatal(err)
			}
			h := hostFromInterrupts(t, b)
			classifyIRQs(h)
			checkIRQs(t, h, tc.want)
		})
	}
}

// TestClassifyIRQNameDumps: published /proc/interrupts excerpts read alone
// (no sysfs), each from a driver whose names the conventions above missed
// (testdata/irqnames/PROVENANCE.md).
func TestClassifyIRQNameDumps(t *testing.T) {
	for _, tc := range []struct {
		file string
		want []wantIRQ
	}{
		{"ipq806x-stmmac.interrupts", []wantIRQ{
			{30, ClassNetwork, "eth0", -1, ""},
			{31, ClassNetwork, "eth1", -1, ""},
			{46, ClassNetwork, "", -1, ""}, // ath10k_pci
			{39, ClassOther, "", -1, ""},   // msm_serial0
			{34, ClassStorage, "", -1, ""}, // mmci-pl18x (cmd): an MMC host
		}},
		{"zynq-macb.interrupts", []wantIRQ{
			{29, ClassNetwork, "eth0", -1, ""},
			{30, ClassStorage, "", -1, ""}, // mmc0
			{25, ClassOther, "", -1, ""},   // xuartps
		}},
		{"iwlwifi-passthrough.interrupts", []wantIRQ{
			{5, ClassNetwork, "", -1, ""},
			{6, ClassNetwork, "", 1, "rx"},
			{7, ClassNetwork, "", 2, "rx"},
			{8, ClassNetwork, "", -1, ""},
			{9, ClassNetwork, "enp0s8f0", 0, "rx"},
			{10, ClassNetwork, "enp0s8f0", 0, "tx"},
			{20, ClassNetwork, "enp0s8f0", 5, "tx"},
			{1, ClassOther, "", -1, ""}, // ttyS0
		}},
		{"cxgb4-queues.interrupts", []wantIRQ{
			{75, ClassNetwork, "enp5s0f4d1", 11, "rx"},
			{78, ClassNetwork, "enp5s0f4d1", 14, "rx"},
		}},
		{"single-vector-enp.interrupts", []wantIRQ{
			{123, ClassNetwork, "enp2s0", -1, ""},
		}},
	} {
		t.Run(tc.file, func(t *testing.T) {
			b, err := os.ReadFile(filepath.Join("testdata/irqnames", tc.file))
			if err != nil {
				t.Fatal(err)
			}
			h := hostFromInterrupts(t, b)
			classifyIRQs(h)
			checkIRQs(t, h, tc.want)
		})
	}
}

// TestClassify1152CPUs: lpfc (568 vectors), smartpqi and i40e on a 1152-CPU machine.
func TestClassify1152CPUs(t *testing.T) {
	f, err := os.Open(filepath.Join(devFixtures, "pcp/interrupts-1152cpu-x86_64.bz2"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b, err := io.ReadAll(bzip2.NewReader(f))
	if err != nil {
		t.Fatal(err)
	}
	h := hostFromInterrupts(t, b)
	classifyIRQs(h)
	classes := map[Class]int{}
	var lpfc, pqi int
	for _, q := range h.IRQs {
		classes[q.Class]++
		if bytes.HasPrefix([]byte(q.Actions[0]), []byte("lpfc")) && q.Class == ClassStorage {
			lpfc++
		}
		if q.Actions[0] == "smartpqi" && q.Class == ClassStorage {
			pqi++
		}
	}
	if lpfc != 568 || pqi != 64 {
		t.Errorf("lpfc %d smartpqi %d storage IRQs, want 568 and 64", lpfc, pqi)
	}
	// i40e: 282 + 94 TxRx vectors, 4 misc and 4 fdir.
	if classes[ClassNetwork] != 282+94+4+4 {
		t.Errorf("%d network IRQs, want %d", classes[ClassNetwork], 282+94+4+4)
	}
	if classes[ClassTimer] != 1 {
		t.Errorf("%d timer IRQs, want 1", classes[ClassTimer])
	}
}

func hostFromInterrupts(t *testing.T, b []byte) *Host {
	t.Helper()
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "proc"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "proc/interrupts"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	in, err := kernel.New(dir).Interrupts()
	if err != nil {
		t.Fatal(err)
	}
	h := &Host{}
	for _, l := range in.Lines {
		if l.IRQ >= 0 {
			h.IRQs = append(h.IRQs, IRQ{Number: l.IRQ, Actions: l.Actions, Chip: l.Chip})
		}
	}
	return h
}

// TestParseActionConventions covers driver conventions that no fixture
// holds, each from the driver's source naming.
func TestParseActionConventions(t *testing.T) {
	for _, tc := range []struct {
		action string
		class  Class
		netdev string
		pci    string
		queue  int
		kind   string
	}{
		{"eth0-TxRx-3", ClassNetwork, "eth0", "", 3, "rxtx"},
		{"i40e-eth0-TxRx-3", ClassNetwork, "eth0", "", 3, "rxtx"},
		{"ice-ens1f0-TxRx-3", ClassNetwork, "ens1f0", "", 3, "rxtx"},
		{"iavf-ens1f0v0-TxRx-0", ClassNetwork, "ens1f0v0", "", 0, "rxtx"},
		{"ens5-Tx-Rx-0", ClassNetwork, "ens5", "", 0, "rxtx"},
		{"eth0-rx-0", ClassNetwork, "eth0", "", 0, "rx"},
		{"eth0-tx-2", ClassNetwork, "eth0", "", 2, "tx"},
		{"my-br-lan-rx-1", ClassNetwork, "my-br-lan", "", 1, "rx"},
		{"eth0-fp-5", ClassNetwork, "eth0", "", 5, "rxtx"},
		{"mlx5_comp3@pci:0000:3b:00.0", ClassNetwork, "", "0000:3b:00.0", 3, "rxtx"},
		{"mlx5_async@pci:0000:3b:00.0", ClassNetwork, "", "0000:3b:00.0", -1, ""},
		{"mlx5_comp12", ClassNetwork, "", "", 12, "rxtx"},
		{"gve-mgmnt@pci:0000:00:04.0", ClassNetwork, "", "0000:00:04.0", -1, ""},
		{"iwlwifi", ClassNetwork, "", "", -1, ""},
		{"iwlwifi:default_queue", ClassNetwork, "", "", -1, ""},
		{"virtio2-input.0", ClassNetwork, "", "", 0, "rx"},
		{"virtio2-output.7", ClassNetwork, "", "", 7, "tx"},
		{"virtio1-req.3", ClassStorage, "", "", 3, ""},
		{"virtio0-request", ClassStorage, "", "", -1, ""},
		{"nvme10q0", ClassStorage, "", "", -1, ""},
		{"nvme10q17", ClassStorage, "", "", 16, ""},
		{"mpt3sas0-msix3", ClassStorage, "", "", 3, ""},
		{"megasas0-msix17", ClassStorage, "", "", 17, ""},
		{"megasas0", ClassStorage, "", "", -1, ""},
		// ravb: "%s:%s" of the netdev and the channel's name.
		{"eth0:ch0:rx_be", ClassNetwork, "eth0", "", 0, "rx"},
		{"eth0:ch1:rx_nc", ClassNetwork, "eth0", "", 1, "rx"},
		{"eth0:ch18:tx_be", ClassNetwork, "eth0", "", 0, "tx"},
		{"eth0:ch19:tx_nc", ClassNetwork, "eth0", "", 1, "tx"},
		{"eth0:ch22:multi", ClassNetwork, "eth0", "", -1, ""},
		{"eth0:ch24:emac", ClassNetwork, "eth0", "", -1, ""},
		{"iwlwifi:queue_3", ClassNetwork, "", "", 3, "rx"},
		{"iwlwifi: queue 1", ClassNetwork, "", "", 1, "rx"},
		{"iwlwifi:exception_mask", ClassNetwork, "", "", -1, ""},
		{"brcmf_pcie_intr", ClassNetwork, "", "", -1, ""},
		{"enp5s0f4d1 (queue 11)", ClassNetwork, "enp5s0f4d1", "", 11, "rx"},
		{"enp0s8f0:rx-2", ClassNetwork, "enp0s8f0", "", 2, "rx"},
		// Single-vector NICs: the IRQ is named after the netdev.
		{"enp4s0", ClassNetwork, "enp4s0", "", -1, ""},
		{"enp0s31f6", ClassNetwork, "enp0s31f6", "", -1, ""},
		{"em1", ClassNetwork, "em1", "", -1, ""},
		{"eth0", ClassNetwork, "eth0", "", -1, ""},
		{"eno1", ClassNetwork, "eno1", "", -1, ""},
		{"ens5f1np1", ClassNetwork, "ens5f1np1", "", -1, ""},
		{"enP1s15", ClassNetwork, "enP1s15", "", -1, ""},
		{"wlp3s0", ClassNetwork, "wlp3s0", "", -1, ""},
		{"enx001122aabbcc", ClassNetwork, "enx001122aabbcc", "", -1, ""},
		// Look-alikes that are not netdevs.
		{"enable", "", "", "", -1, ""},
		{"eth", "", "", "", -1, ""},
		{"ehci_hcd:usb1", "", "", "", -1, ""},
		{"mmc0", ClassStorage, "", "", -1, ""},
		{"ata_piix", ClassStorage, "", "", -1, ""},
		{"hpet2", ClassTimer, "", "", -1, ""},
		{"arch_timer", ClassTimer, "", "", -1, ""},
		{"xhci_hcd", "", "", "", -1, ""},
		{"virtio3-rx", "", "", "", -1, ""}, // vsock, no index
	} {
		ai := parseAction(tc.action)
		if ai.class != tc.class || ai.netdev != tc.netdev || ai.pci != tc.pci || ai.queue != tc.queue || ai.kind != tc.kind {
			t.Errorf("%q: got %+v", tc.action, ai)
		}
	}
}

// TestGVEQueues: gve gives the first half of its notify blocks to tx queues
// and the second half to rx queues.
func TestGVEQueues(t *testing.T) {
	h := &Host{}
	for i := 0; i < 4; i++ {
		h.IRQs = append(h.IRQs, IRQ{Number: 30 + i, Chip: "PCI-MSIX-0000:00:04.0",
			Actions: []string{"gve-ntfy-blk" + string(rune('0'+i)) + "@pci:0000:00:04.0"}})
	}
	h.IRQs = append(h.IRQs, IRQ{Number: 34, Chip: "PCI-MSIX-0000:00:04.0", Actions: []string{"gve-mgmnt@pci:0000:00:04.0"}})
	classifyIRQs(h)
	checkIRQs(t, h, []wantIRQ{
		{30, ClassNetwork, "0000:00:04.0", 0, "tx"},
		{31, ClassNetwork, "0000:00:04.0", 1, "tx"},
		{32, ClassNetwork, "0000:00:04.0", 0, "rx"},
		{33, ClassNetwork, "0000:00:04.0", 1, "rx"},
		{34, ClassNetwork, "0000:00:04.0", -1, ""},
	})
}

// FuzzParseAction: any action name classifies without a panic and with a
// queue kind only on network queues.
func FuzzParseAction(f *testing.F) {
	for _, s := range []string{"eth0-TxRx-3", "mlx5_comp3@pci:0000:3b:00.0", "virtio2-input.0", "nvme0q1", "ahci[0000:00:17.0]", "-rx-1", "i40e--TxRx-0"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		ai := parseAction(s)
		if ai.kind != "" && (ai.class != ClassNetwork || ai.queue < 0) {
			t.Fatalf("%q: kind %q on %+v", s, ai.kind, ai)
		}
		h := &Host{IRQs: []IRQ{{Number: 1, Actions: []string{s}, Chip: "PCI-MSIX-0000:00:01.0"}}}
		classifyIRQs(h)
	})
}
