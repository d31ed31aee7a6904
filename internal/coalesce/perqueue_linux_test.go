package coalesce

import (
	"encoding/binary"
	"errors"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"unsafe"

	"github.com/safchain/ethtool"
	"golang.org/x/sys/unix"

	"github.com/irqpilot/irqpilot/internal/host"
	"github.com/irqpilot/irqpilot/internal/livetest"
)

func TestPerQueueRequestEncoding(t *testing.T) {
	buf, err := PerQueueRequest(ethtool.ETHTOOL_GCOALESCE, []int{0, 31, 32, 100, 4095})
	if err != nil {
		t.Fatal(err)
	}
	// 8-byte header, 128 mask words, 5 × struct ethtool_coalesce (92 bytes).
	if coalesceSize != 92 || len(buf) != 8+512+5*92 {
		t.Fatalf("sizes: coalesce %d, request %d", coalesceSize, len(buf))
	}
	u := func(off int) uint32 { return binary.NativeEndian.Uint32(buf[off:]) }
	if u(0) != 0x4b || u(4) != 0x0e {
		t.Errorf("cmd %#x sub %#x, want 0x4b 0x0e", u(0), u(4))
	}
	want := map[int]uint32{0: 1 | 1<<31, 1: 1, 3: 1 << 4, 127: 1 << 31}
	for w := 0; w < 128; w++ {
		if got := u(8 + 4*w); got != want[w] {
			t.Errorf("queue_mask[%d] = %#x, want %#x", w, got, want[w])
		}
	}
	for _, bad := range []struct {
		q   []int
		msg string
	}{
		{nil, "no queues"},
		{[]int{-1}, "queue -1 out of range"},
		{[]int{4096}, "queue 4096 out of range 0-4095"},
		{[]int{3, 3}, "queue 3 given twice"},
	} {
		if _, err := PerQueueRequest(ethtool.ETHTOOL_GCOALESCE, bad.q); err == nil || !strings.Contains(err.Error(), bad.msg) {
			t.Errorf("PerQueueRequest(%v) = %v, want %q", bad.q, err, bad.msg)
		}
	}
}

// TestParsePerQueueCoalesce fills the data area the way the kernel does,
// with safchain/ethtool's struct (the same layout as struct
// ethtool_coalesce), and checks every decoded field lands where it should.
func TestParsePerQueueCoalesce(t *testing.T) {
	queues := []int{2, 40}
	buf, err := PerQueueRequest(ethtool.ETHTOOL_GCOALESCE, queues)
	if err != nil {
		t.Fatal(err)
	}
	for i := range queues {
		k := ethtool.Coalesce{
			Cmd: ethtool.ETHTOOL_GCOALESCE, RxCoalesceUsecs: uint32(10 + i), RxMaxCoalescedFrames: uint32(20 + i),
			RxCoalesceUsecsIrq: 3, RxMaxCoalescedFramesIrq: 4, TxCoalesceUsecs: uint32(50 + i),
			TxMaxCoalescedFrames: uint32(60 + i), TxCoalesceUsecsIrq: 7, TxMaxCoalescedFramesIrq: 8,
			StatsBlockCoalesceUsecs: 999, UseAdaptiveRxCoalesce: uint32(i), UseAdaptiveTxCoalesce: uint32(1 - i),
			PktRateLow: 999, RateSampleInterval: 22,
		}
		copy(buf[perQueueHdrSize+i*coalesceSize:], unsafe.Slice((*byte)(unsafe.Pointer(&k)), coalesceSize))
	}
	got, err := ParsePerQueueCoalesce(buf)
	if err != nil {
		t.Fatal(err)
	}
	want := []QueueCoalesce{
		{2, host.Coalesce{RxUsecs: 10, RxFrames: 20, RxUsecsIRQ: 3, RxFramesIRQ: 4, TxUsecs: 50, TxFrames: 60, TxUsecsIRQ: 7, TxFramesIRQ: 8, AdaptiveRx: false, AdaptiveTx: true, RateSampleInt: 22}},
		{40, host.Coalesce{RxUsecs: 11, RxFrames: 21, RxUsecsIRQ: 3, RxFramesIRQ: 4, TxUsecs: 51, TxFrames: 61, TxUsecsIRQ: 7, TxFramesIRQ: 8, AdaptiveRx: true, AdaptiveTx: false, RateSampleInt: 22}},
	}
	if len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("got %+v\nwant %+v", got, want)
	}
	if _, err := ParsePerQueueCoalesce(buf[:perQueueHdrSize+coalesceSize]); err == nil || !strings.Contains(err.Error(), "no room for queue 40") {
		t.Errorf("short answer: %v", err)
	}
	if _, err := ParsePerQueueCoalesce(buf[:100]); err == nil {
		t.Error("truncated header accepted")
	}
}

// TestLivePerQueueCoalesceEth0 reads queue 0 of eth0 (read only) and
// compares with `ethtool --per-queue eth0 queue_mask 0x1 --show-coalesce`;
// lo has no per-queue coalescing and must say so.
func TestLivePerQueueCoalesceEth0(t *testing.T) {
	livetest.NeedRoot(t, "ethtool") // ETHTOOL_PERQUEUE needs CAP_NET_ADMIN
	if _, err := PerQueueCoalesce("lo", []int{0}); !errors.Is(err, unix.EOPNOTSUPP) {
		t.Errorf("lo: %v, want EOPNOTSUPP", err)
	}
	if _, err := os.Stat("/sys/class/net/eth0"); err != nil {
		t.Skip("no eth0")
	}
	bin, err := exec.LookPath("ethtool")
	if err != nil {
		t.Skip("ethtool not installed")
	}
	out, err := exec.Command(bin, "--per-queue", "eth0", "queue_mask", "0x1", "--show-coalesce").CombinedOutput()
	if err != nil {
		t.Skipf("eth0's driver has no per-queue coalescing: %v: %s", err, out)
	}
	got, err := PerQueueCoalesce("eth0", []int{0})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Queue != 0 {
		t.Fatalf("got %+v", got)
	}
	c := got[0].Coalesce
	mine := map[string]string{
		"rx-usecs:": strconv.Itoa(int(c.RxUsecs)), "rx-frames:": strconv.Itoa(int(c.RxFrames)),
		"tx-usecs:": strconv.Itoa(int(c.TxUsecs)), "tx-frames:": strconv.Itoa(int(c.TxFrames)),
		"rx-usecs-irq:": strconv.Itoa(int(c.RxUsecsIRQ)), "tx-frames-irq:": strconv.Itoa(int(c.TxFramesIRQ)),
		"sample-interval:": strconv.Itoa(int(c.RateSampleInt)),
	}
	onoff := map[bool]string{true: "on", false: "off"}
	seen := 0
	for _, l := range strings.Split(string(out), "\n") {
		f := strings.Fields(l)
		if len(f) == 5 && f[0] == "Adaptive" {
			seen++
			if f[2] != onoff[c.AdaptiveRx] || f[4] != onoff[c.AdaptiveTx] {
				t.Errorf("adaptive rx %v tx %v, ethtool shows %q", c.AdaptiveRx, c.AdaptiveTx, l)
			}
		}
		if len(f) == 2 {
			if v, ok := mine[f[0]]; ok {
				seen++
				if v != f[1] {
					t.Errorf("%s %s, ethtool shows %s", f[0], v, f[1])
				}
			}
		}
	}
	if seen != len(mine)+1 {
		t.Errorf("compared %d fields of\n%s", seen, out)
	}
}
