package kernel

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"unsafe"

	"github.com/safchain/ethtool"
	"golang.org/x/sys/unix"
)

// QueuePacketsFile is the synthetic file in a capture (and in a captured
// sample directory) that holds NetQueuePackets' answer.
const QueuePacketsFile = "queue-packets.json"

// QueuePackets is one network device's packet counters per queue, from its
// driver's statistics (ethtool -S): how the device's traffic divides over
// its queues. Interrupt counts do not say it: NAPI polls a busy queue
// longer between interrupts, so a queue carrying twice the packets of
// another was seen taking half its interrupts.
type QueuePackets struct {
	Rx map[int]uint64 `json:"rx,omitempty"`
	Tx map[int]uint64 `json:"tx,omitempty"`
}

// NetQueuePackets reads the per-queue packet counters of every network
// device of this network namespace that has a device behind it (not a
// virtual one) and more than one rx queue, where its driver names them in
// a form queueStat knows. Devices whose driver gives none are left out.
// On the live machine it asks the drivers (ETHTOOL_GSTATS); below any other
// root it reads the capture's synthetic QueuePacketsFile (absent: an error
// satisfying errors.Is(err, fs.ErrNotExist)).
func (f *FS) NetQueuePackets() (map[string]QueuePackets, error) {
	if !f.IsLive() {
		b, err := f.ReadSynthetic(QueuePacketsFile)
		if err != nil {
			return nil, err
		}
		out := map[string]QueuePackets{}
		if err := json.Unmarshal(b, &out); err != nil {
			return nil, fmt.Errorf("%s: %w", QueuePacketsFile, err)
		}
		return out, nil
	}
	devs, err := f.readDir("sys/class/net")
	if err != nil {
		return nil, err
	}
	var multi []string
	for _, d := range devs {
		if !f.Exists("sys/class/net/" + d + "/device") {
			continue
		}
		qs, err := f.readDir("sys/class/net/" + d + "/queues")
		if err != nil {
			continue
		}
		rx := 0
		for _, q := range qs {
			if strings.HasPrefix(q, "rx-") {
				rx++
			}
		}
		if rx > 1 {
			multi = append(multi, d)
		}
	}
	out := map[string]QueuePackets{}
	if len(multi) > 0 {
		et, err := OpenEthtool()
		if err != nil {
			return nil, err
		}
		defer et.Close()
		for _, d := range multi {
			st, err := et.Stats(d)
			if err != nil {
				continue // the driver has no statistics: the device is left out
			}
			if qp := queuePackets(st); len(qp.Rx) > 0 {
				out[d] = qp
			}
		}
	}
	if b, err := json.Marshal(out); err == nil {
		f.SaveSynthetic(QueuePacketsFile, b)
	}
	return out, nil
}

// The per-queue packet counters' names, as drivers print them: virtio_net
// before 6.10, ixgbe, igb, ice ("rx_queue_0_packets"); mlx5, and
// virtio_net from 6.10 ("rx0_packets"); i40e ("rx-0.packets"); ena
// ("queue_0_rx_cnt").
var reQueueStat = []*regexp.Regexp{
	regexp.MustCompile(`^(rx|tx)_queue_(\d+)_packets$`),
	regexp.MustCompile(`^(rx|tx)(\d+)_packets$`),
	regexp.MustCompile(`^(rx|tx)-(\d+)\.packets$`),
	regexp.MustCompile(`^queue_(\d+)_(rx|tx)_cnt$`),
}

// queuePackets picks the per-queue packet counters out of a driver's
// statistics.
func queuePackets(stats map[string]uint64) QueuePackets {
	qp := QueuePackets{Rx: map[int]uint64{}, Tx: map[int]uint64{}}
	for name, v := range stats {
		dir, q, ok := queueStat(name)
		if !ok {
			continue
		}
		if dir == "rx" {
			qp.Rx[q] = v
		} else {
			qp.Tx[q] = v
		}
	}
	if len(qp.Tx) == 0 {
		qp.Tx = nil
	}
	return qp
}

// queueStat parses a per-queue packet counter's name: its direction and queue.
func queueStat(name string) (dir string, queue int, ok bool) {
	for i, re := range reQueueStat {
		m := re.FindStringSubmatch(name)
		if m == nil {
			continue
		}
		d, n := m[1], m[2]
		if i == 3 { // queue_N_rx_cnt: the number comes first
			d, n = m[2], m[1]
		}
		q, err := strconv.Atoi(n)
		if err != nil {
			return "", 0, false
		}
		return d, q, true
	}
	return "", 0, false
}

// ethtool_gstrings and ethtool_stats headers: the command, then (for
// strings) the string set, then the count; the data follows.
const (
	ethtoolGStringsHeader = 12
	ethtoolGStatsHeader   = 8
)

// Stats returns interface name's driver statistics by name (ETHTOOL_GSTATS
// with the names of ETHTOOL_GSTRINGS, ethtool -S). safchain/ethtool has
// Stats too, but builds its requests on the stack (see Ethtool); here
// every buffer is a heap slice.
func (e *Ethtool) Stats(name string) (map[string]uint64, error) {
	info, err := unix.IoctlGetEthtoolDrvinfo(e.fd, name)
	if err != nil {
		return nil, err
	}
	n := int(info.N_stats)
	if n == 0 {
		return nil, unix.EOPNOTSUPP
	}
	if n > 1<<16 {
		return nil, fmt.Errorf("%s: the driver reports %d statistics", name, n)
	}
	// The kernel writes as many entries as the driver counts at the time
	// of each call, not as many as asked for: a count that grew since
	// GDRVINFO (channels added meanwhile) would write past a buffer sized
	// exactly. Room for twice the count, and at least 256 more, bounds
	// that; counts that differ between the calls are refused, since names
	// and values would no longer pair.
	room := max(2*n, n+256)
	strs := make([]byte, ethtoolGStringsHeader+room*ethtool.ETH_GSTRING_LEN)
	*(*uint32)(unsafe.Pointer(&strs[0])) = ethtool.ETHTOOL_GSTRINGS
	*(*uint32)(unsafe.Pointer(&strs[4])) = ethtool.ETH_SS_STATS
	*(*uint32)(unsafe.Pointer(&strs[8])) = uint32(n)
	if err := e.ioctl(name, unsafe.Pointer(&strs[0])); err != nil {
		return nil, err
	}
	vals := make([]uint64, 1+room) // the header (cmd, n_stats) is one u64 wide
	hdr := (*[2]uint32)(unsafe.Pointer(&vals[0]))
	hdr[0], hdr[1] = ethtool.ETHTOOL_GSTATS, uint32(n)
	if err := e.ioctl(name, unsafe.Pointer(&vals[0])); err != nil {
		return nil, err
	}
	nStrs, nVals := int(*(*uint32)(unsafe.Pointer(&strs[8]))), int(hdr[1])
	if nStrs != n || nVals != n {
		return nil, fmt.Errorf("%s: the driver's statistics changed while read (%d, %d names, %d values)", name, n, nStrs, nVals)
	}
	got := n
	out := make(map[string]uint64, got)
	for i := 0; i < got; i++ {
		s := strs[ethtoolGStringsHeader+i*ethtool.ETH_GSTRING_LEN : ethtoolGStringsHeader+(i+1)*ethtool.ETH_GSTRING_LEN]
		out[unix.ByteSliceToString(s)] = vals[1+i]
	}
	return out, nil
}
