package host

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"slices"

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
		qs, err := kfs.BlockQueues(name)
		if err != nil {
			if !errors.Is(err, fs.ErrNotExist) {
				h.unavailable("block "+name+" queues", "/"+kernel.BlockQueueDir(name), err)
			}
			continue
		}
		di := readDeviceInfo(kfs, h, "block "+name, kernel.BlockDir+"/"+name+"/device")
		if di.dir == "" {
			continue
		}
		b := BlockDev{Name: name, Driver: di.driver, BusAddr: di.busAddr, Node: di.node,
			Queues: []BlockQueue{}, IRQs: []int{}}
		for _, q := range qs {
			cpus, err := kfs.BlockQueueCPUs(name, q)
			if err != nil {
				h.unavailable(fmt.Sprintf("block %s queue %d", name, q), "/"+kernel.BlockQueueCPUsPath(name, q), err)
				continue
			}
			b.Queues = append(b.Queues, BlockQueue{Index: q, CPUs: cpus})
		}
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
