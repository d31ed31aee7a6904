package apply

import (
	"fmt"
	"slices"

	"github.com/irqpilot/irqpilot/internal/cpuset"
	"github.com/irqpilot/irqpilot/internal/kernel"
)

// PinProcess returns one thread-affinity change per thread of pid. Threads
// come and go while we look, so /proc/PID/task is listed until two listings
// agree (at most a few rounds); a thread that exits before its write is
// skipped at apply time, and one created after it inherits the affinity of
// the thread that created it — which is why Apply writes threads in order.
func PinProcess(fs *kernel.FS, pid int, name string, cpus cpuset.Set, reason string) ([]Change, error) {
	var tids []int
	for round := 0; round < 10; round++ {
		next, err := fs.Tasks(pid)
		if err != nil {
			return nil, fmt.Errorf("%s (pid %d): %w", name, pid, err)
		}
		if slices.Equal(tids, next) {
			break
		}
		tids = next
	}
	changes := make([]Change, 0, len(tids))
	for _, tid := range tids {
		changes = append(changes, Change{
			Kind:   KindThreadAffinity,
			Target: fmt.Sprintf("%s pid %d thread %d", name, pid, tid),
			TID:    tid,
			Value:  cpus.String(),
			Reason: reason,
		})
	}
	return changes, nil
}
