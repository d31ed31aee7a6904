package host

import (
	"errors"
	"io/fs"
	"maps"
	"slices"
	"sort"
	"strconv"

	"github.com/irqpilot/irqpilot/internal/cpuset"
	"github.com/irqpilot/irqpilot/internal/kernel"
)

// readBlock reads every block device with blk-mq hardware queues
// (/sys/block/X/mq/N/cpu_list) that has a backing device. Devices without one
// (loop, zram, ram, nbd, dm, md, null_blk) have no IRQs and are skipped. The
// IRQs sysfs ties to the disk (its controller's PCI msi_irqs, its virtio
// device's vectors, its NVMe controller's queues) go into BlockDev.IRQs;
// classifyIRQs assigns them to queues.
func readBlock(kfs *kernel.FS, h *Host) {
	h.Block = []BlockDev{}
	names, err := kfs.BlockDevices()
	if err != nil {
		h.unavailable("block devices", "/"+kernel.BlockDir, err)
		return
	}
	infos := make([]actionInfo, len(h.IRQs))
	for i := range h.IRQs {
		infos[i] = irqInfo(&h.IRQs[i])
	}
	for _, name := range names {
		base := kernel.BlockDir + "/" + name
		mq, err := kfs.ReadDir(base + "/mq")
		if err != nil {
			if !errors.Is(err, fs.ErrNotExist) {
				h.unavailable("block "+name+" queues", "/"+base+"/mq", err)
			}
			continue
		}
		di := readDeviceInfo(kfs, h, "block "+name, base+"/device")
		if di.dir == "" {
			continue
		}
		b := BlockDev{Name: name, Driver: di.driver, BusAddr: di.busAddr, Node: di.node,
			Queues: []BlockQueue{}, IRQs: []int{}}
		for _, e := range mq {
			idx, err := strconv.Atoi(e)
			if err != nil || idx < 0 {
				continue
			}
			p := base + "/mq/" + e + "/cpu_list"
			s, err := kfs.ReadString(p)
			if err != nil {
				h.unavailable("block "+name+" queue "+e, "/"+p, err)
				continue
			}
			cpus, err := cpuset.Parse(s) // blk-mq prints "0, 1": Parse takes spaces after commas
			if err != nil {
				h.unavailable("block "+name+" queue "+e, "/"+p, err)
				continue
			}
			b.Queues = append(b.Queues, BlockQueue{Index: idx, CPUs: cpus})
		}
		sort.Slice(b.Queues, func(i, j int) bool { return b.Queues[i].Index < b.Queues[j].Index })
		b.IRQs = blockIRQs(h, infos, name, di)
		h.Block = append(h.Block, b)
	}
}

func blockIRQs(h *Host, infos []actionInfo, name string, di deviceInfo) []int {
	set := knownMSIIRQs(h, di)
	ctrl := nvmeController(name)
	for i := range h.IRQs {
		ai := infos[i]
		if (di.virtio != "" && ai.virtio == di.virtio) || (ctrl != "" && ai.ctrl == ctrl) ||
			(di.pciDir != "" && ai.pci == di.busAddr) {
			set[h.IRQs[i].Number] = true
		}
	}
	return slices.Sorted(maps.Keys(set))
}
