package lab

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// fleetNICID is the QEMU device id of a fleet guest's NIC on the bridge.
const fleetNICID = "nic0"

// ReplugNIC unplugs the guest's NIC on the bridge through QEMU's monitor
// (a PCIe hot-unplug the guest's driver acknowledges), waits until QEMU has
// removed it, and plugs the same device again, on the same tap, with the
// same MAC and queues. The guest sees eth0 go and come back; its udev rule
// gives it the address again. Returns how long the unplug took.
func (g *Guest) ReplugNIC(ctx context.Context) (time.Duration, error) {
	start := time.Now()
	if _, err := g.mon.Command("device_del " + fleetNICID); err != nil {
		return 0, err
	}
	for {
		out, err := g.mon.Command("info pci")
		if err != nil {
			return 0, err
		}
		if !strings.Contains(out, `id "`+fleetNICID+`"`) {
			break
		}
		select {
		case <-ctx.Done():
			return 0, fmt.Errorf("%s: the guest did not release %s: %w", g.Name, fleetNICID, ctx.Err())
		case <-time.After(500 * time.Millisecond):
		}
	}
	took := time.Since(start)
	if _, err := g.mon.Command("device_add " + g.nicDevice); err != nil {
		return took, err
	}
	return took, nil
}
