package setting

import (
	"strconv"
	"strings"
	"testing"

	"github.com/irqpilot/irqpilot/internal/kernel"
)

// hostilePaths are files no steering kind may name.
var hostilePaths = []string{
	"sys/class/net/eth0/queues/rx-0/../../../../etc/x",
	"sys/class/net/eth0/queues/rx-0/rps_cpus/../../../../../../etc/shadow",
	"sys/class/net/../queues/rx-0/rps_cpus",
	"sys/class/net/./queues/rx-0/rps_cpus",
	"sys/class/net/eth0/queues/../queues/rx-0/rps_cpus",
	"/sys/class/net/eth0/queues/rx-0/rps_cpus",
	"sys/class/net//queues/rx-0/rps_cpus",
	"proc/sys/kernel/core_pattern",
	"etc/shadow",
	"proc/irq/38/smp_affinity_list",
	"sys/devices/pci0000:00/0000:00:03.0/net/eth0/queues/rx-0/rps_cpus",
}

func TestSteeringCheck(t *testing.T) {
	rx := func(file string) string { return RxQueuePath("eth0", 0, file) }
	tx := func(file string) string { return TxQueuePath("eth0", 0, file) }
	cases := []struct {
		h  Handler
		cs []checkCase
	}{
		{rpsCPUsKind, []checkCase{
			{"valid", Change{Path: rx("rps_cpus"), Value: "f"}, ""},
			{"valid wide", Change{Path: RxQueuePath("enp1s0f0", 63, "rps_cpus"), Value: "00000000,0000000f"}, ""},
			{"disable", Change{Path: rx("rps_cpus"), Value: "0"}, ""},
			{"device matches", Change{Path: rx("rps_cpus"), Device: "eth0", Value: "3"}, ""},
			{"tx file", Change{Path: tx("rps_cpus"), Value: "f"}, "is not a rx-N/rps_cpus file"},
			{"other rx file", Change{Path: rx("rps_flow_cnt"), Value: "f"}, "is not a rx-N/rps_cpus file"},
			{"device mismatch", Change{Path: rx("rps_cpus"), Device: "eth1", Value: "f"}, "is not a queue of device eth1"},
			{"queue mismatch", Change{Path: rx("rps_cpus"), Queue: intp(3), Value: "f"}, "is not queue 3"},
			{"alias device", Change{Path: RxQueuePath("eth0:1", 0, "rps_cpus"), Value: "f"}, "is not a rx-N/rps_cpus file"},
			{"long device", Change{Path: RxQueuePath("abcdefghijklmnop", 0, "rps_cpus"), Value: "f"}, "is not a rx-N/rps_cpus file"},
			{"space device", Change{Path: RxQueuePath("eth 0", 0, "rps_cpus"), Value: "f"}, "is not a rx-N/rps_cpus file"},
			{"huge queue", Change{Path: RxQueuePath("eth0", 70000, "rps_cpus"), Value: "f"}, "is not valid"},
			{"overflowing queue", Change{Path: "sys/class/net/eth0/queues/rx-99999999999999999999999/rps_cpus", Value: "f"}, "is not valid"},
			{"named queue", Change{Path: "sys/class/net/eth0/queues/rx-x/rps_cpus", Value: "f"}, "is not a rx-N"},
			{"no path", Change{Value: "f"}, "no kernel file"},
			{"empty mask", Change{Path: rx("rps_cpus"), Value: ""}, "value"},
			{"cpulist value", Change{Path: rx("rps_cpus"), Value: "0-3"}, "value"},
			{"not hex", Change{Path: rx("rps_cpus"), Value: "g"}, "value"},
			{"value past the cap", Change{Path: rx("rps_cpus"), Value: strings.Repeat("0,", MaxCPUListLen/2) + "1"}, "longer than"},
		}},
		{xpsCPUsKind, []checkCase{
			{"valid", Change{Path: tx("xps_cpus"), Value: "f"}, ""},
			{"valid queue 5", Change{Path: TxQueuePath("eth0", 5, "xps_cpus"), Queue: intp(5), Value: "1"}, ""},
			{"rx file", Change{Path: rx("xps_cpus"), Value: "f"}, "is not a tx-N/xps_cpus file"},
			{"xps_rxqs", Change{Path: tx("xps_rxqs"), Value: "f"}, "is not a tx-N/xps_cpus file"},
			{"tx_maxrate", Change{Path: tx("tx_maxrate"), Value: "1"}, "is not a tx-N/xps_cpus file"},
			{"queue mismatch", Change{Path: tx("xps_cpus"), Queue: intp(1), Value: "f"}, "is not queue 1"},
		}},
		{rpsFlowCntKind, []checkCase{
			{"valid", Change{Path: rx("rps_flow_cnt"), Value: "4096"}, ""},
			{"zero", Change{Path: rx("rps_flow_cnt"), Value: "0"}, ""},
			{"at the cap", Change{Path: rx("rps_flow_cnt"), Value: strconv.Itoa(MaxFlowCnt)}, ""},
			{"past the cap", Change{Path: rx("rps_flow_cnt"), Value: strconv.Itoa(MaxFlowCnt + 1)}, "out of range"},
			{"2^29", Change{Path: rx("rps_flow_cnt"), Value: "536870912"}, "out of range"},
			{"negative", Change{Path: rx("rps_flow_cnt"), Value: "-1"}, "out of range"},
			{"not an integer", Change{Path: rx("rps_flow_cnt"), Value: "1e3"}, "not an integer"},
			{"empty", Change{Path: rx("rps_flow_cnt"), Value: ""}, "not an integer"},
			{"overflow", Change{Path: rx("rps_flow_cnt"), Value: "99999999999999999999"}, "not an integer"},
			{"rps_cpus file", Change{Path: rx("rps_cpus"), Value: "4"}, "is not a rx-N/rps_flow_cnt file"},
		}},
	}
	for _, k := range cases {
		h, cs := k.h, k.cs
		for _, p := range hostilePaths {
			cs = append(cs, checkCase{"hostile " + p, Change{Path: p, Value: "1"}, "is not a"})
		}
		t.Run(string(h.Kind()), func(t *testing.T) { runCheck(t, h, cs) })
	}
}

