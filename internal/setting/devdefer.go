package setting

import "strconv"

// dev-defer-hard-irqs: sys/class/net/DEV/napi_defer_hard_irqs (5.10): how
// many polls that find nothing keep the device's IRQ masked before it is
// re-armed (needs gro_flush_timeout to bound the wait). Writing it sets every
// NAPI instance of the device.
var devDeferKind = devFileKind(KindDevDeferHardIRQs, "napi_defer_hard_irqs", MaxDeferHardIRQs, 1<<31-1, "napi_defer_hard_irqs").with(&featDefer)

var featDefer = devFeature("NAPI IRQ deferral", "napi_defer_hard_irqs")

// DevDeferHardIRQs is the change that sets dev's napi_defer_hard_irqs.
func DevDeferHardIRQs(dev string, n uint32, reason string) Change {
	return Change{Kind: KindDevDeferHardIRQs, Target: dev + " napi_defer_hard_irqs", Path: DevPath(dev, "napi_defer_hard_irqs"),
		Device: dev, Value: strconv.FormatUint(uint64(n), 10), Reason: reason}
}
