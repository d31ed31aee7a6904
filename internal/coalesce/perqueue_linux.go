//go:build linux

package coalesce

import (
	"fmt"

	"github.com/safchain/ethtool"
	"golang.org/x/sys/unix"

	"github.com/irqpilot/irqpilot/internal/kernel"
)

// PerQueueCoalesce reads the coalescing of the given queues of interface
// name with ETHTOOL_PERQUEUE/ETHTOOL_GCOALESCE (needs CAP_NET_ADMIN; drivers
// without get_per_queue_coalesce answer EOPNOTSUPP). It acts in the calling
// thread's network namespace.
func PerQueueCoalesce(name string, queues []int) ([]QueueCoalesce, error) {
	if len(name) >= unix.IFNAMSIZ {
		return nil, fmt.Errorf("interface name %q too long", name)
	}
	buf, err := PerQueueRequest(ethtool.ETHTOOL_GCOALESCE, queues)
	if err != nil {
		return nil, err
	}
	et, err := kernel.OpenEthtool()
	if err != nil {
		return nil, err
	}
	defer et.Close()
	if err := et.PerQueue(name, buf); err != nil {
		return nil, fmt.Errorf("ethtool --per-queue %s --show-coalesce: %w", name, err)
	}
	return ParsePerQueueCoalesce(buf)
}
