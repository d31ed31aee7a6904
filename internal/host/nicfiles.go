package host

import "github.com/irqpilot/irqpilot/internal/kernel"

// readDefaultRoute marks the interfaces that carry a default route. A
// default route through a VLAN marks the device below it too: moving that
// device's IRQs moves the VLAN's traffic.
func readDefaultRoute(kfs *kernel.FS, h *Host) {
	names, err := kfs.DefaultRouteDevices()
	if err != nil && len(names) == 0 {
		where := "rtnetlink"
		if !kfs.IsLive() {
			where = "/" + kernel.SyntheticDir + "/" + kernel.DefaultRouteFile
		}
		h.unavailable("default route", where, err)
		return
	}
	for _, name := range names {
		for n := h.NIC(name); n != nil && !n.DefaultRoute; n = h.NIC(n.Lower) {
			n.DefaultRoute = true
		}
	}
	// The ports of a bridge or bond that carries it carry it too.
	for grew := len(names) > 0; grew; {
		grew = false
		for i := range h.NICs {
			n := &h.NICs[i]
			if n.DefaultRoute {
				continue
			}
			if m, err := kfs.NetDeviceMaster(n.Name); err == nil {
				if up := h.NIC(m); up != nil && up.DefaultRoute {
					n.DefaultRoute, grew = true, true
				}
			}
		}
	}
}

// readDevNAPIFiles reads each interface's device-wide NAPI files the way
// apply reads them (kernel.FS.ReadDevNAPI: a trimmed decimal; an empty
// file, as a capture keeps an unread one, holds no value).
func readDevNAPIFiles(kfs *kernel.FS, h *Host) {
	for i := range h.NICs {
		n := &h.NICs[i]
		napi := kfs.ReadDevNAPI(n.Name)
		n.Threaded, n.DeferHardIRQs, n.GROFlushTimeout = napi.Threaded, napi.DeferHardIRQs, napi.GROFlushTimeout
	}
}
