package kernel

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// A tree without a capture's record reads /proc/net/route: the default
// routes (destination and mask 0) name their interfaces, others do not.
func TestDefaultRouteDevicesFromProcNetRoute(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "proc/net"), 0o755); err != nil {
		t.Fatal(err)
	}
	route := "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n" +
		"eth0\t00000000\t0102A8C0\t0003\t0\t0\t100\t00000000\t0\t0\t0\n" +
		"eth1\t0002A8C0\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0\n" +
		"bond0\t00000000\t0103A8C0\t0003\t0\t0\t200\t00000000\t0\t0\t0\n"
	if err := os.WriteFile(filepath.Join(dir, "proc/net/route"), []byte(route), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := New(dir).DefaultRouteDevices()
	if err != nil || strings.Join(got, ",") != "bond0,eth0" {
		t.Errorf("got %v %v, want bond0,eth0", got, err)
	}
	// A capture's record wins over the file.
	if err := os.MkdirAll(filepath.Join(dir, SyntheticDir), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, SyntheticDir, DefaultRouteFile), []byte(`["ens3"]`), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, err := New(dir).DefaultRouteDevices(); err != nil || strings.Join(got, ",") != "ens3" {
		t.Errorf("with the record: %v %v", got, err)
	}
	// Nothing to read: an error that says so.
	if _, err := New(t.TempDir()).DefaultRouteDevices(); err == nil || !strings.Contains(err.Error(), "not in this capture") {
		t.Errorf("empty tree: %v", err)
	}
}

// Live: rtnetlink agrees with `ip route show default`, and a recording
// keeps the answer for a capture.
func TestDefaultRouteDevicesLive(t *testing.T) {
	ipOut, err := exec.Command("ip", "-o", "route", "show", "default").Output()
	if err != nil {
		t.Skip("no ip command")
	}
	var want []string
	for _, line := range strings.Split(strings.TrimSpace(string(ipOut)), "\n") {
		f := strings.Fields(line)
		if i := slices.Index(f, "dev"); i >= 0 && i+1 < len(f) {
			want = append(want, f[i+1])
		}
	}
	f := New("/")
	f.StartRecording()
	got, err := f.DefaultRouteDevices()
	f.StopRecording()
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range want {
		if !slices.Contains(got, w) {
			t.Errorf("rtnetlink says %v, ip route show default names %s", got, w)
		}
	}
	if _, ok := f.Synthetics()[DefaultRouteFile]; !ok {
		t.Errorf("recording did not keep %s", DefaultRouteFile)
	}
}
