package kernel

import (
	"path"
	"regexp"
	"sort"
	"strconv"

	"github.com/irqpilot/irqpilot/internal/cpuset"
)

// rePCIFunction matches a PCI function's directory name in /sys/devices
// ("0000:41:00.0"; the domain may have more than four digits).
var rePCIFunction = regexp.MustCompile(`^[0-9a-fA-F]{4,}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]$`)

// reVirtioDevice matches a virtio device's directory name ("virtio2").
var reVirtioDevice = regexp.MustCompile(`^virtio\d+$`)

// Device is what sysfs says about the device behind a "device" link
// (sys/class/net/DEV/device, sys/block/DEV/device): ReadDevice.
type Device struct {
	// Dir is the directory the link resolves to, root-relative with a
	// leading "/" ("/sys/devices/pci0000:00/0000:00:03.0/virtio2").
	Dir string
	// PCIDir is the PCI function at or above Dir
	// ("/sys/devices/pci0000:00/0000:00:03.0"), "" when there is none.
	PCIDir string
	// BusAddr is the PCI function's address ("0000:00:03.0"), or the name
	// of Dir when the device is not on PCI.
	BusAddr string
	// Driver is the driver of the nearest device at or above Dir, up to the
	// PCI function (or Dir alone), that has a driver link; the SCSI disk
	// drivers (sd, sr) are skipped, so that a disk names its HBA's driver.
	// "" when none has one.
	Driver string
	// Node is numa_node of the PCI function, else of Dir; -1 when neither
	// file reads as an integer (the kernel itself writes -1 for no node).
	Node int
	// LocalCPUs is local_cpulist of the PCI function, else of Dir: the CPUs
	// of the device's node. Empty when neither file can be read.
	LocalCPUs cpuset.Set
	// LocalCPUsErr is set when the first local_cpulist that could be read
	// does not parse (LocalCPUs is then empty).
	LocalCPUsErr *ValueError
	// Virtio is Dir's name when the device is a virtio device ("virtio2"),
	// whose IRQs are named after it.
	Virtio string
	// MSIIRQs are the PCI function's MSI and MSI-X vectors (its msi_irqs
	// directory), ascending: allocated, not necessarily requested.
	MSIIRQs []int
}

// ReadDevice follows link, a sysfs "device" link such as
// "sys/block/vda/device", to its device and reads what Device holds. It
// fails only when the link does not resolve (no such device, or a virtual
// one without a link: an error satisfying errors.Is(err, fs.ErrNotExist));
// files missing below the device leave their fields empty.
func (f *FS) ReadDevice(link string) (*Device, error) {
	dir, err := f.resolve(link)
	if err != nil {
		return nil, err
	}
	d := &Device{Dir: dir, Node: -1}
	for p := dir; p != "/" && p != "/sys" && p != "/sys/devices"; p = path.Dir(p) {
		if rePCIFunction.MatchString(path.Base(p)) {
			d.PCIDir = p
			break
		}
	}
	if reVirtioDevice.MatchString(path.Base(dir)) {
		d.Virtio = path.Base(dir)
	}
	top := d.PCIDir
	if top == "" {
		top = dir
	}
	d.BusAddr = path.Base(top)
	for p := dir; len(p) >= len(top); p = path.Dir(p) {
		if t, err := f.readlink(p + "/driver"); err == nil {
			if drv := path.Base(t); drv != "sd" && drv != "sr" {
				d.Driver = drv
				break
			}
		}
		if p == top {
			break
		}
	}
	for _, p := range []string{top, dir} {
		if n, err := f.readInt(p + "/numa_node"); err == nil {
			d.Node = int(n)
			break
		}
	}
	for _, p := range []string{top, dir} {
		if s, err := f.readString(p + "/local_cpulist"); err == nil {
			if set, err := cpuset.Parse(s); err == nil {
				d.LocalCPUs = set
			} else {
				d.LocalCPUsErr = &ValueError{Path: p + "/local_cpulist", Err: err}
			}
			break
		}
	}
	if d.PCIDir != "" {
		if names, err := f.readDir(d.PCIDir + "/msi_irqs"); err == nil {
			d.MSIIRQs = parseMSIIRQs(names)
		}
	}
	return d, nil
}

// parseMSIIRQs turns the names in a msi_irqs directory (one per vector,
// named by IRQ number) into IRQ numbers, ascending; other names are left
// out.
func parseMSIIRQs(names []string) []int {
	var out []int
	for _, n := range names {
		if v, err := strconv.Atoi(n); err == nil {
			out = append(out, v)
		}
	}
	sort.Ints(out)
	return out
}
