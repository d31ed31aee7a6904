package kernel

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"

	"github.com/prometheus/procfs"
	"github.com/vishvananda/netlink"
)

// DefaultRouteFile is the synthetic file in which a capture keeps the
// devices that carried a default route, so a snapshot plans like the live
// machine did.
const DefaultRouteFile = "default-route.json"

// DefaultRouteDevices names the network interfaces that carry a default
// route (IPv4 0.0.0.0/0 or IPv6 ::/0 in the main table, every next hop of a
// multipath route) in the calling process's network namespace — the one
// whose /sys/class/net this FS reads. On the live machine it asks rtnetlink
// and, while recording, keeps the answer for a capture; below another root
// it reads that record, else the tree's /proc/net/route (IPv4 only). The
// error says why it is unknown; no default route is an empty list.
func (f *FS) DefaultRouteDevices() ([]string, error) {
	if f.IsLive() {
		names, err := liveDefaultRoutes()
		if err == nil {
			if b, jerr := json.Marshal(names); jerr == nil {
				f.SaveSynthetic(DefaultRouteFile, b)
			}
		}
		return names, err
	}
	if b, err := f.ReadSynthetic(DefaultRouteFile); err == nil {
		var names []string
		if err := json.Unmarshal(b, &names); err != nil {
			return nil, fmt.Errorf("%s: %w", DefaultRouteFile, err)
		}
		return names, nil
	}
	pfs, err := procfs.NewFS(f.Path("proc"))
	var lines []procfs.NetRouteLine
	if err == nil {
		lines, err = pfs.NetRoute()
	}
	if err != nil {
		return nil, fmt.Errorf("not in this capture (read with rtnetlink on the live machine; no /proc/net/route either): %w", f.kernelErr(err))
	}
	var names []string
	for _, l := range lines {
		if l.Destination == 0 && l.Mask == 0 && l.Iface != "" && l.Iface != "*" {
			names = append(names, l.Iface)
		}
	}
	return tidy(names), nil
}

func liveDefaultRoutes() ([]string, error) {
	routes, err := netlink.RouteList(nil, netlink.FAMILY_ALL)
	if err != nil {
		return nil, fmt.Errorf("list routes (rtnetlink): %w", err)
	}
	var idx []int
	for _, r := range routes {
		if r.Dst != nil {
			if ones, _ := r.Dst.Mask.Size(); ones != 0 {
				continue
			}
		}
		if r.LinkIndex > 0 {
			idx = append(idx, r.LinkIndex)
		}
		for _, nh := range r.MultiPath {
			if nh != nil && nh.LinkIndex > 0 {
				idx = append(idx, nh.LinkIndex)
			}
		}
	}
	var names []string
	var errs []error
	for _, i := range idx {
		l, err := netlink.LinkByIndex(i)
		if err != nil {
			errs = append(errs, fmt.Errorf("interface %d: %w", i, err))
			continue
		}
		names = append(names, l.Attrs().Name)
	}
	return tidy(names), errors.Join(errs...)
}

func tidy(names []string) []string {
	sort.Strings(names)
	names = slices.Compact(names)
	if names == nil {
		names = []string{}
	}
	return names
}
