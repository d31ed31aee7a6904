package netdev

import (
	"bytes"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mdlayher/genetlink"
	"github.com/mdlayher/netlink"
)

// recorded reads a testdata file written by TestRecordNetdev: answers of a
// 6.18 kernel for veth vA (4 queues, GRO on) in a scratch namespace.
func recorded(t *testing.T, name string) []genetlink.Message {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	var out []genetlink.Message
	for _, line := range strings.Fields(string(b)) {
		raw, err := hex.DecodeString(line)
		if err != nil {
			t.Fatal(err)
		}
		var m genetlink.Message
		if err := m.UnmarshalBinary(raw); err != nil {
			t.Fatal(err)
		}
		out = append(out, m)
	}
	return out
}

func TestDecodeNAPIDumpVeth(t *testing.T) {
	msgs := recorded(t, "napi-dump-veth.hex")
	if len(msgs) != 4 {
		t.Fatalf("%d answers, want 4 (one NAPI per veth rx queue)", len(msgs))
	}
	ids := map[uint32]bool{}
	for _, m := range msgs {
		if m.Header.Command != CmdNAPIGet {
			t.Errorf("command %d, want napi-get", m.Header.Command)
		}
		n, err := DecodeNAPI(m.Data)
		if err != nil {
			t.Fatal(err)
		}
		ids[n.ID] = true
		// veth: no IRQ, not threaded (no kthread), every value at its default.
		if n.Ifindex != 3 || n.IRQ != nil || n.PID != nil {
			t.Errorf("napi %d: ifindex %d irq %v pid %v", n.ID, n.Ifindex, n.IRQ, n.PID)
		}
		if n.DeferHardIRQs == nil || *n.DeferHardIRQs != 0 || n.GROFlushTimeout == nil || *n.GROFlushTimeout != 0 ||
			n.IRQSuspendTimeout == nil || *n.IRQSuspendTimeout != 0 || n.Threaded == nil || *n.Threaded {
			t.Errorf("napi %d: %+v", n.ID, n)
		}
	}
	for _, id := range []uint32{274, 275, 276, 277} {
		if !ids[id] {
			t.Errorf("napi %d missing from %v", id, ids)
		}
	}
}

func TestDecodeNAPIAfterSet(t *testing.T) {
	msgs := recorded(t, "napi-get-set.hex")
	if len(msgs) != 1 {
		t.Fatalf("%d answers", len(msgs))
	}
	n, err := DecodeNAPI(msgs[0].Data)
	if err != nil {
		t.Fatal(err)
	}
	if n.ID != 277 || n.Threaded == nil || !*n.Threaded || n.PID == nil || *n.PID != 7218 ||
		*n.DeferHardIRQs != 2 || *n.GROFlushTimeout != 20000 || *n.IRQSuspendTimeout != 2000000 {
		t.Errorf("after napi-set: %+v pid %v", n, n.PID)
	}
}

func TestDecodeQueueDumpVeth(t *testing.T) {
	msgs := recorded(t, "queue-dump-veth.hex")
	var rx, tx int
	for _, m := range msgs {
		q, err := DecodeQueue(m.Data)
		if err != nil {
			t.Fatal(err)
		}
		if q.Ifindex != 3 {
			t.Errorf("queue %+v", q)
		}
		switch q.Type {
		case "rx":
			rx++
		case "tx":
			tx++
		}
		// veth does not link its queues to NAPI instances.
		if q.NAPIID != nil {
			t.Errorf("queue %s-%d napi %d", q.Type, q.ID, *q.NAPIID)
		}
	}
	if rx != 4 || tx != 4 {
		t.Errorf("%d rx, %d tx queues, want 4 and 4", rx, tx)
	}
}

func TestDecodeUintWidths(t *testing.T) {
	ae := netlink.NewAttributeEncoder()
	ae.Uint32(AttrNAPIID, 9)
	ae.Uint32(AttrNAPIGROFlushTimeout, 50000)   // 4-byte uint
	ae.Uint64(AttrNAPIIRQSuspendTimeout, 1<<40) // 8-byte uint
	ae.Uint32(AttrNAPIIRQ, 38)
	ae.Uint32(99, 1) // an attribute of a newer kernel: ignored
	b, _ := ae.Encode()
	n, err := DecodeNAPI(b)
	if err != nil {
		t.Fatal(err)
	}
	if n.ID != 9 || *n.GROFlushTimeout != 50000 || *n.IRQSuspendTimeout != 1<<40 || *n.IRQ != 38 || n.Threaded != nil || n.DeferHardIRQs != nil {
		t.Errorf("%+v", n)
	}
	ae = netlink.NewAttributeEncoder()
	ae.Uint32(AttrNAPIID, 9)
	ae.Uint16(AttrNAPIGROFlushTimeout, 5)
	b, _ = ae.Encode()
	if _, err := DecodeNAPI(b); err == nil {
		t.Error("a 2-byte uint decoded")
	}
	ae = netlink.NewAttributeEncoder()
	ae.Uint32(AttrNAPIIfindex, 3)
	b, _ = ae.Encode()
	if _, err := DecodeNAPI(b); err == nil {
		t.Error("an answer without an id decoded")
	}
}

