package host

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/irqpilot/irqpilot/internal/kernel"
)

// The lab's nics shape on 6.1 (testdata/snapshots/lab-nics-6.1.tar.gz):
// e1000 (eth1) and 8139cp (eth2) on one legacy line, IRQ 22. With a USB
// controller's handler added to that line in the capture's table, the
// line is shared with it too: moving it would move the USB interrupts.
func TestSharedLineWithOtherDriver(t *testing.T) {
	fs, cleanup, err := kernel.OpenSnapshot(filepath.Join("..", "..", "testdata", "snapshots", "lab-nics-6.1.tar.gz"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cleanup)
	line22 := func(t *testing.T) *IRQ {
		t.Helper()
		h, err := Read(fs, Options{})
		if err != nil {
			t.Fatal(err)
		}
		for i := range h.IRQs {
			if h.IRQs[i].Number == 22 {
				return &h.IRQs[i]
			}
		}
		t.Fatal("no IRQ 22 in the capture")
		return nil
	}
	q := line22(t)
	if diff := cmp.Diff([]string{"eth2"}, q.SharedWith); q.Device != "eth1" || diff != "" {
		t.Fatalf("captured IRQ 22: device %q, shared with %v; want eth1's, shared with eth2", q.Device, q.SharedWith)
	}
	// Both places that list the line's handlers.
	for _, e := range []struct{ file, old, new string }{
		{"proc/interrupts", "22-fasteoi   eth1, eth2\n", "22-fasteoi   eth1, uhci_hcd:usb1, eth2\n"},
		{"sys/kernel/irq/22/actions", "eth1,eth2\n", "eth1,uhci_hcd:usb1,eth2\n"},
	} {
		p := filepath.Join(fs.Root(), e.file)
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		edited := strings.Replace(string(b), e.old, e.new, 1)
		if edited == string(b) {
			t.Fatalf("%s: IRQ 22's handlers are not %q in the capture", e.file, e.old)
		}
		if err := os.WriteFile(p, []byte(edited), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	q = line22(t)
	if diff := cmp.Diff([]string{"eth2", "uhci_hcd:usb1"}, q.SharedWith); q.Device != "eth1" || diff != "" {
		t.Errorf("IRQ 22 with a USB handler: device %q, shared with (-want +got):\n%s", q.Device, diff)
	}
}
