package bench

import (
	"fmt"

	"github.com/irqpilot/irqpilot/internal/host"
	"github.com/irqpilot/irqpilot/internal/kernel"
	"github.com/irqpilot/irqpilot/internal/kernel/netdev"
	"github.com/irqpilot/irqpilot/internal/setting"
)

// The testbed's device lives in a network namespace of its own. Its sysfs
// files are reached through AppInfo.NSRoot, but its NAPI instances are
// reached only with netlink, and a netlink socket talks to the namespace it
// was created in: the bench process runs in the host's. nsNAPI opens every
// socket inside the testbed's namespace (netdev.OpenIn), so per-NAPI
// settings (napi-* kinds, which have no file) are read, written, read back
// and restored there, never on the host's devices.

// nsNAPI is a setting.NAPIConn for the network namespace whose nsfs file is
// Path. It opens a socket per call, like the live one.
type nsNAPI struct{ Path string }

var _ setting.NAPIConn = nsNAPI{}

func (n nsNAPI) NAPI(id uint32) (netdev.NAPI, error) {
	c, err := netdev.OpenIn(n.Path)
	if err != nil {
		return netdev.NAPI{}, err
	}
	defer c.Close()
	return c.NAPI(id)
}

func (n nsNAPI) SetNAPI(s netdev.NAPISet) error {
	c, err := netdev.OpenIn(n.Path)
	if err != nil {
		return err
	}
	defer c.Close()
	return c.SetNAPI(s)
}

// testbedNAPI lists the NAPI instances of dev in the namespace nsPath, as
// the host model has them (host.Read below the namespace's sysfs view is not
// the live machine, so it cannot ask netlink itself). fs is that view (for
// the ifindex); thread placement and start times come from live, the
// machine's /proc.
// A veth without GRO has none.
func testbedNAPI(live, fs *kernel.FS, nsPath, dev string) ([]host.NAPI, error) {
	ix, err := fs.IfIndex(dev)
	if err != nil {
		return nil, fmt.Errorf("testbed device %s: %w", dev, err)
	}
	c, err := netdev.OpenIn(nsPath)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	ns, err := c.NAPIs(int(ix))
	if err != nil {
		return nil, fmt.Errorf("testbed device %s: %w", dev, err)
	}
	var out []host.NAPI
	for _, n := range ns {
		if n.Ifindex != int(ix) {
			continue
		}
		m := host.NAPI{ID: n.ID, Device: dev, IRQ: n.IRQ, PID: n.PID, Threaded: n.Threaded, DeferHardIRQs: n.DeferHardIRQs,
			GROFlushTimeout: n.GROFlushTimeout, IRQSuspendTimeout: n.IRQSuspendTimeout,
			Queues: host.NAPIQueues{RX: []int{}, TX: []int{}}}
		if n.PID != nil {
			if s, err := live.ThreadAffinity(*n.PID); err == nil {
				m.CPUs = &s
			}
			if st, err := live.TaskStart(*n.PID); err == nil {
				m.PIDStart = st
			}
		}
		out = append(out, m)
	}
	return out, nil
}

// inTestbedNS: c is applied in the testbed's namespace — a file below the
// device's sysfs directory, or one of its NAPI instances.
func inTestbedNS(c *setting.Change, dev string) bool {
	if dev == "" || setting.ScopeOf(c).NetDevice != dev {
		return false
	}
	return c.Path != "" || c.NAPI != nil
}
