package lab

import (
	"flag"
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/irqpilot/irqpilot/internal/golden"
	"github.com/irqpilot/irqpilot/internal/host"
	"github.com/irqpilot/irqpilot/internal/kernel"
)

var updateGolden = flag.Bool("update-golden", false, "rewrite testdata/golden/lab-*.irqs.txt from the committed captures")

// capturedSnapshots is where TestLabCaptures' archives are committed.
const capturedSnapshots = "../../testdata/snapshots"

// The small and nics shapes captured inside the guest on each lab kernel
// (`irqpilot capture --probe-managed`, TestLabCaptures), read back as a
// snapshot without a guest: the inventory is the shape, as the live lab
// tests check it (topology, NICs, NVMe and virtio-blk queue IRQs, managed
// ones found), and every IRQ's class, device, queue and kind are the
// reviewed golden file's (testdata/golden/lab-small-VERSION.irqs.txt,
// rewritten with -update-golden, which prints what changed).
func TestLabCapturedKernels(t *testing.T) {
	for _, name := range []string{"small", "nics"} {
		shape, err := Lookup(name)
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range KernelVersions() {
			t.Run(name+"@"+v, func(t *testing.T) {
				fs, cleanup, err := kernel.OpenSnapshot(filepath.Join(capturedSnapshots, "lab-"+name+"-"+v+".tar.gz"))
				if err != nil {
					t.Fatal(err)
				}
				defer cleanup()
				h, err := host.Read(fs, host.Options{})
				if err != nil {
					t.Fatal(err)
				}
				checkTopology(t, shape, h)
				checkNICs(t, shape, h)
				checkNVMe(t, shape, h, h)
				checkVirtioBlk(t, shape, h, h)
				golden.Check(t, filepath.Join("testdata", "golden", "lab-"+name+"-"+v+".irqs.txt"), []byte(irqTable(h)), *updateGolden, "update-golden")
			})
		}
	}
}

// irqTable is one line per IRQ: number, name, class, device, queue and
// kind, managed.
func irqTable(h *host.Host) string {
	irqs := append([]host.IRQ(nil), h.IRQs...)
	sort.Slice(irqs, func(i, j int) bool { return irqs[i].Number < irqs[j].Number })
	var b strings.Builder
	for _, q := range irqs {
		queue := "-"
		if q.Queue != nil {
			queue = fmt.Sprintf("%d", *q.Queue)
			if q.QueueKind != "" {
				queue += " " + q.QueueKind
			}
		}
		dev := q.Device
		if dev == "" {
			dev = "-"
		}
		shared := ""
		if len(q.SharedWith) > 0 {
			shared = " shared with " + strings.Join(q.SharedWith, ",")
		}
		fmt.Fprintf(&b, "%d %s: %s %s%s queue %s managed %s\n", q.Number, strings.Join(q.Actions, ","), q.Class, dev, shared, queue, q.Managed)
	}
	return b.String()
}
