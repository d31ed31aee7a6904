package kernel

import (
	"fmt"
	"strings"

	"github.com/irqpilot/irqpilot/internal/cpuset"
)

// BlockQueueDir is the directory of a block device's blk-mq hardware queues
// (/sys/block/DEV/mq), relative to the root.
func BlockQueueDir(dev string) string { return BlockDir + "/" + dev + "/mq" }

// BlockQueueCPUsPath is the file naming the CPUs whose I/O hardware queue q
// of block device dev takes (/sys/block/DEV/mq/Q/cpu_list).
func BlockQueueCPUsPath(dev string, q int) string {
	return fmt.Sprintf("%s/%d/cpu_list", BlockQueueDir(dev), q)
}

// BlockQueues lists the ids of block device dev's blk-mq hardware queues
// (the numbered entries of /sys/block/DEV/mq), ascending. A device without
// hardware queues (loop, zram, dm, md: no mq directory) is an error
// satisfying errors.Is(err, fs.ErrNotExist).
func (f *FS) BlockQueues(dev string) ([]int, error) {
	names, err := f.readDir(BlockQueueDir(dev))
	if err != nil {
		return nil, err
	}
	return NumberedEntries(names, ""), nil
}

// BlockQueueCPUs reads the CPUs whose I/O hardware queue q of block device
// dev takes (BlockQueueCPUsPath). blk-mq prints the list with a space after
// each comma ("0, 1"). A list that does not parse is an error naming the
// file.
func (f *FS) BlockQueueCPUs(dev string, q int) (cpuset.Set, error) {
	p := BlockQueueCPUsPath(dev, q)
	s, err := f.readString(p)
	if err != nil {
		return cpuset.Set{}, err
	}
	return parseBlockQueueCPUs("/"+p, s)
}

// parseBlockQueueCPUs parses a blk-mq cpu_list; name is used in errors.
func parseBlockQueueCPUs(name, s string) (cpuset.Set, error) {
	set, err := cpuset.Parse(strings.TrimSpace(s)) // Parse takes the spaces after commas
	if err != nil {
		return cpuset.Set{}, fmt.Errorf("%s: %w", name, err)
	}
	return set, nil
}
