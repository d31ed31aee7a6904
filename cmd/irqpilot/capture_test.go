package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"

	"github.com/irqpilot/irqpilot/internal/cpuset"
	goldenfile "github.com/irqpilot/irqpilot/internal/golden"
	"github.com/irqpilot/irqpilot/internal/host"
	"github.com/irqpilot/irqpilot/internal/livetest"
)

var recapture = flag.Bool("recapture", false, "as root: recapture testdata/snapshots/{this-machine,veth4}.tar.gz from this machine")

// stripCounts removes the per-CPU counts, which change between two reads
// of a live machine, from inventory JSON.
func stripCounts(t *testing.T, data []byte) any {
	t.Helper()
	var v map[string]any
	if err := json.Unmarshal(data, &v); err != nil {
		t.Fatalf("%v\n%.300s", err, data)
	}
	for _, key := range []string{"irqs", "summary"} {
		list, _ := v[key].([]any)
		for _, e := range list {
			delete(e.(map[string]any), "counts")
		}
	}
	return v
}

// captureJSON runs capture --json and returns the archive summary and the
// host JSON the capture was made from.
func captureJSON(t *testing.T, out string, args ...string) (map[string]any, []byte) {
	t.Helper()
	data := invRun(t, append(args, "capture", "-o", out, "--json")...)
	var res map[string]json.RawMessage
	if err := json.Unmarshal(data, &res); err != nil {
		t.Fatal(err)
	}
	var summary map[string]any
	json.Unmarshal(data, &summary)
	return summary, res["host"]
}

// jsonOf decodes a JSON document, to compare documents semantically.
func jsonOf(t *testing.T, data []byte) any {
	t.Helper()
	var v any
	if err := json.Unmarshal(data, &v); err != nil {
		t.Fatalf("%v\n%.300s", err, data)
	}
	return v
}

// openTarGz opens a .tar.gz archive for reading (closed when the test ends).
func openTarGz(t *testing.T, file string) *tar.Reader {
	t.Helper()
	fh, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fh.Close() })
	gz, err := gzip.NewReader(fh)
	if err != nil {
		t.Fatal(err)
	}
	return tar.NewReader(gz)
}

func archiveNames(t *testing.T, file string) map[string]*tar.Header {
	t.Helper()
	tr := openTarGz(t, file)
	out := map[string]*tar.Header{}
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		out[strings.TrimSuffix(h.Name, "/")] = h
	}
}

// Captures of static trees: nothing changes between reads, so the snapshot
// must give byte-identical JSON.
func TestCaptureRoundTripStatic(t *testing.T) {
	for name, src := range map[string][]string{
		"root node_exporter": {"--root", filepath.Join(sharedFixtures, "node_exporter")},
		"snapshot cnto sno":  {"--snapshot", filepath.Join(sharedFixtures, "cluster-node-tuning-operator/sno-sysinfo.tgz")},
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			a := filepath.Join(dir, "a.tar.gz")
			_, captured := captureJSON(t, a, src...)
			orig := invRun(t, append(src, "inventory", "--json")...)
			snap := invRun(t, "--snapshot", a, "inventory", "--json")
			if !bytes.Equal(orig, snap) {
				t.Errorf("inventory from the capture differs from the source (-source +capture):\n%s", lineDiff(orig, snap))
			}
			if d := cmp.Diff(jsonOf(t, orig), jsonOf(t, captured)); d != "" {
				t.Errorf("capture --json host differs from inventory --json (-inventory +capture):\n%s", d)
			}
			// (Determinism and capturing a capture: internal/capture tests.)
		})
	}
}

// lineDiff is cmp.Diff of two texts' lines, (-want +got).
func lineDiff(want, got []byte) string {
	return cmp.Diff(strings.Split(string(want), "\n"), strings.Split(string(got), "\n"))
}

