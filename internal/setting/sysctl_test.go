package setting

import (
	"strconv"
	"testing"

	"github.com/irqpilot/irqpilot/internal/kernel"
)

func TestSysctlCheck(t *testing.T) {
	const other = "proc/sys/net/core/netdev_budget"
	runCheck(t, sysctlKind, []checkCase{
		{"valid", Change{Path: SockFlowPath, Value: "32768"}, ""},
		{"zero", Change{Path: SockFlowPath, Value: "0"}, ""},
		{"at the cap", Change{Path: SockFlowPath, Value: strconv.Itoa(MaxSockFlowEntries)}, ""},
		{"past the cap", Change{Path: SockFlowPath, Value: strconv.Itoa(MaxSockFlowEntries + 1)}, "out of range"},
		{"2^29", Change{Path: SockFlowPath, Value: "536870912"}, "out of range"},
		{"negative", Change{Path: SockFlowPath, Value: "-1"}, "out of range"},
		{"not an integer", Change{Path: SockFlowPath, Value: "32k"}, "not an integer"},
		// Only the sysctl irqpilot plans: a forged journal entry for any
		// other net.core knob (bpf_jit_harden, netdev_budget) is refused.
		{"another net.core sysctl", Change{Path: other, Value: "600"}, "not a net.core sysctl irqpilot sets"},
		{"bpf_jit_harden", Change{Path: "proc/sys/net/core/bpf_jit_harden", Value: "0"}, "not a net.core sysctl irqpilot sets"},
		{"no path", Change{Value: "1"}, "no kernel file"},
		{"core_pattern", Change{Path: "proc/sys/kernel/core_pattern", Value: "1"}, "is not a net.core sysctl"},
		{"dotdot", Change{Path: "proc/sys/net/core/../../kernel/core_pattern", Value: "1"}, "is not a net.core sysctl"},
		{"dotdot name", Change{Path: "proc/sys/net/core/..", Value: "1"}, "is not a net.core sysctl"},
		{"absolute", Change{Path: "/" + SockFlowPath, Value: "1"}, "is not a net.core sysctl"},
		{"ipv4", Change{Path: "proc/sys/net/ipv4/tcp_syncookies", Value: "0"}, "is not a net.core sysctl"},
		{"directory", Change{Path: "proc/sys/net/core/", Value: "1"}, "is not a net.core sysctl"},
		{"shadow", Change{Path: "etc/shadow", Value: "1"}, "is not a net.core sysctl"},
		{"queue escape", Change{Path: "sys/class/net/eth0/queues/rx-0/../../../../etc/x", Value: "1"}, "is not a net.core sysctl"},
		{"subdirectory", Change{Path: "proc/sys/net/core/x/y", Value: "1"}, "is not a net.core sysctl"},
	})
}

func TestSysctlExpected(t *testing.T) {
	for _, tc := range []struct{ path, v, want string }{
		{SockFlowPath, "5000", "8192"},
		{SockFlowPath, "32768", "32768"},
		{SockFlowPath, "3", "4"},
		{SockFlowPath, "0", "0"},
		{SockFlowPath, "1", "1"},
		{"proc/sys/net/core/netdev_budget", "5000", "5000"},
		{"proc/sys/net/core/somaxconn", "3", "3"},
	} {
		c := Change{Kind: KindSysctl, Path: tc.path, Value: tc.v}
		if got := sysctlKind.Expected(&c); got != tc.want {
			t.Errorf("Expected(%s = %s) = %q, want %q", tc.path, tc.v, got, tc.want)
		}
	}
	runSame(t, sysctlKind, []sameCase{
		{a: "32768", b: "32768\n", same: true},
		{a: "8192", b: "5000", same: false},
		{a: "1", b: "", err: true},
	})
}

func TestSysctlFile(t *testing.T) {
	fs := tree(t, map[string]string{SockFlowPath: "0\n"})
	env := &Env{FS: fs}
	c := SockFlowEntries(5000, "rfs")
	if err := Check(&c); err != nil {
		t.Fatalf("SockFlowEntries' own change refused: %v", err)
	}
	if c.Path != SockFlowPath || c.Value != "5000" || c.Reason != "rfs" {
		t.Errorf("SockFlowEntries = %+v", c)
	}
	readThenWrite(t, sysctlKind, env, &c, "0")
	if got, _ := sysctlKind.Read(env, &c); got != "5000" {
		t.Errorf("Read after Write = %q (a file tree does not round)", got)
	}
	if err := sysctlKind.Restore(env, &c); err != nil {
		t.Fatal(err)
	}
	if got := fileContent(t, fs, SockFlowPath); got != "0" {
		t.Errorf("after Restore the file holds %q, want Old", got)
	}

	// A network namespace other than the first has no rps_sock_flow_entries.
	bare := &Env{FS: tree(t, nil)}
	_, err := sysctlKind.Read(bare, &c)
	errIs(t, "Read of a missing sysctl", err, kernel.ErrUnsupported)
	errIs(t, "Write of a missing sysctl", sysctlKind.Write(bare, &c, "1"), kernel.ErrUnsupported)
}
