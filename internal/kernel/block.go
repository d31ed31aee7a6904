package kernel

import (
	"fmt"
	"path"
	"strconv"
	"strings"
)

// BlockDir is the directory of the block devices, relative to the root.
const BlockDir = "sys/block"

// BlockDevices lists the block devices (/sys/block).
func (f *FS) BlockDevices() ([]string, error) { return f.readDir(BlockDir) }

// NVMeControllers lists the NVMe controllers (/sys/class/nvme: nvme0…).
func (f *FS) NVMeControllers() ([]string, error) { return f.readDir("sys/class/nvme") }

// DiskOfDev names the whole disk holding block device major:minor (vda for
// vda or vda1), from /sys/dev/block/MAJ:MIN.
func (f *FS) DiskOfDev(major, minor uint32) (string, error) {
	dev, err := f.resolve(fmt.Sprintf("sys/dev/block/%d:%d", major, minor))
	if err != nil {
		return "", err
	}
	if f.Exists(dev + "/partition") {
		dev = path.Dir(dev)
	}
	return path.Base(dev), nil
}

// BlockStat is the start of /sys/block/DEV/stat (the kernel's
// Documentation/block/stat.rst): requests completed, by direction. Later
// fields are not read.
type BlockStat struct {
	ReadIOs  uint64 // field 1
	WriteIOs uint64 // field 5
}

// BlockStat reads /sys/block/DEV/stat (recorded like any ReadFile).
func (f *FS) BlockStat(dev string) (BlockStat, error) {
	p := "sys/block/" + dev + "/stat"
	s, err := f.readString(p)
	if err != nil {
		return BlockStat{}, fmt.Errorf("/%s: %w", p, err)
	}
	return parseBlockStat("/"+p, s)
}

// parseBlockStat parses the text of a block device's stat file; name is
// used in errors.
func parseBlockStat(name, s string) (BlockStat, error) {
	f := strings.Fields(s)
	if len(f) < 5 {
		return BlockStat{}, fmt.Errorf("%s: want ≥ 5 fields, got %q", name, s)
	}
	var st BlockStat
	for _, c := range []struct {
		field int
		dst   *uint64
	}{{1, &st.ReadIOs}, {5, &st.WriteIOs}} {
		n, err := strconv.ParseUint(f[c.field-1], 10, 64)
		if err != nil {
			return BlockStat{}, fmt.Errorf("%s field %d: %q is not a number", name, c.field, f[c.field-1])
		}
		*c.dst = n
	}
	return st, nil
}

// BlockInFlight reads /sys/block/DEV/inflight: the requests a block device
// has in flight, reads and writes (recorded like any ReadFile).
func (f *FS) BlockInFlight(dev string) (reads, writes int, err error) {
	p := "sys/block/" + dev + "/inflight"
	s, err := f.readString(p)
	if err != nil {
		return 0, 0, fmt.Errorf("/%s: %w", p, err)
	}
	return parseBlockInFlight("/"+p, s)
}

// parseBlockInFlight parses "reads writes"; name is used in errors.
func parseBlockInFlight(name, s string) (reads, writes int, err error) {
	f := strings.Fields(s)
	if len(f) != 2 {
		return 0, 0, fmt.Errorf("%s: want 2 numbers (reads writes), got %q", name, s)
	}
	var n [2]int
	for i, x := range f {
		if n[i], err = strconv.Atoi(x); err != nil {
			return 0, 0, fmt.Errorf("%s: %q is not a number", name, x)
		}
	}
	return n[0], n[1], nil
}
