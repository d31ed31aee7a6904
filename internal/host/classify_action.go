package host

import (
	"regexp"
	"strconv"
	"strings"
)

// parseAction and its patterns: what one IRQ action name says about its
// device and queue (see classify.go).

// actionInfo is what one action name says by itself.
type actionInfo struct {
	class  Class  // "" when the name alone does not tell
	netdev string // network interface named in the action ("eth0", "ens3f0")
	pci    string // PCI address named in the action ("0000:3b:00.0")
	virtio string // virtio device named in the action ("virtio2")
	ctrl   string // storage controller named in the action ("nvme0", "megasas0")
	driver string // driver prefix when it matters ("gve", "mlx5", "i40e")
	queue  int    // queue index, -1 when not a queue IRQ
	kind   string // "rx", "tx", "rxtx" for network queues
	// stem is the netdev of a "<netdev>-<n>" vector name ("eth0-3"): a NIC
	// only when the rest of the IRQ table agrees (classifyIRQs).
	stem string
}

const pciRe = `[0-9a-fA-F]{4,}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]`

var (
	// nvme: "nvme0q0" (admin queue), "nvme0q1" … (I/O queue n serves blk-mq hardware context n-1).
	reNVMe = regexp.MustCompile(`^(nvme\d+)q(\d+)$`)
	// virtio: "virtio2-input.0", "virtio2-output.0" (virtio_net), "virtio1-req.0"
	// (virtio_blk), "virtio0-request" (virtio_scsi), "virtio2-config", "virtio2-virtqueues", "virtio4".
	reVirtio = regexp.MustCompile(`^(virtio\d+)(?:-(.+))?$`)
	// virtio-fs names its queues "hiprio" and "requests.N" (or "requests").
	reVQ = regexp.MustCompile(`^(input|output|req|request|requests|hiprio)(?:\.(\d+))?$`)
	// mlx5: "mlx5_comp3@pci:0000:3b:00.0" (completion EQ n serves channel n),
	// "mlx5_async@pci:…", "mlx5_cmd_eq@pci:…"; older kernels "mlx5_comp3".
	reMLX5 = regexp.MustCompile(`^mlx5_(\w+?)(\d*)(?:@pci:(` + pciRe + `))?$`)
	// gve: "gve-ntfy-blk3@pci:0000:00:04.0", "gve-mgmnt@pci:…"; ena: "ena-mgmnt@pci:…";
	// mlx4: "mlx4-1@0000:04:00.0".
	reAtPCI = regexp.MustCompile(`^(gve|ena|mlx4)-([\w-]*?)(\d*)@(?:pci:)?(` + pciRe + `)$`)
	// Queue vectors named after the netdev, optionally behind the driver name:
	// "eth0-TxRx-3" (ixgbe, igb, bnxt), "i40e-eth0-TxRx-3", "ice-ens1f0-TxRx-3",
	// "iavf-…-TxRx-0", "ens5-Tx-Rx-0" (ena), "eth0-rx-0"/"eth0-tx-0" (igb, e1000e, tg3),
	// "eth0-txrx-1" (tg3), "eth0-rxtx-0" (vmxnet3), "eth0-fp-0" (bnx2x, qede).
	// Intel drivers also name non-queue vectors this way with the PCI
	// address instead of the netdev: "i40e-0000:31:00.0:fdir-TxRx-0", "ice-…:ctrl-TxRx-0".
	// Some drivers separate the netdev with a colon: "enp0s8f0:rx-0".
	reNetQueue = regexp.MustCompile(`^(.+?)[-:](TxRx|Tx-Rx|txrx|rxtx|fp|rx|tx|Rx|Tx)-(\d+)$`)
	// ravb (Renesas): "eth0:ch0:rx_be", "eth0:ch1:rx_nc", "eth0:ch18:tx_be",
	// "eth0:ch19:tx_nc" — queue 0 is the best-effort ring, queue 1 the
	// network-control ring (RAVB_BE, RAVB_NC); "eth0:ch22:multi",
	// "eth0:ch24:emac" serve no queue.
	reRAVB = regexp.MustCompile(`^(.+?):ch\d+:(?:(rx|tx)_(be|nc)|[a-z_]+)$`)
	// Xen netfront and netback: one event channel per queue and direction,
	// "<netdev>-q<N>-tx" / "-rx" ("eth0-q1-rx"; dom0's "vif13.0-q1-tx").
	reXenQueue = regexp.MustCompile(`^(.+)-q(\d+)-(tx|rx)$`)
	// cxgb4: "enp5s0f4d1 (queue 11)", an rx queue's vector.
	reQueueParen = regexp.MustCompile(`^(\S+) \(queue (\d+)\)$`)
	// iwlwifi rx queues: "iwlwifi:queue_1" (newer), "iwlwifi: queue 1" (older).
	reIwlQueue = regexp.MustCompile(`^iwlwifi: ?queue[ _](\d+)$`)
	// A single-vector NIC names its only IRQ after the netdev: "eth0"
	// (stmmac, macb), "em1", "enp2s0" (r8169), "enp0s31f6" (e1000e with
	// MSI). Names follow the kernel's ethN/wlanN or systemd's predictable
	// scheme (en/wl/ww/ib + o, s, p…s, x<MAC>, P<domain>…), so that a
	// dump read alone still tells which IRQs are NICs'.
	reNetdevName = regexp.MustCompile(`^(?:(?:eth|em|wlan)\d+|p\d+p\d+|(?:en|wl|ww|ib)(?:o\d+|(?:P\d+)?(?:p\d+)?s\d+|x[0-9a-fA-F]{12}|[abciv]\d+)(?:f\d+)?(?:d\d+)?(?:np\d+)?(?:v\d+)?)$`)
	// Vendor drivers that name one vector per interrupt source after the
	// netdev: "eth0-0" … "eth0-6" (Realtek's out-of-tree r8125/r8168).
	reNetdevVector = regexp.MustCompile(`^(.+)-(\d+)$`)
	// mana (Azure): "mana_q3@pci:7870:00:00.0" (queue EQ n), "mana_hwc@pci:…".
	reMANA = regexp.MustCompile(`^mana_(?:q(\d+)|hwc)@pci:(` + pciRe + `)$`)
	// Intel non-queue vectors: "i40e-0000:31:00.0:misc", "ice-0000:4b:00.0:ll_ts".
	reIntelMisc = regexp.MustCompile(`^(i40e|ice|iavf)-(` + pciRe + `)(?::.*)?$`)
	// irdma (RDMA on ice/i40e ports): "irdma-0000:4b:00.0-CEQ-0", "irdma-0000:4b:00.0-AEQ".
	reIRDMA = regexp.MustCompile(`^irdma-(` + pciRe + `)-`)
	// ahci: "ahci[0000:00:17.0]" (newer kernels), "ahci0", "ahci".
	reBracketPCI = regexp.MustCompile(`^([\w-]+)\[(` + pciRe + `)\]`)
	// SCSI/SAS HBAs: "megasas0-msix5", "mpt3sas0-msix0", "mpt2sas1-msix3", "hpsa0-msix2", "mpi3mr0-msix0".
	// The -msixN vectors are reply queues: N serves blk-mq hardware queue N.
	reHBA = regexp.MustCompile(`^((?:megasas|mpt[23]sas|hpsa|mpi3mr|aacraid)\d+)(?:-msix(\d+))?$`)
	// The PCI address in an MSI chip name: "IR-PCI-MSIX-0000:3b:00.0", "PCI-MSI-0000:00:1f.2".
	reChipPCI = regexp.MustCompile(`PCI-MSI(?:X)?-(` + pciRe + `)$`)
	rePCI     = regexp.MustCompile(pciRe)
)

