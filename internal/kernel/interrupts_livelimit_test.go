package kernel

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// The limits on /proc/interrupts bound what a snapshot (anyone's file) can
// make a reader hold; the live kernel's file is as large as the machine
// and is read whatever its size. 8192 CPUs × 600 IRQ rows is over the
// snapshot's limit on counts.
func TestInterruptsLimitsAreForSnapshots(t *testing.T) {
	const cpus, rows = 8192, 600
	var b strings.Builder
	for c := 0; c < cpus; c++ {
		fmt.Fprintf(&b, " CPU%d", c)
	}
	b.WriteString("\n")
	zeros := strings.Repeat(" 0", cpus)
	for i := 0; i < rows; i++ {
		fmt.Fprintf(&b, "%d:%s IR-PCI-MSIX 1-edge nvme0q%d\n", 30+i, zeros, i)
	}
	data := []byte(b.String())
	_, err := parseInterrupts("snapshot/proc/interrupts", data)
	if !errors.Is(err, ErrOverLimit) {
		t.Fatalf("a snapshot's %d×%d file: %v, want the limit's refusal", cpus, rows, err)
	}
	in, err := parseLiveInterrupts("/proc/interrupts", data)
	if err != nil {
		t.Fatalf("the live file of a %d-CPU machine with %d IRQs refused: %v", cpus, rows, err)
	}
	if len(in.CPUs) != cpus {
		t.Errorf("%d CPUs read, want %d", len(in.CPUs), cpus)
	}
}
