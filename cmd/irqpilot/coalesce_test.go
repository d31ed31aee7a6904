package main

import (
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/irqpilot/irqpilot/internal/host"
	"github.com/irqpilot/irqpilot/internal/livetest"
)

// coalesceShowJSON runs `irqpilot ARGS coalesce show --json` and returns the
// NICs both decoded and as raw maps (to check the field names).
func coalesceShowJSON(t *testing.T, args ...string) ([]coalesceShowNIC, []map[string]any) {
	t.Helper()
	out := invRun(t, append(args, "coalesce", "show", "--json")...)
	var typed struct {
		NICs []coalesceShowNIC `json:"nics"`
	}
	var raw struct {
		NICs []map[string]any `json:"nics"`
	}
	if err := json.Unmarshal(out, &typed); err != nil {
		t.Fatalf("coalesce show --json: %v\n%.500s", err, out)
	}
	if err := json.Unmarshal(out, &raw); err != nil || len(raw.NICs) != len(typed.NICs) {
		t.Fatalf("coalesce show --json: %v", err)
	}
	return typed.NICs, raw.NICs
}

func keysOf(m map[string]any) []string {
	var k []string
	for key := range m {
		k = append(k, key)
	}
	sort.Strings(k)
	return k
}

// The documented JSON names (docs/coalescing.md).
var coalesceJSONKeys = []string{"adaptive_rx", "adaptive_tx", "rate_sample_interval", "rx_frames", "rx_frames_irq", "rx_usecs", "rx_usecs_irq", "tx_frames", "tx_frames_irq", "tx_usecs", "tx_usecs_irq"}

// ethtoolC parses `ethtool -c dev` (n/a: the driver does not support the
// field; the ioctl reports 0 for it).
func ethtoolC(t *testing.T, dev string) host.Coalesce {
	t.Helper()
	out := livetest.Ethtool(t, "-c", dev)
	var c host.Coalesce
	seen := 0
	num := func(s string) uint32 {
		if s == "n/a" {
			return 0
		}
		n, err := strconv.ParseUint(s, 10, 32)
		if err != nil {
			t.Fatalf("ethtool -c %s: %q", dev, s)
		}
		return uint32(n)
	}
	for _, l := range strings.Split(out, "\n") {
		f := strings.Fields(l)
		if len(f) == 5 && f[0] == "Adaptive" && f[1] == "RX:" && f[3] == "TX:" {
			c.AdaptiveRx, c.AdaptiveTx = f[2] == "on", f[4] == "on"
			seen++
		}
		if len(f) != 2 {
			continue
		}
		dst := map[string]*uint32{"rx-usecs:": &c.RxUsecs, "rx-frames:": &c.RxFrames, "tx-usecs:": &c.TxUsecs, "tx-frames:": &c.TxFrames}[f[0]]
		if dst != nil {
			*dst = num(f[1])
			seen++
		}
	}
	if seen != 5 {
		t.Fatalf("ethtool -c %s: parsed %d of 5 lines:\n%s", dev, seen, out)
	}
	return c
}

func findShowNIC(t *testing.T, nics []coalesceShowNIC, name string) (int, coalesceShowNIC) {
	t.Helper()
	for i, n := range nics {
		if n.Name == name {
			return i, n
		}
	}
	t.Fatalf("no NIC %s in %+v", name, nics)
	return 0, coalesceShowNIC{}
}

// TestCoalesceShowLiveEth0 compares this machine's eth0 with ethtool -c.
// Read only.
func TestCoalesceShowLiveEth0(t *testing.T) {
	if _, err := os.Stat("/sys/class/net/eth0"); err != nil {
		t.Skip("no eth0")
	}
	want := ethtoolC(t, "eth0")
	nics, raw := coalesceShowJSON(t)
	i, n := findShowNIC(t, nics, "eth0")
	if n.Coalesce == nil {
		t.Fatalf("eth0: no coalescing (%s), ethtool -c shows %+v", n.CoalesceUnavailable, want)
	}
	got := *n.Coalesce
	if got.RxUsecs != want.RxUsecs || got.RxFrames != want.RxFrames || got.TxUsecs != want.TxUsecs ||
		got.TxFrames != want.TxFrames || got.AdaptiveRx != want.AdaptiveRx || got.AdaptiveTx != want.AdaptiveTx {
		t.Errorf("eth0 coalesce %+v, ethtool -c shows %+v", got, want)
	}
	if d := cmp.Diff([]string{"channels", "coalesce", "driver", "name"}, keysOf(raw[i])); d != "" {
		t.Errorf("eth0 JSON keys (-want +got):\n%s", d)
	}
	if d := cmp.Diff(coalesceJSONKeys, keysOf(raw[i]["coalesce"].(map[string]any))); d != "" {
		t.Errorf("coalesce JSON keys (-documented +got):\n%s", d)
	}
	// The text table shows the same numbers in eth0's row.
	text := string(invRun(t, "coalesce", "show"))
	wantRow := []string{"eth0", n.Driver, strconv.Itoa(int(want.RxUsecs)), strconv.Itoa(int(want.RxFrames)),
		strconv.Itoa(int(want.TxUsecs)), strconv.Itoa(int(want.TxFrames)), onOff(want.AdaptiveRx), onOff(want.AdaptiveTx)}
	found := false
	for _, l := range strings.Split(text, "\n") {
		if f := strings.Fields(l); len(f) >= 8 && cmp.Equal(f[:8], wantRow) {
			found = true
		}
	}
	if !found {
		t.Errorf("no row %v in\n%s", wantRow, text)
	}
}