// netDriverPrefixes are drivers that put their own name before the netdev
// in queue vector names ("i40e-eth0-TxRx-3").
var netDriverPrefixes = []string{"i40e-", "ice-", "iavf-", "i40evf-", "hns3-", "idpf-"}

// storagePrefixes are action-name prefixes of storage drivers without a
// queue convention.
var storagePrefixes = []string{
	"ahci", "ata_piix", "ata_generic", "pata_", "sata_", "libata", "ide0", "ide1",
	"megasas", "megaraid", "mpt2sas", "mpt3sas", "mpi3mr", "mptbase", "mptspi", "mptsas", "mptfc",
	"lpfc", "smartpqi", "hpsa", "aacraid", "qla2xxx", "qla4xxx", "isci", "pm80xx", "pm8001",
	"ufshcd", "sdhci", "mmc", "vmw_pvscsi", "hisi_sas", "arcmsr", "mvsas", "bfa", "qedf", "fnic",
	"virtio-scsi", "nvme",
}

// netNamePrefixes are action-name prefixes of network drivers whose vectors
// name neither the netdev nor a queue.
var netNamePrefixes = []string{
	"iwlwifi", "ath9k", "ath10k", "ath11k", "ath12k", "rtw88", "rtw89", "mt76", "mt79", "brcmf",
	"mlx4_core", "mlx4", "mlx5", "bnxt_", "qede", "qed_", "hns3", "enic", "nfp", "sfc", "fm10k",
	"e1000", "r8169", "igb", "igc", "ixgbe", "i40e", "ice", "iavf", "cxgb4", "liquidio", "vmxnet3",
	"ena-", "gve-", "irdma", "nfp",
}