// TestEncodeNAPISet checks the request bytes against the layout of
// netdev.yaml: id u32 first, then only the attributes given.
func TestEncodeNAPISet(t *testing.T) {
	on, d, g, s := true, uint32(2), uint64(20000), uint64(2000000)
	b, err := EncodeNAPISet(NAPISet{ID: 277, Threaded: &on, DeferHardIRQs: &d, GROFlushTimeout: &g, IRQSuspendTimeout: &s})
	if err != nil {
		t.Fatal(err)
	}
	want, _ := hex.DecodeString("08000200" + "15010000" + // id 277
		"08000500" + "02000000" + // defer-hard-irqs 2
		"0c000600" + "204e000000000000" + // gro-flush-timeout 20000 (8-byte uint)
		"0c000700" + "80841e0000000000" + // irq-suspend-timeout 2000000
		"08000800" + "01000000") // threaded enabled
	if !bytes.Equal(b, want) {
		t.Errorf("napi-set\n got %x\nwant %x", b, want)
	}
	// Decoding the request as an answer gives back the values.
	n, err := DecodeNAPI(b)
	if err != nil || n.ID != 277 || *n.DeferHardIRQs != 2 || *n.GROFlushTimeout != 20000 || *n.IRQSuspendTimeout != 2000000 || !*n.Threaded {
		t.Errorf("round trip %+v %v", n, err)
	}
	b, _ = EncodeNAPISet(NAPISet{ID: 5})
	if want, _ := hex.DecodeString("0800020005000000"); !bytes.Equal(b, want) {
		t.Errorf("id only: %x", b)
	}
	big := uint32(1 << 31)
	if _, err := EncodeNAPISet(NAPISet{ID: 5, DeferHardIRQs: &big}); err == nil || !strings.Contains(err.Error(), "limit") {
		t.Errorf("defer-hard-irqs 2^31: %v", err)
	}
	f, _ := EncodeIfindexFilter(AttrQueueIfindex, 3)
	if want, _ := hex.DecodeString("0800020003000000"); !bytes.Equal(f, want) {
		t.Errorf("queue filter %x", f)
	}
	if f, _ := EncodeIfindexFilter(AttrNAPIIfindex, 0); f != nil {
		t.Errorf("no filter: %x", f)
	}
}

// recordEnv names the testdata file a recording run writes; see
// TestRecordNetdev.
const recordEnv = "IRQPILOT_RECORD_NETDEV"

// TestRecordNetdev records real answers of this kernel into testdata, one
// generic-netlink message (genl header + attributes) in hex per line. Run it
// as root inside a scratch namespace holding veth vA (4 queues, GRO on):
//
//	IRQPILOT_RECORD_NETDEV=1 ip netns exec NS go test -run TestRecordNetdev ./internal/kernel/netdev
func TestRecordNetdev(t *testing.T) {
	if os.Getenv(recordEnv) == "" {
		t.Skip("records testdata; set " + recordEnv + "=1")
	}
	c, err := Open()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var got []genetlink.Message
	c.trace = func(_ genetlink.Message, _ netlink.HeaderFlags, answers []genetlink.Message, _ error) { got = answers }
	save := func(name string) {
		var b strings.Builder
		for _, m := range got {
			raw, err := m.MarshalBinary()
			if err != nil {
				t.Fatal(err)
			}
			b.WriteString(hex.EncodeToString(raw) + "\n")
		}
		if err := os.WriteFile(filepath.Join("testdata", name), []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ifindex := ifindexOf(t, "vA")
	napis, err := c.NAPIs(ifindex)
	if err != nil || len(napis) == 0 {
		t.Fatalf("napi dump of vA: %v %v", napis, err)
	}
	save("napi-dump-veth.hex")
	if _, err := c.Queues(ifindex); err != nil {
		t.Fatal(err)
	}
	save("queue-dump-veth.hex")
	on, d, g, s := true, uint32(2), uint64(20000), uint64(2000000)
	id := napis[0].ID
	if err := c.SetNAPI(NAPISet{ID: id, Threaded: &on, DeferHardIRQs: &d, GROFlushTimeout: &g, IRQSuspendTimeout: &s}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.NAPI(id); err != nil {
		t.Fatal(err)
	}
	save("napi-get-set.hex")
	off, z, zz := false, uint32(0), uint64(0)
	if err := c.SetNAPI(NAPISet{ID: id, Threaded: &off, DeferHardIRQs: &z, GROFlushTimeout: &zz, IRQSuspendTimeout: &zz}); err != nil {
		t.Fatal(err)
	}
}

func ifindexOf(t *testing.T, dev string) int {
	t.Helper()
	b, err := os.ReadFile("/sys/class/net/" + dev + "/ifindex")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, ch := range strings.TrimSpace(string(b)) {
		n = n*10 + int(ch-'0')
	}
	return n
}
