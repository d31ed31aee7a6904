package setting

import (
	"math"
	"strconv"
)

// dev-gro-flush-timeout: sys/class/net/DEV/gro_flush_timeout in ns (4.0):
// a non-zero value keeps GRO batches open and arms a timer that polls the
// device instead of waiting for its IRQ (with napi_defer_hard_irqs).
// Writing it sets every NAPI instance of the device.
var devGROFlushKind = devFileKind(KindDevGROFlushTimeout, "gro_flush_timeout", MaxNAPITimeoutNs, math.MaxUint64, "gro_flush_timeout (ns)").with(&featGROFlush)

var featGROFlush = devFeature("GRO flush timeout", "gro_flush_timeout")

// DevGROFlushTimeout is the change that sets dev's gro_flush_timeout.
func DevGROFlushTimeout(dev string, ns uint64, reason string) Change {
	return Change{Kind: KindDevGROFlushTimeout, Target: dev + " gro_flush_timeout", Path: DevPath(dev, "gro_flush_timeout"),
		Device: dev, Value: strconv.FormatUint(ns, 10), Reason: reason}
}
