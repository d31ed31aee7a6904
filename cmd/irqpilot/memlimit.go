package main

import (
	"runtime/debug"

	"github.com/prometheus/procfs"
	"golang.org/x/sys/unix"
)

// limitHeapToAddressSpace gives the Go collector a memory limit inside an
// address-space limit (RLIMIT_AS, ulimit -v) when one is set. The runtime
// does not look at RLIMIT_AS: without a limit of its own it lets the heap
// grow to twice what is live before collecting, and when the address space
// runs out first it dies ("fatal error: out of memory", exit status 2)
// with garbage it could have collected. The limit is half of what is left
// of the address space after the reservations the runtime has made at
// start (VmSize), so that the heap's own reservations fit beside it.
func limitHeapToAddressSpace() {
	var r unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_AS, &r); err != nil || r.Cur == unix.RLIM_INFINITY {
		return
	}
	used := vmSize()
	if used == 0 || r.Cur <= used {
		return
	}
	if limit := int64((r.Cur - used) / 2); limit < debug.SetMemoryLimit(-1) {
		debug.SetMemoryLimit(limit)
	}
}

// vmSize is this process's address space in bytes (VmSize of its
// /proc/self/status, read by prometheus/procfs), 0 when unknown.
func vmSize() uint64 {
	self, err := procfs.Self()
	if err != nil {
		return 0
	}
	st, err := self.NewStatus()
	if err != nil {
		return 0
	}
	return st.VmSize
}