func TestSteeringCheckFillsDeviceAndQueue(t *testing.T) {
	for _, c := range []Change{
		{Kind: KindRPSCPUs, Target: "t", Path: RxQueuePath("enp3s0", 7, "rps_cpus"), Value: "f"},
		{Kind: KindRPSFlowCnt, Target: "t", Path: RxQueuePath("enp3s0", 7, "rps_flow_cnt"), Value: "8"},
		{Kind: KindXPSCPUs, Target: "t", Path: TxQueuePath("enp3s0", 7, "xps_cpus"), Value: "f"},
	} {
		if err := Check(&c); err != nil {
			t.Fatal(err)
		}
		if c.Device != "enp3s0" || c.Queue == nil || *c.Queue != 7 {
			t.Errorf("%s: Device %q Queue %v after Check, want enp3s0 and 7 from the path", c.Kind, c.Device, c.Queue)
		}
	}
	for _, c := range []Change{
		RPSCPUs("eth0", 2, mustSet(t, "0-3"), 64, "r"),
		RPSFlowCnt("eth0", 2, 2048, "r"),
		XPSCPUs("eth0", 2, mustSet(t, "0-3"), 64, "r"),
	} {
		if err := Check(&c); err != nil {
			t.Errorf("%s constructor's change refused: %v", c.Kind, err)
		}
		if c.Device != "eth0" || *c.Queue != 2 || c.Target == "" {
			t.Errorf("%s constructor = %+v", c.Kind, c)
		}
	}
	if c := RPSCPUs("eth0", 0, mustSet(t, "0-3"), 64, ""); c.Value != "00000000,0000000f" {
		t.Errorf("RPSCPUs value = %q, want a 64-CPU mask", c.Value)
	}
}

