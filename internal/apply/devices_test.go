package apply

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"reflect"
	"strings"
	"testing"

	"github.com/irqpilot/irqpilot/internal/livetest"
	"github.com/irqpilot/irqpilot/internal/setting"

	"github.com/safchain/ethtool"

	"github.com/irqpilot/irqpilot/internal/cpuset"
	"github.com/irqpilot/irqpilot/internal/host"
	"github.com/irqpilot/irqpilot/internal/kernel"
	"github.com/irqpilot/irqpilot/internal/plan"
)

func numbered() ethtool.Coalesce {
	var k ethtool.Coalesce
	v := reflect.ValueOf(&k).Elem()
	for i := 0; i < v.NumField(); i++ {
		v.Field(i).SetUint(uint64(100 + i))
	}
	return k
}

// TestSetCoalesceFieldsMapping checks each plan key against the field of
// safchain/ethtool's struct ethtool_coalesce mirror it must change, and that
// no other field moves.
func TestSetCoalesceFieldsMapping(t *testing.T) {
	for _, c := range []struct {
		key, val string
		field    string
		want     uint32
	}{
		{"rx_usecs", "8", "RxCoalesceUsecs", 8},
		{"rx_frames", "64", "RxMaxCoalescedFrames", 64},
		{"tx_usecs", "0", "TxCoalesceUsecs", 0},
		{"tx_frames", "4294967295", "TxMaxCoalescedFrames", 4294967295},
		{"adaptive_rx", "on", "UseAdaptiveRxCoalesce", 1},
		{"adaptive_rx", "off", "UseAdaptiveRxCoalesce", 0},
		{"adaptive_tx", "on", "UseAdaptiveTxCoalesce", 1},
		{"adaptive_tx", "off", "UseAdaptiveTxCoalesce", 0},
	} {
		k := numbered()
		want := numbered()
		reflect.ValueOf(&want).Elem().FieldByName(c.field).SetUint(uint64(c.want))
		if err := host.SetCoalesceFields(&k, map[string]string{c.key: c.val}); err != nil {
			t.Fatalf("%s=%s: %v", c.key, c.val, err)
		}
		if k != want {
			t.Errorf("%s=%s: got %+v, want only %s changed to %d: %+v", c.key, c.val, k, c.field, c.want, want)
		}
	}
	// Every key the plan format knows is mapped (and nothing else is).
	for _, key := range host.CoalesceKeys {
		k := numbered()
		val := "1"
		if strings.HasPrefix(key, "adaptive") {
			val = "on"
		}
		if err := host.SetCoalesceFields(&k, map[string]string{key: val}); err != nil {
			t.Errorf("key %s from host.CoalesceKeys: %v", key, err)
		}
	}
	// Several at once: the plan's usual "rx_usecs=8 adaptive_rx=off".
	k := numbered()
	if err := host.SetCoalesceFields(&k, map[string]string{"rx_usecs": "8", "adaptive_rx": "off", "tx_frames": "16"}); err != nil {
		t.Fatal(err)
	}
	want := numbered()
	want.RxCoalesceUsecs, want.UseAdaptiveRxCoalesce, want.TxMaxCoalescedFrames = 8, 0, 16
	if k != want {
		t.Errorf("three fields: got %+v, want %+v", k, want)
	}
}

