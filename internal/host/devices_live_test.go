package host

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/irqpilot/irqpilot/internal/cpuset"
	"github.com/irqpilot/irqpilot/internal/kernel"
	"github.com/irqpilot/irqpilot/internal/livetest/liveroot"
	"github.com/vishvananda/netns"
)

// irqByAction finds the live IRQ whose action is name, with plain file
// reads, independent of the code under test.
func irqByAction(t *testing.T, name string) int {
	t.Helper()
	b, err := os.ReadFile("/proc/interrupts")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) > 1 && f[len(f)-1] == name {
			n, err := strconv.Atoi(strings.TrimSuffix(f[0], ":"))
			if err == nil {
				return n
			}
		}
	}
	t.Fatalf("no IRQ named %s", name)
	return -1
}

func linkBase(t *testing.T, p string) string {
	t.Helper()
	l, err := os.Readlink(p)
	if err != nil {
		t.Skip(err)
	}
	return filepath.Base(l)
}

// TestLiveThisMachine reads the live eth0 (virtio_net) and vda (virtio_blk)
// and checks them against what sysfs and /proc/interrupts say when read
// directly: on this machine IRQs 38/39 (virtio2-input.0/output.0) and 36
// (virtio1-req.0).
func TestLiveThisMachine(t *testing.T) {
	liveroot.Need(t)
	if _, err := os.Stat("/sys/class/net/eth0/device"); err != nil {
		t.Skip("no eth0 with a device")
	}
	kfs := kernel.New("/")
	h := irqTable(t, kfs)
	readDevices(kfs, h)

	eth0 := h.NIC("eth0")
	if eth0 == nil {
		t.Fatal("eth0 not found")
	}
	driver := linkBase(t, "/sys/class/net/eth0/device/driver")
	if eth0.Driver != driver || eth0.Virtual {
		t.Errorf("eth0 driver %q virtual %v, want %q", eth0.Driver, eth0.Virtual, driver)
	}
	rxq, _ := filepath.Glob("/sys/class/net/eth0/queues/rx-*")
	txq, _ := filepath.Glob("/sys/class/net/eth0/queues/tx-*")
	if len(eth0.RxQueues) != len(rxq) || len(eth0.TxQueues) != len(txq) {
		t.Errorf("eth0 %d/%d queues, sysfs has %d/%d", len(eth0.RxQueues), len(eth0.TxQueues), len(rxq), len(txq))
	}
	if driver == "virtio_net" {
		virtio := linkBase(t, "/sys/class/net/eth0/device")
		for i := range eth0.RxQueues {
			want := irqByAction(t, fmt.Sprintf("%s-input.%d", virtio, i))
			if devIntp(eth0.RxQueues[i].IRQ) != want {
				t.Errorf("eth0 rx-%d irq %d, want %d", i, devIntp(eth0.RxQueues[i].IRQ), want)
			}
			checkIRQs(t, h, []wantIRQ{{want, ClassNetwork, "eth0", i, "rx"}})
		}
		for i := range eth0.TxQueues {
			want := irqByAction(t, fmt.Sprintf("%s-output.%d", virtio, i))
			if devIntp(eth0.TxQueues[i].IRQ) != want {
				t.Errorf("eth0 tx-%d irq %d, want %d", i, devIntp(eth0.TxQueues[i].IRQ), want)
			}
			checkIRQs(t, h, []wantIRQ{{want, ClassNetwork, "eth0", i, "tx"}})
		}
		cfg := irqByAction(t, virtio+"-config")
		checkIRQs(t, h, []wantIRQ{{cfg, ClassNetwork, "eth0", -1, ""}})
	}
	// rps_cpus as the kernel prints it.
	b, err := os.ReadFile("/sys/class/net/eth0/queues/rx-0/rps_cpus")
	if err != nil {
		t.Fatal(err)
	}
	want, _ := cpuset.ParseMask(strings.TrimSpace(string(b)))
	if eth0.RxQueues[0].RPSCPUs == nil || !eth0.RxQueues[0].RPSCPUs.Equal(want) {
		t.Errorf("eth0 rx-0 rps %s, want %s", devSetp(eth0.RxQueues[0].RPSCPUs), want)
	}
	// ethtool -l agrees.
	if out, err := exec.Command("ethtool", "-l", "eth0").Output(); err == nil && eth0.Channels != nil {
		cur := ethtoolCurrent(string(out))
		if cur["Combined"] != int(eth0.Channels.Combined) || cur["RX"] != int(eth0.Channels.Rx) {
			t.Errorf("channels %+v, ethtool -l says %v", eth0.Channels, cur)
		}
	}

	if _, err := os.Stat("/sys/block/vda/mq"); err == nil {
		var vda *BlockDev
		for i := range h.Block {
			if h.Block[i].Name == "vda" {
				vda = &h.Block[i]
			}
		}
		if vda == nil {
			t.Fatal("vda not found")
		}
		if vda.Driver != linkBase(t, "/sys/block/vda/device/driver") {
			t.Errorf("vda driver %q", vda.Driver)
		}
		virtio := linkBase(t, "/sys/block/vda/device")
		for i, q := range vda.Queues {
			irq := irqByAction(t, fmt.Sprintf("%s-req.%d", virtio, i))
			b, _ := os.ReadFile(fmt.Sprintf("/sys/block/vda/mq/%d/cpu_list", i))
			cpus, err := cpuset.Parse(string(b))
			if err != nil || !q.CPUs.Equal(cpus) || devIntp(q.IRQ) != irq {
				t.Errorf("vda queue %d: cpus %s irq %d, want %s %d", i, q.CPUs, devIntp(q.IRQ), cpus, irq)
			}
			checkIRQs(t, h, []wantIRQ{{irq, ClassStorage, "vda", i, ""}})
		}
	}
	for _, b := range h.Block {
		if strings.HasPrefix(b.Name, "loop") || strings.HasPrefix(b.Name, "zram") {
			t.Errorf("%s listed", b.Name)
		}
	}
}

