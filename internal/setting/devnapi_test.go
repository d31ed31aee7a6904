package setting

import (
	"strings"
	"testing"

	"github.com/irqpilot/irqpilot/internal/kernel"
)

func TestDevNAPICheck(t *testing.T) {
	runCheck(t, devThreadedKind, []checkCase{
		{"on", Change{Path: "sys/class/net/vA/threaded", Value: "1"}, ""},
		{"off", Change{Path: "sys/class/net/vA/threaded", Value: "0"}, ""},
		{"two", Change{Path: "sys/class/net/vA/threaded", Value: "2"}, "out of range"},
		{"negative", Change{Path: "sys/class/net/vA/threaded", Value: "-1"}, "negative"},
		{"word", Change{Path: "sys/class/net/vA/threaded", Value: "on"}, "not an unsigned integer"},
		{"another file", Change{Path: "sys/class/net/vA/mtu", Value: "1"}, "not the threaded file"},
		{"escape", Change{Path: "sys/class/net/../threaded", Value: "1"}, "not the threaded file"},
		{"queue dir", Change{Path: "sys/class/net/vA/queues/threaded", Value: "1"}, "not the threaded file"},
		{"device disagrees", Change{Path: "sys/class/net/vA/threaded", Device: "eth0", Value: "1"}, "not a file of device eth0"},
		{"no path", Change{Value: "1"}, "no kernel file"},
	})
	runCheck(t, devDeferKind, []checkCase{
		{"two", Change{Path: "sys/class/net/eth0/napi_defer_hard_irqs", Value: "2"}, ""},
		{"at cap", Change{Path: "sys/class/net/eth0/napi_defer_hard_irqs", Value: "1048576"}, ""},
		{"past cap", Change{Path: "sys/class/net/eth0/napi_defer_hard_irqs", Value: "1048577"}, "out of range"},
		{"negative", Change{Path: "sys/class/net/eth0/napi_defer_hard_irqs", Value: "-2"}, "negative"},
		{"wrong file", Change{Path: "sys/class/net/eth0/gro_flush_timeout", Value: "2"}, "not the napi_defer_hard_irqs file"},
	})
	runCheck(t, devGROFlushKind, []checkCase{
		{"20 µs", Change{Path: "sys/class/net/eth0/gro_flush_timeout", Value: "20000"}, ""},
		{"100 ms", Change{Path: "sys/class/net/eth0/gro_flush_timeout", Value: "100000000"}, ""},
		{"1 s", Change{Path: "sys/class/net/eth0/gro_flush_timeout", Value: "1000000000"}, "out of range"},
		{"2^64", Change{Path: "sys/class/net/eth0/gro_flush_timeout", Value: "18446744073709551616"}, "not an unsigned integer"},
	})
}

// A journal may hold what the kernel had or took (a 1 s flush timeout set
// by hand, threaded 2 of a busy-poll kernel), not beyond its limits.
func TestDevNAPICheckRecorded(t *testing.T) {
	for _, tc := range []struct {
		c    Change
		want string
	}{
		{Change{Kind: KindDevGROFlushTimeout, Path: "sys/class/net/eth0/gro_flush_timeout", Value: "0", Old: "1000000000"}, ""},
		{Change{Kind: KindDevGROFlushTimeout, Path: "sys/class/net/eth0/gro_flush_timeout", Value: "0", Old: "18446744073709551615"}, ""},
		{Change{Kind: KindDevThreaded, Path: "sys/class/net/eth0/threaded", Value: "0", Old: "2"}, ""},
		{Change{Kind: KindDevThreaded, Path: "sys/class/net/eth0/threaded", Value: "0", Old: "3"}, "out of range"},
		{Change{Kind: KindDevDeferHardIRQs, Path: "sys/class/net/eth0/napi_defer_hard_irqs", Value: "0", Old: "2147483648"}, "out of range"},
		{Change{Kind: KindDevDeferHardIRQs, Path: "proc/sys/kernel/core_pattern", Value: "0", Old: "1"}, "not the napi_defer_hard_irqs file"},
	} {
		c := tc.c
		c.Target = "t"
		err := CheckRecorded(&c)
		if (tc.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("CheckRecorded(%s %s old %s) = %v, want %q", c.Path, c.Value, c.Old, err, tc.want)
		}
	}
}