func hasAnyPrefix(s string, ps []string) bool {
	for _, p := range ps {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}

func isTimerAction(a string) bool {
	switch a {
	case "timer", "arch_timer", "arch_mem_timer", "hpet":
		return true
	}
	return strings.HasPrefix(a, "hpet")
}

// parseAction reads one action name.
func parseAction(a string) actionInfo {
	ai := actionInfo{queue: -1}
	if isTimerAction(a) {
		ai.class = ClassTimer
		return ai
	}
	if m := reNVMe.FindStringSubmatch(a); m != nil {
		ai.class, ai.ctrl, ai.driver = ClassStorage, m[1], "nvme"
		if q, _ := strconv.Atoi(m[2]); q > 0 {
			ai.queue = q - 1 // nvme_init_hctx: hctx i uses I/O queue i+1
		}
		return ai
	}
	if m := reVirtio.FindStringSubmatch(a); m != nil {
		ai.virtio, ai.driver = m[1], "virtio"
		if v := reVQ.FindStringSubmatch(m[2]); v != nil {
			idx := -1
			if v[2] != "" {
				idx, _ = strconv.Atoi(v[2])
			}
			switch v[1] {
			case "input", "output":
				// virtio_net names its vqs "input.N"/"output.N"; virtio-rng
				// and virtio-console use "input"/"output" without index.
				if idx >= 0 {
					ai.class, ai.queue, ai.kind = ClassNetwork, idx, map[string]string{"input": "rx", "output": "tx"}[v[1]]
				}
			case "req", "requests":
				ai.class, ai.queue = ClassStorage, idx
			case "request", "hiprio":
				ai.class = ClassStorage
			}
		}
		return ai
	}
	if m := reMLX5.FindStringSubmatch(a); m != nil {
		ai.class, ai.driver, ai.pci = ClassNetwork, "mlx5", m[3]
		if m[1] == "comp" && m[2] != "" {
			ai.queue, _ = strconv.Atoi(m[2])
			ai.kind = "rxtx"
		}
		return ai
	}
	if m := reAtPCI.FindStringSubmatch(a); m != nil {
		ai.class, ai.driver, ai.pci = ClassNetwork, m[1], m[4]
		if m[1] == "gve" && m[2] == "ntfy-blk" && m[3] != "" {
			// Placed later (assignGVEQueues): which half of the notify
			// blocks is tx and which rx depends on how many there are.
			ai.queue, _ = strconv.Atoi(m[3])
		}
		return ai
	}
	if m := reMANA.FindStringSubmatch(a); m != nil {
		ai.class, ai.driver, ai.pci = ClassNetwork, "mana", m[2]
		if m[1] != "" {
			ai.queue, _ = strconv.Atoi(m[1])
			ai.kind = "rxtx"
		}
		return ai
	}
	if m := reIRDMA.FindStringSubmatch(a); m != nil {
		ai.class, ai.driver, ai.pci = ClassNetwork, "irdma", m[1]
		return ai
	}
	if m := reIwlQueue.FindStringSubmatch(a); m != nil {
		ai.class, ai.driver, ai.kind = ClassNetwork, "iwlwifi", "rx"
		ai.queue, _ = strconv.Atoi(m[1])
		return ai
	}
	if m := reRAVB.FindStringSubmatch(a); m != nil {
		ai.class, ai.netdev, ai.driver = ClassNetwork, m[1], "ravb"
		if m[2] != "" {
			ai.queue, ai.kind = map[string]int{"be": 0, "nc": 1}[m[3]], m[2]
		}
		return ai
	}
	if m := reXenQueue.FindStringSubmatch(a); m != nil {
		ai.class, ai.netdev, ai.kind = ClassNetwork, m[1], m[3]
		ai.queue, _ = strconv.Atoi(m[2])
		return ai
	}
	if m := reQueueParen.FindStringSubmatch(a); m != nil {
		ai.class, ai.netdev, ai.kind = ClassNetwork, m[1], "rx"
		ai.queue, _ = strconv.Atoi(m[2])
		return ai
	}
	if m := reNetQueue.FindStringSubmatch(a); m != nil {
		ai.class = ClassNetwork
		prefix := m[1]
		for _, p := range netDriverPrefixes {
			if strings.HasPrefix(prefix, p) {
				ai.driver = strings.TrimSuffix(p, "-")
				prefix = strings.TrimPrefix(prefix, p)
				break
			}
		}
		if pm := rePCI.FindString(prefix); pm != "" {
			ai.pci = pm // "i40e-0000:31:00.0:fdir-TxRx-0": a control vector, not a queue
			return ai
		}
		ai.netdev = prefix
		ai.queue, _ = strconv.Atoi(m[3])
		switch m[2] {
		case "rx", "Rx":
			ai.kind = "rx"
		case "tx", "Tx":
			ai.kind = "tx"
		default:
			ai.kind = "rxtx"
		}
		return ai
	}
	if m := reIntelMisc.FindStringSubmatch(a); m != nil {
		ai.class, ai.driver, ai.pci = ClassNetwork, m[1], m[2]
		return ai
	}
	if m := reBracketPCI.FindStringSubmatch(a); m != nil {
		ai.pci = m[2]
		if hasAnyPrefix(m[1], storagePrefixes) {
			ai.class = ClassStorage
		} else if hasAnyPrefix(m[1], netNamePrefixes) {
			ai.class = ClassNetwork
		}
		return ai
	}
	if m := reHBA.FindStringSubmatch(a); m != nil {
		ai.class, ai.ctrl = ClassStorage, m[1]
		if m[2] != "" {
			ai.queue, _ = strconv.Atoi(m[2])
		}
		return ai
	}
	if reNetdevName.MatchString(a) {
		ai.class, ai.netdev = ClassNetwork, a
		return ai
	}
	if m := reNetdevVector.FindStringSubmatch(a); m != nil && reNetdevName.MatchString(m[1]) {
		ai.stem = m[1] // undecided: classifyIRQs asks the rest of the table
		return ai
	}
	switch {
	case hasAnyPrefix(a, storagePrefixes):
		ai.class = ClassStorage
	case hasAnyPrefix(a, netNamePrefixes):
		ai.class = ClassNetwork
	}
	return ai
}

// ruleAction reads one action on its chip: the rule table first
// (classify_rules.go), then the drivers' naming conventions.
func ruleAction(a, chip string) actionInfo {
	r := ruleFor(a, chip)
	if r == nil {
		return parseAction(a)
	}
	ai := actionInfo{class: r.class, queue: -1}
	if r.kind == "platform" {
		if r.class == ClassNetwork {
			ai.netdev = a
		} else {
			ai.ctrl = a
		}
	}
	return ai
}

// chipPCI returns the PCI address in an MSI chip name, "" if none.
func chipPCI(chip string) string {
	if m := reChipPCI.FindStringSubmatch(chip); m != nil {
		return m[1]
	}
	return ""
}

// irqInfo is the combined reading of an IRQ's actions: the first action
// that tells a class decides; a queue comes from the first action that has one
// (a shared "nvme0q0, nvme0q1" is queue 0 of nvme0).
func irqInfo(q *IRQ) actionInfo {
	best := actionInfo{queue: -1}
	for _, a := range q.Actions {
		ai := ruleAction(a, q.Chip)
		if best.class == "" && ai.class != "" {
			best.class = ai.class
		}
		if best.netdev == "" {
			best.netdev = ai.netdev
		}
		if best.pci == "" {
			best.pci = ai.pci
		}
		if best.virtio == "" {
			best.virtio = ai.virtio
		}
		if best.ctrl == "" {
			best.ctrl = ai.ctrl
		}
		if best.driver == "" {
			best.driver = ai.driver
		}
		if best.stem == "" {
			best.stem = ai.stem
		}
		if best.queue < 0 && ai.queue >= 0 {
			best.queue, best.kind = ai.queue, ai.kind
		}
	}
	if best.pci == "" {
		best.pci = chipPCI(q.Chip)
	}
	return best
}
