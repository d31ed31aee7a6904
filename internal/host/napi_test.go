package host

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mdlayher/genetlink"

	"github.com/irqpilot/irqpilot/internal/kernel"
	"github.com/irqpilot/irqpilot/internal/kernel/netdev"
)

// recordedNAPIs decodes the netdev answers recorded on 6.18 for veth vA
// (ifindex 3, 4 queues, GRO on) by the netdev package.
func recordedNAPIs(t *testing.T, file string) []netdev.NAPI {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "kernel", "netdev", "testdata", file))
	if err != nil {
		t.Fatal(err)
	}
	var out []netdev.NAPI
	for _, line := range strings.Fields(string(b)) {
		raw, _ := hex.DecodeString(line)
		var m genetlink.Message
		if err := m.UnmarshalBinary(raw); err != nil {
			t.Fatal(err)
		}
		n, err := netdev.DecodeNAPI(m.Data)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, n)
	}
	return out
}

func TestApplyNAPIRecorded(t *testing.T) {
	napis := recordedNAPIs(t, "napi-dump-veth.hex")
	threaded := recordedNAPIs(t, "napi-get-set.hex")[0] // id 277, threaded, pid 7218
	for i := range napis {
		if napis[i].ID == threaded.ID {
			napis[i] = threaded
		}
	}
	// A NIC with linked queues: the id and queues of a hardware NIC (as
	// virtio_net reports them), and one hardware NIC without NAPI.
	irq := 38
	hw := netdev.NAPI{ID: 257, Ifindex: 2, IRQ: &irq}
	rx0, napi257 := uint32(0), uint32(257)
	facts := NAPIFacts{
		Ifindex: map[string]int{"vA": 3, "eth0": 2, "eth1": 4},
		NAPIs:   append(napis, hw, netdev.NAPI{ID: 9, Ifindex: 99}),
		Queues:  []netdev.Queue{{ID: rx0, Ifindex: 2, Type: "rx", NAPIID: &napi257}, {ID: 0, Ifindex: 2, Type: "tx", NAPIID: &napi257}, {ID: 1, Ifindex: 3, Type: "rx"}},
		CPUs:    map[int]string{7218: "0-1"},
	}
	h := &Host{NICs: []NIC{{Name: "eth0"}, {Name: "eth1"}, {Name: "vA", Virtual: true}}}
	applyNAPI(kernel.New(t.TempDir()), h, facts)
	if len(h.NAPI) != 5 {
		t.Fatalf("%d NAPI, want 5 (device 99 is not in the model): %+v", len(h.NAPI), h.NAPI)
	}
	e := h.NAPIsOf("eth0")
	if len(e) != 1 || e[0].ID != 257 || *e[0].IRQ != 38 || fmt.Sprint(e[0].Queues.RX, e[0].Queues.TX) != "[0] [0]" {
		t.Errorf("eth0 napi %+v", e)
	}
	va := h.NAPIsOf("vA")
	if len(va) != 4 || va[0].ID != 274 || va[3].ID != 277 {
		t.Fatalf("vA napi %+v", va)
	}
	if n := va[3]; n.PID == nil || *n.PID != 7218 || n.CPUs == nil || n.CPUs.String() != "0-1" || !*n.Threaded ||
		*n.DeferHardIRQs != 2 || *n.GROFlushTimeout != 20000 || *n.IRQSuspendTimeout != 2000000 {
		t.Errorf("napi 277 %+v", n)
	}
	if n := va[0]; n.PID != nil || n.CPUs != nil || *n.Threaded || len(n.Queues.RX) != 0 {
		t.Errorf("napi 274 %+v", n)
	}
	var un []string
	for _, u := range h.Unavailable {
		un = append(un, u.What+": "+u.Reason)
	}
	if len(un) != 1 || !strings.HasPrefix(un[0], "nic eth1 napi: unsupported") {
		t.Errorf("unavailable %q", un)
	}
	// The JSON names of the documented interface.
	b, _ := json.Marshal(va[3])
	for _, f := range []string{`"id":277`, `"device":"vA"`, `"queues":{"rx":[],"tx":[]}`, `"irq":null`, `"pid":7218`, `"cpus":"0-1"`,
		`"threaded":true`, `"defer_hard_irqs":2`, `"gro_flush_timeout":20000`, `"irq_suspend_timeout":2000000`} {
		if !bytes.Contains(b, []byte(f)) {
			t.Errorf("JSON %s lacks %s", b, f)
		}
	}
}

