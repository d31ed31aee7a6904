package kernel

import (
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// readEthtoolS parses the output of ethtool -S.
func readEthtoolS(t *testing.T, file string) map[string]uint64 {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]uint64{}
	for _, l := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(l), ": ")
		if !ok {
			continue
		}
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("%s: %q: %v", file, l, err)
		}
		out[k] = n
	}
	return out
}

// A lab guest's two-queue virtio-net under memcached load (ethtool -S
// eth0, testdata/ethtool-stats/virtio_net.txt): each queue's rx and tx
// packets, nothing else (bytes, drops, kicks and the XDP counters are
// not packets of the queue).
func TestQueuePacketsVirtio(t *testing.T) {
	got := queuePackets(readEthtoolS(t, "testdata/ethtool-stats/virtio_net.txt"))
	want := QueuePackets{Rx: map[int]uint64{0: 583724, 1: 846051}, Tx: map[int]uint64{0: 583717, 1: 846690}}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("virtio_net (-want +got):\n%s", d)
	}
}

// The other drivers' forms of the per-queue counters' names, and names
// that look like them but count something else.
func TestQueueStatNames(t *testing.T) {
	for name, want := range map[string]struct {
		dir string
		q   int
	}{
		"rx_queue_3_packets":  {"rx", 3}, // virtio_net, ixgbe, igb, ice
		"tx_queue_12_packets": {"tx", 12},
		"rx7_packets":         {"rx", 7}, // mlx5
		"rx-2.packets":        {"rx", 2}, // i40e
		"queue_5_rx_cnt":      {"rx", 5}, // ena
		"queue_5_tx_cnt":      {"tx", 5},
	} {
		d, q, ok := queueStat(name)
		if !ok || d != want.dir || q != want.q {
			t.Errorf("%s: %s %d %v, want %s %d", name, d, q, ok, want.dir, want.q)
		}
	}
	for _, name := range []string{"rx_packets", "rx_queue_0_bytes", "rx_queue_0_xdp_packets", "rx_queue_0_drops", "tx_queue_1_kicks", "rx_vport_unicast_packets", "peer_ifindex"} {
		if d, q, ok := queueStat(name); ok {
			t.Errorf("%s read as queue %d's %s packets", name, q, d)
		}
	}
}
