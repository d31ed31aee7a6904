package netdev

import (
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mdlayher/genetlink"
	"github.com/mdlayher/netlink"
)

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