// The live machine: the snapshot reproduces exactly the model the capture
// was made from, and a separate live read up to the counts.
func TestCaptureRoundTripLive(t *testing.T) {
	if _, err := os.Stat("/proc/interrupts"); err != nil {
		t.Skip("no /proc/interrupts")
	}
	file := filepath.Join(t.TempDir(), "live.tar.gz")
	summary, captured := captureJSON(t, file)
	live := invRun(t, "inventory", "--json")
	snap := invRun(t, "--snapshot", file, "inventory", "--json")
	if d := cmp.Diff(jsonOf(t, captured), jsonOf(t, snap)); d != "" {
		t.Errorf("snapshot inventory differs from the captured model (-captured +snapshot):\n%s", d)
	}
	if d := cmp.Diff(stripCounts(t, live), stripCounts(t, snap)); d != "" {
		t.Errorf("snapshot inventory differs from a live inventory beyond counts (-live +snapshot):\n%s", d)
	}
	if r, _ := summary["refused"].([]any); len(r) != 0 {
		t.Errorf("live capture refused paths the tool read: %v", r)
	}

	names := archiveNames(t, file)
	for _, want := range []string{"proc/interrupts", "proc/stat", "proc/softirqs", "proc/uptime"} {
		if h := names[want]; h == nil || h.Typeflag != tar.TypeReg || h.Size == 0 {
			t.Errorf("%s missing or empty in the capture", want)
		}
	}
	for name := range names {
		top := strings.SplitN(name, "/", 2)[0]
		switch {
		case top == "proc" || top == "sys" || top == "irqpilot":
		case name == "etc" || name == "etc/default" || name == "etc/sysconfig" ||
			name == "etc/default/irqbalance" || name == "etc/sysconfig/irqbalance":
		default:
			t.Errorf("%s archived", name)
		}
		if strings.HasSuffix(name, "/cmdline") && strings.HasPrefix(name, "proc/") && name != "proc/cmdline" {
			t.Errorf("%s archived: process command lines are never captured", name)
		}
	}
	// Every NIC of the live machine resolves in the snapshot through its
	// /sys/class/net symlink.
	if ents, err := os.ReadDir("/sys/class/net"); err == nil {
		for _, e := range ents {
			if h := names["sys/class/net/"+e.Name()]; h == nil || h.Typeflag != tar.TypeSymlink {
				t.Errorf("sys/class/net/%s: not archived as a symlink", e.Name())
			}
		}
	}
}

// The committed captures: this machine (virtio guest) and a veth pair with
// 4 rx/tx queues in a namespace. Golden JSON without counts, plus explicit
// assertions on what they must show.
func TestCommittedSnapshots(t *testing.T) {
	if *recapture {
		if os.Geteuid() != 0 {
			t.Fatal("-recapture needs root")
		}
		invRun(t, "capture", "-o", filepath.Join(snapshotsDir, "this-machine.tar.gz"))
		ns := newVethNamespace(t)
		invRunIn(t, ns.exec, "capture", "-o", filepath.Join(snapshotsDir, "veth4.tar.gz"))
	}
	for _, name := range []string{"this-machine", "veth4"} {
		t.Run(name, func(t *testing.T) {
			file := filepath.Join(snapshotsDir, name+".tar.gz")
			h, data := inventoryJSON(t, "--snapshot", file)
			got, _ := json.MarshalIndent(stripCounts(t, data), "", "  ")
			goldenfile.Check(t, filepath.Join(snapshotsDir, name+".inventory.json"), append(got, '\n'), *updateGolden || *recapture, "update-inventory")
			switch name {
			case "this-machine":
				assertThisMachine(t, h)
			case "veth4":
				assertVeth4(t, h, nil)
			}
		})
	}
}

func assertThisMachine(t *testing.T, h *host.Host) {
	t.Helper()
	if len(h.CPUs) != 2 {
		t.Errorf("%d cpus, want 2", len(h.CPUs))
	}
	eth0 := h.NIC("eth0")
	if eth0 == nil || eth0.Driver != "virtio_net" || len(eth0.RxQueues) != 1 || len(eth0.TxQueues) != 1 {
		t.Fatalf("eth0 = %+v, want virtio_net with 1 rx and 1 tx queue", eth0)
	}
	if rx := eth0.RxQueues[0]; rx.IRQ == nil || *rx.IRQ != 38 {
		t.Errorf("eth0 rx-0 IRQ = %v, want 38 (virtio2-input.0)", rx.IRQ)
	}
	if tx := eth0.TxQueues[0]; tx.IRQ == nil || *tx.IRQ != 39 {
		t.Errorf("eth0 tx-0 IRQ = %v, want 39 (virtio2-output.0)", tx.IRQ)
	}
	q := h.IRQ(36)
	if q == nil || q.Managed != host.ManagedYes || q.Class != host.ClassStorage || q.Device != "vda" {
		t.Errorf("irq 36 = %+v, want managed storage IRQ of vda", q)
	}
	if q := h.IRQ(38); q == nil || q.Managed != host.ManagedNo || q.Class != host.ClassNetwork {
		t.Errorf("irq 38 = %+v, want movable network IRQ", q)
	}
	var vda *host.BlockDev
	for i := range h.Block {
		if h.Block[i].Name == "vda" {
			vda = &h.Block[i]
		}
	}
	if vda == nil || len(vda.Queues) != 1 || vda.Queues[0].IRQ == nil || *vda.Queues[0].IRQ != 36 {
		t.Errorf("vda = %+v, want one hardware queue completed by IRQ 36", vda)
	}
}