func TestSetCoalesceFieldsRejects(t *testing.T) {
	for _, c := range []struct {
		fields map[string]string
		msg    string
	}{
		{map[string]string{"rx_usec": "8"}, `coalescing field "rx_usec" is not known`},
		{map[string]string{"stats_block_usecs": "8"}, `"stats_block_usecs" is not known`},
		{map[string]string{"adaptive_rx": "1"}, `adaptive_rx="1": want on or off`},
		{map[string]string{"adaptive_tx": "true"}, `adaptive_tx="true": want on or off`},
		{map[string]string{"rx_usecs": "on"}, `rx_usecs="on": want a decimal number`},
		{map[string]string{"rx_usecs": "-1"}, `rx_usecs="-1"`},
		{map[string]string{"rx_usecs": "4294967296"}, `rx_usecs="4294967296"`},
		{map[string]string{"rx_frames": "08"}, `rx_frames="08"`},
		{map[string]string{"tx_usecs": "+5"}, `tx_usecs="+5"`},
		{map[string]string{"tx_usecs": "0x10"}, `tx_usecs="0x10"`},
		// A good field next to a bad one changes nothing either.
		{map[string]string{"rx_usecs": "8", "adaptive_rx": "maybe"}, `adaptive_rx="maybe"`},
	} {
		k := numbered()
		err := host.SetCoalesceFields(&k, c.fields)
		if err == nil || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("%v: error = %v, want %q", c.fields, err, c.msg)
		}
		if k != numbered() {
			t.Errorf("%v: struct changed after an error: %+v", c.fields, k)
		}
	}
}

