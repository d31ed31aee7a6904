package setting

// dev-threaded: sys/class/net/DEV/threaded, threaded NAPI for every NAPI
// instance of the device (5.12): 1 gives each its own kernel thread
// (napi/DEV-ID) that can be placed like an IRQ, 0 polls in softirq context.
// The kernel refuses it (EOPNOTSUPP) on a device without NAPI instances:
// the change is then skipped as unsupported.
var devThreadedKind = devFileKind(KindDevThreaded, "threaded", 1, 2, "threaded").with(&featThreaded) // 2: busy-poll threads (newer kernels), in a journal only

var featThreaded = devFeature("threaded NAPI", "threaded")

// DevThreaded is the change that turns threaded NAPI on or off for every
// NAPI instance of dev.
func DevThreaded(dev string, on bool, reason string) Change {
	v := "0"
	if on {
		v = "1"
	}
	return Change{Kind: KindDevThreaded, Target: dev + " threaded NAPI", Path: DevPath(dev, "threaded"), Device: dev, Value: v, Reason: reason}
}