// assertVeth4 checks the veth pair vq0/vq1 made by newVethNamespace; sys
// (when not nil) reads the namespace's sysfs for comparison.
func assertVeth4(t *testing.T, h *host.Host, sys func(path string) string) {
	t.Helper()
	for _, name := range []string{"vq0", "vq1"} {
		n := h.NIC(name)
		if n == nil {
			t.Fatalf("%s missing; nics %v", name, nicNames(h))
		}
		if n.Driver != "veth" || !n.Virtual || len(n.RxQueues) != 4 || len(n.TxQueues) != 4 || len(n.IRQs) != 0 {
			t.Errorf("%s = %+v, want virtual veth with 4 rx, 4 tx queues and no IRQs", name, n)
		}
	}
	if h.NIC("eth0") != nil {
		t.Error("eth0 visible inside the namespace")
	}
	vq0 := h.NIC("vq0")
	if len(vq0.RxQueues) != 4 || len(vq0.TxQueues) != 4 {
		return
	}
	want := map[int]string{0: "", 1: "1", 2: "", 3: "0-1"} // set by newVethNamespace
	for i, rx := range vq0.RxQueues {
		if rx.RPSCPUs == nil || rx.RPSCPUs.String() != want[i] {
			t.Errorf("vq0 rx-%d rps_cpus = %v, want %q", i, rx.RPSCPUs, want[i])
		}
		if sys != nil && rx.RPSCPUs != nil {
			mask, err := cpuset.ParseMask(sys(fmt.Sprintf("/sys/class/net/vq0/queues/rx-%d/rps_cpus", i)))
			if err != nil || !mask.Equal(*rx.RPSCPUs) {
				t.Errorf("vq0 rx-%d: sysfs rps_cpus %v (%v), inventory %v", i, mask, err, rx.RPSCPUs)
			}
		}
	}
	if f := vq0.RxQueues[2].RPSFlowCnt; f == nil || *f != 4096 {
		t.Errorf("vq0 rx-2 rps_flow_cnt = %v, want 4096", f)
	}
	if x := vq0.TxQueues[3].XPSCPUs; x == nil || x.String() != "0" {
		t.Errorf("vq0 tx-3 xps_cpus = %v, want 0", x)
	}
}

func nicNames(h *host.Host) []string {
	var s []string
	for _, n := range h.NICs {
		s = append(s, n.Name)
	}
	return s
}

// newVethNamespace is newVethPair with RPS on vq0 rx-1 (cpu 1), rx-3
// (0-1), a flow count on rx-2 and XPS on tx-3 (cpu 0). Nothing outside the
// namespace is touched.
func newVethNamespace(t *testing.T) *vethNamespace {
	t.Helper()
	ns := newVethPair(t)
	for path, v := range map[string]string{
		"/sys/class/net/vq0/queues/rx-1/rps_cpus":     "2",
		"/sys/class/net/vq0/queues/rx-3/rps_cpus":     "3",
		"/sys/class/net/vq0/queues/rx-2/rps_flow_cnt": "4096",
		"/sys/class/net/vq0/queues/tx-3/xps_cpus":     "1",
	} {
		livetest.Run(t, "ip", "netns", "exec", ns.name, "sh", "-c", "echo "+v+" > "+path)
	}
	return ns
}