func TestCoalesceOnSnapshotUnsupported(t *testing.T) {
	fs := tree(t, map[string]string{"proc/interrupts": "           CPU0\n"})
	c := setting.Change{Kind: setting.KindCoalesce, Target: "eth0 coalescing", Device: "eth0", Value: "rx_usecs=8"}
	if _, err := readKind(fs, c); !errors.Is(err, kernel.ErrUnsupported) || !strings.Contains(err.Error(), "eth0 coalescing") {
		t.Errorf("readCoalesce on a tree: %v, want ErrUnsupported naming eth0", err)
	}
	if err := writeKind(fs, c, c.Value); !errors.Is(err, kernel.ErrUnsupported) {
		t.Errorf("writeCoalesce on a tree: %v, want ErrUnsupported", err)
	}
	// Through the applier: reported as skipped, nothing journaled.
	a := &Applier{Env: setting.Env{FS: fs}, StateDir: t.TempDir()}
	res, err := a.Apply([]setting.Change{c}, Meta{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Journal != nil || res.Skipped != 1 || res.Entries[0].Status != setting.StatusSkipped {
		t.Errorf("apply on a tree: %+v", res)
	}
}

// TestReadCoalesceBadValueStopsBeforeDevice: a bad value is refused when the
// current value is read (before any write), naming device and field. No
// ioctl is made: the value check comes first.
func TestReadCoalesceBadValueStopsBeforeDevice(t *testing.T) {
	fs := kernel.New("/")
	for v, msg := range map[string]string{
		"rx_usecs=fast":        `eth0: coalescing rx_usecs="fast"`,
		"adaptive_rx=1":        `eth0: coalescing adaptive_rx="1"`,
		"rx_usecs=1 bogus=2":   `"bogus" is not known`,
		"rx_usecs=1 rx_usecs=": `eth0 coalescing: "rx_usecs=" is not key=value`,
	} {
		_, err := readKind(fs, setting.Change{Kind: setting.KindCoalesce, Device: "eth0", Value: v})
		if err == nil || errors.Is(err, kernel.ErrUnsupported) || !strings.Contains(err.Error(), msg) {
			t.Errorf("readCoalesce(%q) = %v, want a hard error with %q", v, err, msg)
		}
	}
}

// ethtoolShow runs `ethtool -c dev` and returns the plan keys it shows
// ("n/a" — not supported by the driver — reads as 0/off, which is what the
// ioctl returns for it).
func ethtoolShow(t *testing.T, dev string) map[string]string {
	t.Helper()
	out := livetest.Ethtool(t, "-c", dev)
	got := map[string]string{}
	na := func(s, zero string) string {
		if s == "n/a" {
			return zero
		}
		return s
	}
	for _, l := range strings.Split(out, "\n") {
		f := strings.Fields(l)
		switch {
		case len(f) == 5 && f[0] == "Adaptive" && f[1] == "RX:" && f[3] == "TX:":
			got["adaptive_rx"], got["adaptive_tx"] = na(f[2], "off"), na(f[4], "off")
		case len(f) == 2:
			key := map[string]string{"rx-usecs:": "rx_usecs", "rx-frames:": "rx_frames", "tx-usecs:": "tx_usecs", "tx-frames:": "tx_frames"}[f[0]]
			if key != "" {
				got[key] = na(f[1], "0")
			}
		}
	}
	if len(got) != 6 {
		t.Fatalf("ethtool -c %s: parsed %v from\n%s", dev, got, out)
	}
	return got
}

// TestLiveReadCoalesceEth0 reads eth0's coalescing the way apply journals it
// and compares with ethtool -c. Read only: nothing is written to eth0.
func TestLiveReadCoalesceEth0(t *testing.T) {
	if _, err := os.Stat("/sys/class/net/eth0"); err != nil {
		t.Skip("no eth0")
	}
	want := ethtoolShow(t, "eth0")
	fs := kernel.New("/")
	// The wanted values are irrelevant to reading; the order of the keys is
	// the order of the result.
	for _, keys := range [][]string{
		{"rx_usecs", "rx_frames", "tx_usecs", "tx_frames", "adaptive_rx", "adaptive_tx"},
		{"tx_frames", "adaptive_rx"},
		{"rx_usecs"},
	} {
		var value, exp []string
		for _, k := range keys {
			v := "7"
			if strings.HasPrefix(k, "adaptive") {
				v = "on"
			}
			value = append(value, k+"="+v)
			exp = append(exp, k+"="+want[k])
		}
		got, err := readKind(fs, setting.Change{Kind: setting.KindCoalesce, Device: "eth0", Value: strings.Join(value, " ")})
		if err != nil {
			t.Fatal(err)
		}
		if got != strings.Join(exp, " ") {
			t.Errorf("readCoalesce(eth0, %v) = %q, ethtool -c shows %q", keys, got, strings.Join(exp, " "))
		}
	}
}

const nsChildEnv = "IRQPILOT_APPLY_COALESCE_NS_CHILD"

// TestLiveCoalescePlanInNamespace creates a network namespace with a veth
// pair and runs TestCoalescePlanNamespaceChild inside it (ip netns exec
// mounts that namespace's sysfs, so the veth's queue files are visible).
func TestLiveCoalescePlanInNamespace(t *testing.T) {
	livetest.NeedRoot(t, "ip")
	ns := livetest.Netns(t, livetest.Name("irqpc"))
	livetest.Veth(t, ns, "vc0", "vc1", 0)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("ip", "netns", "exec", ns, self, "-test.run=^TestCoalescePlanNamespaceChild$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), nsChildEnv+"=1")
	out, err := cmd.CombinedOutput()
	if err != nil || !bytes.Contains(out, []byte("--- PASS: TestCoalescePlanNamespaceChild")) {
		t.Fatalf("child in namespace %s: %v\n%s", ns, err, out)
	}
	t.Logf("child:\n%s", out)
}

// TestCoalescePlanNamespaceChild runs only inside the namespace made by
// TestLiveCoalescePlanInNamespace. A plan sets vc0's RPS mask and its
// coalescing; veth has no coalescing (EOPNOTSUPP), so that entry must be
// reported skipped with nothing written, the RPS change must be applied, and
// revert must restore it.
func TestCoalescePlanNamespaceChild(t *testing.T) {
	if os.Getenv(nsChildEnv) != "1" {
		t.Skip("runs inside the namespace of TestLiveCoalescePlanInNamespace")
	}
	if _, err := os.Stat("/sys/class/net/eth0"); err == nil {
		t.Fatal("eth0 is visible: not inside the test's namespace")
	}
	fs := kernel.New("/")
	rps := "sys/class/net/vc0/queues/rx-0/rps_cpus"
	origMask, err := fs.ReadSettingFile(rps)
	if err != nil {
		t.Fatal(err)
	}
	online, err := fs.OnlineCPUs()
	if err != nil {
		t.Fatal(err)
	}
	cpu := online.Max()
	h, err := host.Read(fs, host.Options{})
	if err != nil {
		t.Fatal(err)
	}
	p, err := plan.Parse("ns.yaml", []byte(fmt.Sprintf(`version: 1
rx_queues:
  - {device: vc0, queue: 0, rps_cpus: "%d", reason: test}
coalesce:
  - {device: vc0, rx_usecs: 8, adaptive_rx: false, reason: test}
`, cpu)))
	if err != nil {
		t.Fatal(err)
	}
	changes, skipped, err := Changes(setting.Env{FS: fs}, h, p)
	if err != nil {
		t.Fatal(err)
	}
	if len(changes) != 2 || len(skipped) != 0 {
		t.Fatalf("changes %+v skipped %+v", changes, skipped)
	}
	var co setting.Change
	for _, c := range changes {
		if c.Kind == setting.KindCoalesce {
			co = c
		}
	}
	if co.Device != "vc0" || co.Value != "rx_usecs=8 adaptive_rx=off" {
		t.Fatalf("coalesce change = %+v", co)
	}
	a := &Applier{Env: setting.Env{FS: fs}, StateDir: t.TempDir()}
	res, err := a.Apply(changes, Meta{PlanFile: "ns.yaml"})
	if err != nil {
		t.Fatal(err)
	}
	if res.Changed != 1 || res.Skipped != 1 || res.Journal == nil {
		t.Fatalf("apply: changed %d skipped %d: %+v", res.Changed, res.Skipped, res.Entries)
	}
	for _, e := range res.Entries {
		switch e.Kind {
		case setting.KindCoalesce:
			if e.Status != setting.StatusSkipped || !strings.Contains(e.Note, "not supported") || !strings.Contains(e.Note, "vc0") || e.Old != "" {
				t.Errorf("coalesce entry = %+v, want skipped, not supported, no old value", e)
			}
		case setting.KindRPSCPUs:
			if e.Status != setting.StatusDone {
				t.Errorf("rps entry = %+v, want done", e)
			}
		}
	}
	got, _ := fs.ReadSettingFile(rps)
	if m, err := cpuset.ParseMask(got); err != nil || !m.Equal(cpuset.Of(cpu)) {
		t.Errorf("%s = %q after apply, want CPU %d", rps, got, cpu)
	}
	// Nothing was written to vc0's coalescing: the driver still has none.
	if f, _ := host.QueryEthtool([]string{"vc0"}); f["vc0"].Coalesce != nil || !strings.Contains(f["vc0"].CoalesceError, "not supported") {
		t.Errorf("vc0 coalescing after apply: %+v", f["vc0"])
	}
	// The journal on disk records the skip.
	j, err := LoadJournal(a.StateDir, res.Journal.ID)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range j.Entries {
		if e.Kind == setting.KindCoalesce && e.Status != setting.StatusSkipped {
			t.Errorf("journal coalesce entry = %+v", e)
		}
	}
	if _, err := a.Revert("", false); err != nil {
		t.Fatal(err)
	}
	if got, _ := fs.ReadSettingFile(rps); got != origMask {
		t.Errorf("%s = %q after revert, want %q", rps, got, origMask)
	}
	// A write attempt straight at the veth is refused as unsupported (what
	// Apply would record as skipped), not as a hard failure.
	if err := writeKind(fs, co, co.Value); !errors.Is(err, kernel.ErrUnsupported) {
		t.Errorf("writeCoalesce(vc0) = %v, want ErrUnsupported", err)
	}
}

// readKind reads c's current value the way apply does: the kind's checks
// first, then the read.
func readKind(fs *kernel.FS, c setting.Change) (string, error) {
	h, err := setting.Lookup(c.Kind)
	if err != nil {
		return "", err
	}
	if err := h.Check(&c); err != nil {
		return "", err
	}
	return h.Read(&setting.Env{FS: fs}, &c)
}

func writeKind(fs *kernel.FS, c setting.Change, v string) error {
	h, err := setting.Lookup(c.Kind)
	if err != nil {
		return err
	}
	return h.Write(&setting.Env{FS: fs}, &c, v)
}