// ethtoolCurrent parses the "Current hardware settings" of `ethtool -l`.
func ethtoolCurrent(out string) map[string]int {
	m := map[string]int{}
	_, cur, _ := strings.Cut(out, "Current hardware settings:")
	for _, line := range strings.Split(cur, "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil {
			n = 0 // "n/a"
		}
		m[strings.TrimSpace(k)] = n
	}
	return m
}

func devRun(t *testing.T, args ...string) string {
	t.Helper()
	out, err := exec.Command(args[0], args[1:]...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// makeVethNamespace creates a network namespace holding a veth pair vA/vB
// with 4 rx and 4 tx queues each, a macvlan mv0 on vA (this kernel has no
// 802.1Q; VLAN stacking is covered by the hand-made devTree) and a bridge br0
// over vB, and removes it all in Cleanup.
func makeVethNamespace(t *testing.T) string {
	t.Helper()
	liveroot.Need(t)
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("ip not installed")
	}
	ns := fmt.Sprintf("irqpilot-b2-%d", os.Getpid())
	devRun(t, "ip", "netns", "add", ns)
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", ns).Run() })
	devRun(t, "ip", "-n", ns, "link", "add", "vA", "numtxqueues", "4", "numrxqueues", "4", "type", "veth",
		"peer", "name", "vB", "numtxqueues", "4", "numrxqueues", "4")
	devRun(t, "ip", "-n", ns, "link", "add", "link", "vA", "name", "mv0", "type", "macvlan", "mode", "bridge")
	devRun(t, "ip", "-n", ns, "link", "add", "br0", "type", "bridge")
	devRun(t, "ip", "-n", ns, "link", "set", "vB", "master", "br0")
	for _, l := range []string{"vA", "vB", "mv0", "br0"} {
		devRun(t, "ip", "-n", ns, "link", "set", l, "up")
	}
	// Steering the test then expects to read back.
	devRun(t, "ip", "netns", "exec", ns, "sh", "-c",
		"echo 1 > /sys/class/net/vA/queues/rx-1/rps_cpus && echo 256 > /sys/class/net/vA/queues/rx-1/rps_flow_cnt && "+
			"echo 2 > /sys/class/net/vA/queues/tx-2/xps_cpus")
	return ns
}

const childEnv = "IRQPILOT_TEST_NETNS_CHILD"

// TestNetnsChild is the half of TestLiveVethNamespace that runs inside the
// namespace (under `ip netns exec`, which mounts that namespace's /sys).
func TestNetnsChild(t *testing.T) {
	if os.Getenv(childEnv) == "" {
		t.Skip("run by TestLiveVethNamespace")
	}
	kfs := kernel.New("/")
	h := irqTable(t, kfs)
	readDevices(kfs, h)
	b, err := json.Marshal(h)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Printf("\nIRQPILOT-JSON %s\n", b)
}

type ipLink struct {
	Name     string `json:"ifname"`
	Link     string `json:"link"`
	NumRx    int    `json:"num_rx_queues"`
	NumTx    int    `json:"num_tx_queues"`
	LinkInfo struct {
		Kind string `json:"info_kind"`
	} `json:"linkinfo"`
}

// childResult runs the test named test of this binary inside namespace ns
// (`ip netns exec` mounts the namespace's own /sys for it), with env set to
// 1, and returns the JSON it printed after "IRQPILOT-JSON ".
func childResult(t *testing.T, ns, test, env string) []byte {
	t.Helper()
	cmd := exec.Command("ip", "netns", "exec", ns, os.Args[0], "-test.run=^"+test+"$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), env+"=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	_, js, ok := bytes.Cut(out, []byte("\nIRQPILOT-JSON "))
	if !ok {
		t.Fatalf("child printed no result:\n%s", out)
	}
	js, _, _ = bytes.Cut(js, []byte("\n"))
	return js
}

// TestLiveVethNamespace reads a namespace with a 4-queue veth pair, a
// macvlan and a bridge and compares with `ip -d link` and ethtool.
func TestLiveVethNamespace(t *testing.T) {
	ns := makeVethNamespace(t)
	js := childResult(t, ns, "TestNetnsChild", childEnv)
	var h Host
	if err := json.Unmarshal(js, &h); err != nil {
		t.Fatal(err)
	}
	var links []ipLink
	if err := json.Unmarshal([]byte(devRun(t, "ip", "-n", ns, "-d", "-j", "link", "show")), &links); err != nil {
		t.Fatal(err)
	}
	seen := 0
	for _, l := range links {
		if l.Name == "lo" {
			continue
		}
		seen++
		n := h.NIC(l.Name)
		if n == nil {
			t.Errorf("%s not read", l.Name)
			continue
		}
		if n.Kind != l.LinkInfo.Kind || !n.Virtual || len(n.RxQueues) != l.NumRx || len(n.TxQueues) != l.NumTx || len(n.IRQs) != 0 {
			t.Errorf("%s: kind %q virtual %v %d/%d queues %d IRQs; ip -d link: kind %q %d/%d queues",
				l.Name, n.Kind, n.Virtual, len(n.RxQueues), len(n.TxQueues), len(n.IRQs), l.LinkInfo.Kind, l.NumRx, l.NumTx)
		}
		if (l.LinkInfo.Kind == "vlan" || l.LinkInfo.Kind == "macvlan") && n.Lower != l.Link {
			t.Errorf("%s lower %q, ip says %q", l.Name, n.Lower, l.Link)
		}
	}
	if seen != len(h.NICs) || seen != 4 {
		t.Errorf("read %d NICs, ip lists %d", len(h.NICs), seen)
	}
	va := h.NIC("vA")
	if va == nil || len(va.RxQueues) != 4 {
		t.Fatalf("vA: %+v", va)
	}
	if devSetp(va.RxQueues[1].RPSCPUs) != "0" || devIntp(va.RxQueues[1].RPSFlowCnt) != 256 || devSetp(va.RxQueues[0].RPSCPUs) != "" ||
		devSetp(va.TxQueues[2].XPSCPUs) != "1" {
		t.Errorf("vA steering: rx-1 rps %s flow %d, rx-0 rps %s, tx-2 xps %s",
			devSetp(va.RxQueues[1].RPSCPUs), devIntp(va.RxQueues[1].RPSFlowCnt), devSetp(va.RxQueues[0].RPSCPUs), devSetp(va.TxQueues[2].XPSCPUs))
	}
	if br := h.NIC("br0"); br == nil || br.Lower != "vB" {
		t.Errorf("br0 lower: %+v", br)
	}
	cur := ethtoolCurrent(devRun(t, "ip", "netns", "exec", ns, "ethtool", "-l", "vA"))
	if va.Channels == nil || int(va.Channels.Rx) != cur["RX"] || int(va.Channels.Tx) != cur["TX"] || va.Driver != "veth" {
		t.Errorf("vA channels %+v driver %q, ethtool -l: %v", va.Channels, va.Driver, cur)
	}

	// The same ethtool facts in-process, from a thread moved into the namespace.
	var facts map[string]EthtoolFacts
	inNetns(t, ns, func() {
		var err error
		facts, err = QueryEthtool([]string{"vA", "br0"})
		if err != nil {
			t.Error(err)
		}
	})
	if f := facts["vA"]; f.Driver != "veth" || f.Channels == nil || *f.Channels != *va.Channels {
		t.Errorf("in-process vA %+v, child %+v", f, va.Channels)
	}
	if f := facts["br0"]; f.Driver != "bridge" {
		t.Errorf("in-process br0 %+v", f)
	}
	if mv := h.NIC("mv0"); mv == nil || mv.Lower != "vA" || mv.Kind != "macvlan" {
		t.Errorf("mv0: %+v", mv)
	}
}

// inNetns runs fn on an OS thread that has entered the named network
// namespace (ip netns add NAME), for calls that act on the thread's
// namespace such as ethtool ioctls or netlink. /sys is not switched: it
// shows the namespace of whoever mounted it. The thread goes back to its
// namespace afterwards; if it cannot, it is not returned to the scheduler.
func inNetns(t *testing.T, name string, fn func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		runtime.LockOSThread()
		orig, err := netns.Get()
		if err != nil {
			t.Error(err)
			return
		}
		defer orig.Close()
		target, err := netns.GetFromName(name)
		if err != nil {
			t.Error(err)
			return
		}
		defer target.Close()
		if err := netns.Set(target); err != nil {
			t.Error(err)
			return
		}
		fn()
		if err := netns.Set(orig); err != nil {
			t.Errorf("could not return to the original namespace: %v", err)
			return // thread stays locked and dies with the goroutine
		}
		runtime.UnlockOSThread()
	}()
	<-done
}
