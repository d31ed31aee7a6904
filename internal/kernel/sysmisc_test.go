package kernel

import (
	"testing"
)

func TestSingleValueFiles(t *testing.T) {
	fs := New(tree(t, map[string]string{
		"proc/sys/kernel/hostname":        "web1\n",
		"proc/sys/kernel/osrelease":       "6.18.0-1-amd64\n",
		"proc/sys/net/core/busy_poll":     "50\n",
		"sys/class/net/eth1/ifindex":      "3\n",
		"sys/class/net/bad/ifindex":       "x\n",
		"sys/devices/system/cpu/online":   "0-2,4\n",
		"sys/devices/system/cpu/possible": "0-7\n",
	}))
	if s, err := fs.Hostname(); err != nil || s != "web1" {
		t.Errorf("Hostname = %q, %v", s, err)
	}
	if s, err := fs.OSRelease(); err != nil || s != "6.18.0-1-amd64" {
		t.Errorf("OSRelease = %q, %v", s, err)
	}
	if n, err := fs.NetCore("busy_poll"); err != nil || n != 50 {
		t.Errorf("NetCore(busy_poll) = %d, %v", n, err)
	}
	if _, err := fs.NetCore("busy_read"); err == nil {
		t.Error("NetCore of a missing sysctl: no error")
	}
	if n, err := fs.IfIndex("eth1"); err != nil || n != 3 {
		t.Errorf("IfIndex(eth1) = %d, %v", n, err)
	}
	if _, err := fs.IfIndex("bad"); err == nil {
		t.Error(`IfIndex of "x": no error`)
	}
	if s, err := fs.OnlineCPUs(); err != nil || s.String() != "0-2,4" {
		t.Errorf("OnlineCPUs = %v, %v", s, err)
	}
	if s, err := fs.PossibleCPUs(); err != nil || s.Len() != 8 {
		t.Errorf("PossibleCPUs = %v, %v", s, err)
	}
	for _, bad := range []string{"", "0-", "x"} {
		if _, err := parseIfIndex("p", bad); err == nil {
			t.Errorf("parseIfIndex(%q): no error", bad)
		}
	}
	if _, err := New(tree(t, map[string]string{"sys/devices/system/cpu/online": "0-x\n"})).OnlineCPUs(); err == nil {
		t.Error("OnlineCPUs of 0-x: no error")
	}
}