// A kernel without the netdev family: one "unsupported" entry, no error.
func TestApplyNAPIUnsupportedKernel(t *testing.T) {
	h := &Host{NICs: []NIC{{Name: "eth0"}}}
	applyNAPI(kernel.New(t.TempDir()), h, NAPIFacts{Error: `generic netlink family "netdev" (kernel 6.9 or later): not supported`, Unsup: true})
	if len(h.NAPI) != 0 || len(h.Unavailable) != 1 || h.Unavailable[0].What != "napi" || !strings.HasPrefix(h.Unavailable[0].Reason, "unsupported: ") {
		t.Errorf("%+v %+v", h.NAPI, h.Unavailable)
	}
}

// Captures from before NAPI facts were recorded: no NAPI, "unsupported".
func TestNAPIOlderCapture(t *testing.T) {
	kfs, cleanup, err := kernel.OpenSnapshot(filepath.Join("..", "..", "testdata", "snapshots", "veth4.tar.gz"))
	if err != nil {
		t.Fatal(err)
	}
	defer cleanup()
	h, err := Read(kfs, Options{})
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, u := range h.Unavailable {
		if u.What == "napi" && strings.HasPrefix(u.Reason, "unsupported") {
			found = true
		}
	}
	if len(h.NAPI) != 0 || !found {
		t.Errorf("napi %+v unavailable %+v", h.NAPI, h.Unavailable)
	}
}

const napiChildEnv = "IRQPILOT_TEST_NAPI_CHILD"

// TestNAPIChild runs inside the namespace of TestLiveNAPIInventory: it reads
// the host model and asks netlink directly, and prints both.
func TestNAPIChild(t *testing.T) {
	if os.Getenv(napiChildEnv) == "" {
		t.Skip("run by TestLiveNAPIInventory")
	}
	kfs := kernel.New("/")
	kfs.StartRecording()
	h, err := Read(kfs, Options{})
	if err != nil {
		t.Fatal(err)
	}
	c, err := netdev.Open()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	direct, err := c.NAPIs(0)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(map[string]any{"model": h.NAPI, "netlink": direct, "saved": string(kfs.Synthetics()[napiFile])})
	fmt.Printf("\nIRQPILOT-JSON %s\n", b)
}

// TestLiveNAPIInventory: a veth pair with 4 queues and GRO on, in a
// namespace made here; the model lists exactly the NAPI ids netlink
// reports, with their values, and saves them for a capture.
func TestLiveNAPIInventory(t *testing.T) {
	ns := makeVethNamespace(t)
	for _, l := range []string{"vA", "vB"} {
		devRun(t, "ip", "netns", "exec", ns, "ethtool", "-K", l, "gro", "on")
	}
	devRun(t, "ip", "netns", "exec", ns, "sh", "-c", "echo 1 > /sys/class/net/vB/threaded")
	js := childResult(t, ns, "TestNAPIChild", napiChildEnv)
	var got struct {
		Model   []NAPI        `json:"model"`
		Netlink []netdev.NAPI `json:"netlink"`
		Saved   string        `json:"saved"`
	}
	if err := json.Unmarshal(js, &got); err != nil {
		t.Fatal(err)
	}
	if len(got.Model) != 8 || len(got.Netlink) != 8 {
		t.Fatalf("model %d NAPI, netlink %d, want 8 (4 per veth end)", len(got.Model), len(got.Netlink))
	}
	byID := map[uint32]netdev.NAPI{}
	for _, n := range got.Netlink {
		byID[n.ID] = n
	}
	perDev := map[string]int{}
	for _, m := range got.Model {
		n, ok := byID[m.ID]
		if !ok {
			t.Errorf("model napi %d not in netlink answers", m.ID)
			continue
		}
		perDev[m.Device]++
		if *m.Threaded != *n.Threaded || *m.DeferHardIRQs != *n.DeferHardIRQs || *m.GROFlushTimeout != *n.GROFlushTimeout {
			t.Errorf("napi %d: model %+v, netlink %+v", m.ID, m, n)
		}
		if m.Device == "vB" && (m.PID == nil || m.CPUs == nil || !*m.Threaded) {
			t.Errorf("threaded vB napi %d: pid %v cpus %v", m.ID, m.PID, m.CPUs)
		}
		if m.Device == "vA" && (m.PID != nil || *m.Threaded) {
			t.Errorf("vA napi %d threaded", m.ID)
		}
	}
	if perDev["vA"] != 4 || perDev["vB"] != 4 {
		t.Errorf("per device %v", perDev)
	}
	var saved NAPIFacts
	if err := json.Unmarshal([]byte(got.Saved), &saved); err != nil || len(saved.NAPIs) != 8 || len(saved.CPUs) != 4 {
		t.Errorf("saved for capture: %v %+v", err, saved)
	}
}