func TestDevNAPIConstructorsTree(t *testing.T) {
	fs := tree(t, map[string]string{
		"sys/class/net/vA/threaded": "0\n", "sys/class/net/vA/napi_defer_hard_irqs": "0\n", "sys/class/net/vA/gro_flush_timeout": "0\n",
	})
	env := &Env{FS: fs}
	for _, c := range []Change{DevThreaded("vA", true, "r"), DevDeferHardIRQs("vA", 2, "r"), DevGROFlushTimeout("vA", 20000, "r")} {
		if err := Check(&c); err != nil {
			t.Fatalf("constructor's change refused: %v", err)
		}
		h := mustLookup(t, c.Kind)
		if sc := ScopeOf(&c); sc.NetDevice != "vA" || sc.MachineWide {
			t.Errorf("%s scope %+v", c.Kind, sc)
		}
		readThenWrite(t, h, env, &c, "0")
		if got, _ := h.Read(env, &c); got != c.Value {
			t.Errorf("%s read back %q, want %q", c.Kind, got, c.Value)
		}
		if err := h.Restore(env, &c); err != nil {
			t.Fatal(err)
		}
		if got := fileContent(t, fs, c.Path); got != "0" {
			t.Errorf("%s restored %q", c.Kind, got)
		}
	}
	// A device (or kernel) without the file: unsupported, not an error.
	c := DevThreaded("eth9", true, "r")
	if _, err := devThreadedKind.Read(env, &c); err == nil || !strings.Contains(err.Error(), kernel.ErrUnsupported.Error()) {
		t.Errorf("missing file: %v", err)
	}
}

func TestSysctlBusyPoll(t *testing.T) {
	runCheck(t, sysctlKind, []checkCase{
		{"busy_read 50", Change{Path: BusyReadPath, Value: "50"}, ""},
		{"busy_poll 0", Change{Path: BusyPollPath, Value: "0"}, ""},
		{"busy_poll at cap", Change{Path: BusyPollPath, Value: "100000"}, ""},
		{"busy_poll past cap", Change{Path: BusyPollPath, Value: "100001"}, "busy_poll 100001 is out of range"},
		{"busy_read negative", Change{Path: BusyReadPath, Value: "-1"}, "out of range"},
		{"busy_read word", Change{Path: BusyReadPath, Value: "fast"}, "not an integer"},
		// busy_read's cap is not rps_sock_flow_entries': a large flow table
		// value is no busy_read.
		{"busy_read 32768", Change{Path: BusyReadPath, Value: "32768"}, ""},
		{"busy_read 1M", Change{Path: BusyReadPath, Value: "1000000"}, "out of range"},
		{"rps_sock_flow_entries stays", Change{Path: SockFlowPath, Value: "1000000"}, ""},
		{"netdev_budget still refused", Change{Path: "proc/sys/net/core/netdev_budget", Value: "600"}, "not a net.core sysctl irqpilot sets"},
	})
	c := BusyRead(50, "r")
	c.Old = "2147483647"
	if err := CheckRecorded(&c); err != nil {
		t.Errorf("recorded INT_MAX: %v", err)
	}
	c.Old = "2147483648"
	if err := CheckRecorded(&c); err == nil {
		t.Error("recorded past INT_MAX accepted")
	}
	fs := tree(t, map[string]string{BusyReadPath: "0\n", BusyPollPath: "0\n"})
	env := &Env{FS: fs}
	for _, c := range []Change{BusyRead(50, "r"), BusyPoll(50, "r")} {
		if err := Check(&c); err != nil {
			t.Fatal(err)
		}
		if sc := ScopeOf(&c); !sc.MachineWide {
			t.Errorf("%s scope %+v", c.Target, sc)
		}
		if err := sysctlKind.Write(env, &c, c.Value); err != nil {
			t.Fatal(err)
		}
		if got, _ := sysctlKind.Read(env, &c); got != "50" || sysctlKind.Expected(&c) != "50" {
			t.Errorf("%s = %q, expected %q", c.Target, got, sysctlKind.Expected(&c))
		}
	}
}