// TestCoalesceShowPerQueueLive reads each queue of eth0 (root: the
// per-queue ioctl needs CAP_NET_ADMIN) and checks that a NIC without
// coalescing is reported, not fatal.
func TestCoalesceShowPerQueueLive(t *testing.T) {
	livetest.NeedRoot(t)
	if _, err := os.Stat("/sys/class/net/eth0"); err != nil {
		t.Skip("no eth0")
	}
	out := invRun(t, "coalesce", "show", "--per-queue", "--json")
	var got struct {
		NICs []coalesceShowNIC `json:"nics"`
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatal(err)
	}
	_, n := findShowNIC(t, got.NICs, "eth0")
	entries, _ := os.ReadDir("/sys/class/net/eth0/queues")
	nq := 0
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), "rx-") {
			nq++
		}
	}
	if n.QueuesUnavailable != "" {
		if !strings.Contains(n.QueuesUnavailable, "not supported") {
			t.Fatalf("eth0 per-queue: %s", n.QueuesUnavailable)
		}
		t.Skipf("eth0's driver has no per-queue coalescing: %s", n.QueuesUnavailable)
	}
	if len(n.Queues) != nq {
		t.Fatalf("eth0: %d queues read, sysfs has %d rx queues", len(n.Queues), nq)
	}
	for i, q := range n.Queues {
		if q.Queue != i {
			t.Errorf("queue %d reported as %d", i, q.Queue)
		}
	}
	// With one queue pair, the queue's setting is the device's.
	if nq == 1 && (n.Queues[0].Coalesce.RxFrames != n.Coalesce.RxFrames || n.Queues[0].Coalesce.TxFrames != n.Coalesce.TxFrames) {
		t.Errorf("queue 0 %+v, device %+v", n.Queues[0].Coalesce, *n.Coalesce)
	}
	text := string(invRun(t, "coalesce", "show", "--per-queue"))
	if !strings.Contains(text, "  queue 0 ") {
		t.Errorf("no queue rows:\n%s", text)
	}
}

// snapshotEthtool reads irqpilot/ethtool.json from a committed snapshot,
// independently of the kernel package.
func snapshotEthtool(t *testing.T, file string) map[string]host.EthtoolFacts {
	t.Helper()
	tr := openTarGz(t, file)
	for {
		h, err := tr.Next()
		if err != nil {
			t.Fatalf("%s: no irqpilot/ethtool.json: %v", file, err)
		}
		if strings.TrimPrefix(h.Name, "./") == "irqpilot/ethtool.json" {
			b, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			var m map[string]host.EthtoolFacts
			if err := json.Unmarshal(b, &m); err != nil {
				t.Fatal(err)
			}
			return m
		}
	}
}

func TestCoalesceShowSnapshot(t *testing.T) {
	file := filepath.Join(snapshotsDir, "this-machine.tar.gz")
	facts := snapshotEthtool(t, file)
	nics, _ := coalesceShowJSON(t, "--snapshot", file)
	if len(nics) != len(facts) {
		t.Errorf("%d NICs shown, ethtool.json has %d", len(nics), len(facts))
	}
	withData, without := 0, 0
	for _, n := range nics {
		f, ok := facts[n.Name]
		if !ok {
			t.Errorf("%s not in ethtool.json", n.Name)
			continue
		}
		switch {
		case f.Coalesce != nil:
			withData++
			if n.Coalesce == nil || *n.Coalesce != *f.Coalesce || n.CoalesceUnavailable != "" {
				t.Errorf("%s: shown %+v (%q), captured %+v", n.Name, n.Coalesce, n.CoalesceUnavailable, *f.Coalesce)
			}
		default:
			without++
			if n.Coalesce != nil || !strings.Contains(n.CoalesceUnavailable, f.CoalesceError) {
				t.Errorf("%s: shown %+v %q, captured error %q", n.Name, n.Coalesce, n.CoalesceUnavailable, f.CoalesceError)
			}
		}
	}
	if withData == 0 || without == 0 {
		t.Errorf("snapshot should have NICs with (%d) and without (%d) coalescing", withData, without)
	}
	text := string(invRun(t, "--snapshot", file, "coalesce", "show", "--per-queue"))
	for name, f := range facts {
		if f.Coalesce == nil && !strings.Contains(text, name+": coalescing unavailable: "+f.CoalesceError) {
			t.Errorf("text does not say why %s has no coalescing:\n%s", name, text)
		}
		if f.Coalesce != nil && !strings.Contains(text, name+": per-queue coalescing unavailable: per-queue coalescing is read live only") {
			t.Errorf("text does not say per-queue is live only for %s:\n%s", name, text)
		}
	}
}