func TestSteeringSame(t *testing.T) {
	masks := []sameCase{
		{a: "f", b: "00000000,0000000f", same: true},
		{a: "f\n", b: "0000000f", same: true},
		{a: "0x3", b: "3", same: true},
		{a: "00000001,00000000", b: "100000000", err: true}, // a group is at most 8 digits
		{a: "00000001,00000000", b: "1,00000000", same: true},
		{a: "0", b: "00000000,00000000", same: true},
		{a: "f", b: "1f", same: false},
		{a: "f", b: "0-3", err: true},
		{a: "f", b: "", err: true},
	}
	runSame(t, rpsCPUsKind, masks)
	runSame(t, xpsCPUsKind, masks)
	runSame(t, rpsFlowCntKind, []sameCase{
		{a: "4", b: "4\n", same: true},
		{a: " 4", b: "4", same: true},
		{a: "4", b: "3", same: false},
		{a: "4", b: "four", err: true},
	})
}

func TestFlowCntExpected(t *testing.T) {
	for _, tc := range []struct{ v, want string }{
		{"3", "4"}, {"4", "4"}, {"5", "8"}, {"0", "0"}, {"1", "1"}, {"2", "2"},
		{"5000", "8192"}, {"32768", "32768"}, {"32769", "65536"},
		{strconv.Itoa(MaxFlowCnt), strconv.Itoa(MaxFlowCnt)}, {"3\n", "4"},
		{"x", "x"},
	} {
		c := RPSFlowCnt("eth0", 0, 0, "")
		c.Value = tc.v
		if got := rpsFlowCntKind.Expected(&c); got != tc.want {
			t.Errorf("rps_flow_cnt Expected(%q) = %q, want %q", tc.v, got, tc.want)
		}
	}
	for _, h := range []Handler{rpsCPUsKind, xpsCPUsKind} {
		if got := h.Expected(&Change{Value: "00000003"}); got != "00000003" {
			t.Errorf("%s Expected = %q, want the value unchanged", h.Kind(), got)
		}
	}
}

func TestSteeringFiles(t *testing.T) {
	fs := tree(t, map[string]string{
		RxQueuePath("eth0", 0, "rps_cpus"):     "00000000\n",
		RxQueuePath("eth0", 0, "rps_flow_cnt"): "0\n",
		TxQueuePath("eth0", 0, "xps_cpus"):     "00000001\n",
	})
	env := &Env{FS: fs}
	for _, tc := range []struct {
		c        Change
		old, new string
	}{
		{RPSCPUs("eth0", 0, mustSet(t, "0-3"), 32, ""), "00000000", "0000000f"},
		{RPSFlowCnt("eth0", 0, 4096, ""), "0", "4096"},
		{XPSCPUs("eth0", 0, mustSet(t, "1"), 32, ""), "00000001", "00000002"},
	} {
		h := mustLookup(t, tc.c.Kind)
		c := tc.c
		readThenWrite(t, h, env, &c, tc.old)
		if got, err := h.Read(env, &c); err != nil || got != tc.new {
			t.Errorf("%s Read after Write = %q, %v; want %q", c.Kind, got, err, tc.new)
		}
		if err := h.Restore(env, &c); err != nil {
			t.Fatal(err)
		}
		if got, _ := h.Read(env, &c); got != tc.old {
			t.Errorf("%s Read after Restore = %q, want %q", c.Kind, got, tc.old)
		}

		// The same kind on a queue the device does not have.
		gone := c
		gone.Path = strings.Replace(c.Path, "-0/", "-9/", 1)
		_, err := h.Read(env, &gone)
		errIs(t, string(c.Kind)+" Read of a missing queue", err, kernel.ErrUnsupported)
		errIs(t, string(c.Kind)+" Write of a missing queue", h.Write(env, &gone, c.Value), kernel.ErrUnsupported)
		if fs.Exists(gone.Path) {
			t.Errorf("Write created %s", gone.Path)
		}
	}
}