// Live: inventory inside a namespace agrees with ip -d link and sysfs.
func TestInventoryVethNamespaceLive(t *testing.T) {
	ns := newVethNamespace(t)
	data := invRunIn(t, ns.exec, "inventory", "--json")
	var inv host.Host
	if err := json.Unmarshal(data, &inv); err != nil {
		t.Fatal(err)
	}
	sys := func(path string) string {
		out, err := exec.Command("ip", "netns", "exec", ns.name, "cat", path).Output()
		if err != nil {
			t.Fatalf("cat %s in %s: %v", path, ns.name, err)
		}
		return strings.TrimSpace(string(out))
	}
	assertVeth4(t, &inv, sys)

	out, err := exec.Command("ip", "-n", ns.name, "-d", "-j", "link", "show").Output()
	if err != nil {
		t.Fatal(err)
	}
	var links []struct {
		Name     string `json:"ifname"`
		NumRx    int    `json:"num_rx_queues"`
		NumTx    int    `json:"num_tx_queues"`
		LinkInfo struct {
			Kind string `json:"info_kind"`
		} `json:"linkinfo"`
	}
	if err := json.Unmarshal(out, &links); err != nil {
		t.Fatal(err)
	}
	seen := 0
	for _, l := range links {
		if l.Name == "lo" {
			continue // the inventory leaves out loopback
		}
		n := inv.NIC(l.Name)
		if n == nil {
			t.Errorf("ip link shows %s, inventory does not", l.Name)
			continue
		}
		seen++
		if len(n.RxQueues) != l.NumRx || len(n.TxQueues) != l.NumTx {
			t.Errorf("%s: inventory %d rx/%d tx queues, ip link %d/%d", l.Name, len(n.RxQueues), len(n.TxQueues), l.NumRx, l.NumTx)
		}
		if l.LinkInfo.Kind == "veth" && n.Driver != "veth" {
			t.Errorf("%s: driver %q, ip link kind veth", l.Name, n.Driver)
		}
	}
	if seen != len(inv.NICs) || seen != 2 {
		t.Errorf("ip link shows %d devices, inventory %d (%v)", seen, len(inv.NICs), nicNames(&inv))
	}

	// Capture inside the namespace and read it back.
	file := filepath.Join(t.TempDir(), "veth4.tar.gz")
	invRunIn(t, ns.exec, "capture", "-o", file)
	snap := invRun(t, "--snapshot", file, "inventory", "--json")
	if d := cmp.Diff(stripCounts(t, data), stripCounts(t, snap)); d != "" {
		t.Errorf("namespace snapshot differs from the live namespace inventory beyond counts (-live +snapshot):\n%s", d)
	}
}

// A snapshot's hard links, device files and FIFOs were dropped with exit 0
// and no word. The verb that unpacks it now warns on stderr, naming them,
// and still reads the rest.
func TestSnapshotWarningsReachStderr(t *testing.T) {
	tr := openTarGz(t, filepath.Join(snapshotsDir, "this-machine.tar.gz"))
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if _, err := io.Copy(tw, tr); err != nil {
			t.Fatal(err)
		}
	}
	for _, h := range []*tar.Header{
		{Name: "run/evil-fifo", Typeflag: tar.TypeFifo, Mode: 0o644},
		{Name: "proc/evil-link", Typeflag: tar.TypeLink, Linkname: "proc/interrupts", Mode: 0o644},
		{Name: "dev/evil-null", Typeflag: tar.TypeChar, Mode: 0o644, Devmajor: 1, Devminor: 3},
	} {
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
	}
	tw.Close()
	zw.Close()
	snap := filepath.Join(t.TempDir(), "odd.tar.gz")
	os.WriteFile(snap, buf.Bytes(), 0o644)

	out, stderr, err := runIrqpilot(t, "inventory", "--snapshot", snap)
	if err != nil {
		t.Fatalf("inventory: %v\n%s", err, stderr)
	}
	if !strings.Contains(out, "IRQ") && !strings.Contains(out, "CPU") {
		t.Errorf("inventory printed nothing useful:\n%s", out)
	}
	for _, want := range []string{"warning: snapshot " + snap, `"run/evil-fifo"`, `"proc/evil-link"`, `"dev/evil-null"`} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr does not say %s:\n%s", want, stderr)
		}
	}
	// The committed snapshot itself is clean: no warning.
	if _, stderr, err := runIrqpilot(t, "inventory", "--snapshot", filepath.Join(snapshotsDir, "this-machine.tar.gz")); err != nil || strings.Contains(stderr, "warning: snapshot") {
		t.Errorf("clean snapshot: %v\n%s", err, stderr)
	}
}

// `capture -o` to a pipe (as to /dev/null or /dev/stdout) writes through it
// and leaves it a pipe: an output is renamed into place only over a
// regular file, never over a device or a FIFO.
func TestCaptureToFIFOKeepsIt(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "out")
	if err := unix.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	got := make(chan []byte, 1)
	go func() {
		b, _ := os.ReadFile(fifo)
		got <- b
	}()
	invRun(t, "--root", filepath.Join(sharedFixtures, "node_exporter"), "capture", "-o", fifo)
	if fi, err := os.Lstat(fifo); err != nil || fi.Mode()&os.ModeNamedPipe == 0 {
		// (The reader stays blocked on the replaced FIFO: nothing wrote it.)
		t.Fatalf("the FIFO is now %v (%v)", fi.Mode(), err)
	}
	b := <-got
	if len(b) < 2 || b[0] != 0x1f || b[1] != 0x8b {
		t.Errorf("the reader got %d bytes, not a gzip archive", len(b))
	}
}