// A fixture tree with NICs but no ethtool data (node_exporter's ens10f0):
// the settings are reported unavailable with the reason, exit status 0.
func TestCoalesceShowFixtureWithoutEthtool(t *testing.T) {
	root := filepath.Join(sharedFixtures, "node_exporter")
	nics, raw := coalesceShowJSON(t, "--root", root)
	i, n := findShowNIC(t, nics, "ens10f0")
	if n.Coalesce != nil || !strings.Contains(n.CoalesceUnavailable, "not captured") {
		t.Errorf("ens10f0: %+v", n)
	}
	if v, ok := raw[i]["coalesce"]; !ok || v != nil {
		t.Errorf("ens10f0: coalesce should be null, got %v", v)
	}
	text := string(invRun(t, "--root", root, "coalesce", "show"))
	if !strings.Contains(text, "ens10f0: coalescing unavailable: not captured (ethtool settings are read with ioctls on the live machine)") {
		t.Errorf("text:\n%s", text)
	}
	if strings.Contains(text, "RX-USECS") {
		t.Errorf("table header printed with no NIC to show:\n%s", text)
	}
	// No NICs at all (procfs fixture has no sys/class/net).
	if text := string(invRun(t, "--root", filepath.Join(sharedFixtures, "procfs"), "coalesce", "show")); text != "no network interfaces found\n" {
		t.Errorf("procfs fixture: %q", text)
	}
}

// `coalesce nvme` only prints unless --dry-run=false is given, refuses
// --dry-run=false off the live machine, and on a machine without NVMe says
// so with exit status 1. (The controller decisions themselves are tested on
// the traces in internal/coalesce/testdata.)
func TestCoalesceNVMeDryRunDefault(t *testing.T) {
	if f := newCoalesceNVMeCmd(&globalFlags{}).Flags().Lookup("dry-run"); f == nil || f.DefValue != "true" {
		t.Fatalf("--dry-run default = %v, want true", f)
	}
	root := t.TempDir()
	for p, v := range map[string]string{
		"sys/class/nvme/nvme0/dev":   "259:0\n",
		"sys/block/nvme0n1/inflight": "      30       10\n",
		"sys/block/nvme0n1/stat":     "  5000 0 40000 100 3000 0 24000 50 40 200 150 0 0 0 0 0 0\n",
	} {
		full := filepath.Join(root, p)
		os.MkdirAll(filepath.Dir(full), 0o755)
		if err := os.WriteFile(full, []byte(v), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	out := string(invRun(t, "--root", root, "coalesce", "nvme", "--count", "1", "--epoch", "1ms"))
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 2 {
		t.Fatalf("want one line per epoch (2), got:\n%s", out)
	}
	for _, l := range lines {
		if !strings.Contains(l, "nvme0:") || strings.Contains(l, "sent") || !(strings.HasSuffix(l, "keep") || strings.HasSuffix(l, "(dry run)")) {
			t.Errorf("line %q: want nvme0, kept or dry run, nothing sent", l)
		}
	}
	cmd := selfCmd(nil, "--root", root, "coalesce", "nvme", "--count", "1", "--epoch", "1ms", "--dry-run=false")
	if b, err := cmd.CombinedOutput(); err == nil || !strings.Contains(string(b), "--dry-run=false only works on the live machine") {
		t.Errorf("--dry-run=false on a tree: %v: %s", err, b)
	}
	if _, err := os.Stat("/sys/class/nvme"); err == nil {
		return // this machine has NVMe: the no-NVMe message cannot be checked here
	}
	cmd = selfCmd(nil, "coalesce", "nvme", "--count", "0")
	b, err := cmd.CombinedOutput()
	if exitCode(err) != 1 || !strings.Contains(string(b), "no NVMe controllers found under /sys/class/nvme") {
		t.Errorf("live without NVMe: exit %d: %s", exitCode(err), b)
	}
}
