package coalesce

import (
	"encoding/binary"
	"fmt"
	"unsafe"

	"github.com/safchain/ethtool"

	"github.com/irqpilot/irqpilot/internal/host"
)

// Per-queue NIC coalescing (ethtool --per-queue … --show-coalesce). The
// request is struct ethtool_per_queue_op from <linux/ethtool.h>:
//
//	struct ethtool_per_queue_op {
//		__u32 cmd;                 // ETHTOOL_PERQUEUE (0x4b)
//		__u32 sub_command;         // ETHTOOL_GCOALESCE
//		__u32 queue_mask[128];     // DIV_ROUND_UP(MAX_NUM_QUEUE 4096, 32)
//		char  data[];              // one struct ethtool_coalesce per set bit
//	};
//
// The kernel fills data with one struct ethtool_coalesce per queue in the
// mask, in ascending queue order. safchain/ethtool has the coalesce struct
// but not the per-queue op, so the header is encoded here.
const (
	EthtoolPerQueue = 0x0000004b
	// MaxQueues is the kernel's MAX_NUM_QUEUE.
	MaxQueues       = 4096
	perQueueHdrSize = 8 + MaxQueues/32*4
	coalesceSize    = int(unsafe.Sizeof(ethtool.Coalesce{})) // 23 × __u32 = 92
)

// QueueCoalesce is one queue's coalescing.
type QueueCoalesce struct {
	Queue    int           `json:"queue"`
	Coalesce host.Coalesce `json:"coalesce"`
}

// PerQueueRequest encodes an ETHTOOL_PERQUEUE request with sub-command sub
// for the given queues (each 0…4095, no repeats), with room for one struct
// ethtool_coalesce per queue after the header.
func PerQueueRequest(sub uint32, queues []int) ([]byte, error) {
	if len(queues) == 0 {
		return nil, fmt.Errorf("per-queue request: no queues")
	}
	buf := make([]byte, perQueueHdrSize+len(queues)*coalesceSize)
	binary.NativeEndian.PutUint32(buf[0:], EthtoolPerQueue)
	binary.NativeEndian.PutUint32(buf[4:], sub)
	for _, q := range queues {
		if q < 0 || q >= MaxQueues {
			return nil, fmt.Errorf("per-queue request: queue %d out of range 0-%d", q, MaxQueues-1)
		}
		off := 8 + q/32*4
		w := binary.NativeEndian.Uint32(buf[off:])
		if w&(1<<(q%32)) != 0 {
			return nil, fmt.Errorf("per-queue request: queue %d given twice", q)
		}
		binary.NativeEndian.PutUint32(buf[off:], w|1<<(q%32))
	}
	return buf, nil
}

// ParsePerQueueCoalesce decodes the kernel's answer to a PerQueueRequest for
// ETHTOOL_GCOALESCE: the queues set in the header's mask, ascending, each
// with its struct ethtool_coalesce.
func ParsePerQueueCoalesce(buf []byte) ([]QueueCoalesce, error) {
	if len(buf) < perQueueHdrSize {
		return nil, fmt.Errorf("per-queue answer: %d bytes, want at least %d", len(buf), perQueueHdrSize)
	}
	if c := binary.NativeEndian.Uint32(buf); c != EthtoolPerQueue {
		return nil, fmt.Errorf("per-queue answer: cmd %#x, want ETHTOOL_PERQUEUE", c)
	}
	var out []QueueCoalesce
	data := buf[perQueueHdrSize:]
	for q := 0; q < MaxQueues; q++ {
		if binary.NativeEndian.Uint32(buf[8+q/32*4:])&(1<<(q%32)) == 0 {
			continue
		}
		if len(data) < coalesceSize {
			return nil, fmt.Errorf("per-queue answer: no room for queue %d", q)
		}
		var f [23]uint32
		for i := range f {
			f[i] = binary.NativeEndian.Uint32(data[i*4:])
		}
		data = data[coalesceSize:]
		// Field order of struct ethtool_coalesce (and ethtool.Coalesce).
		out = append(out, QueueCoalesce{Queue: q, Coalesce: host.Coalesce{
			RxUsecs: f[1], RxFrames: f[2], RxUsecsIRQ: f[3], RxFramesIRQ: f[4],
			TxUsecs: f[5], TxFrames: f[6], TxUsecsIRQ: f[7], TxFramesIRQ: f[8],
			AdaptiveRx: f[10] != 0, AdaptiveTx: f[11] != 0, RateSampleInt: f[22],
		}})
	}
	return out, nil
}
