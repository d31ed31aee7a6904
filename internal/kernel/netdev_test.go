package kernel

import (
	"os"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// Captured here: the host's /proc/net/dev (kernel 6.18) and one read in a
// namespace holding the receiving end of a flooded veth.
func TestParseNetDevCaptured(t *testing.T) {
	for file, want := range map[string]map[string]uint64{
		"testdata/netdev/veth-netns-6.18": {"lo": 0, "rdm-r0": 22252459},
	} {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		got, err := parseNetDev(file, data)
		if err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff(want, got); d != "" {
			t.Errorf("%s (-want +got):\n%s", file, d)
		}
	}
	data, err := os.ReadFile("testdata/netdev/host-6.18")
	if err != nil {
		t.Fatal(err)
	}
	got, err := parseNetDev("host", data)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := got["lo"]; !ok || len(got) < 2 {
		t.Errorf("host: %v, want lo and the machine's link", got)
	}
}

func TestParseNetDevErrors(t *testing.T) {
	head := "Inter-|   Receive\n face |bytes    packets\n"
	for _, in := range []string{
		head + "eth0 1 2 3\n",  // no colon
		head + "eth0: 1\n",     // one counter
		head + ": 1 2\n",       // no name
		head + "eth0: 1 x 3\n", // not a number
	} {
		if _, err := parseNetDev("x", []byte(in)); err == nil {
			t.Errorf("%q parsed", in)
		} else if _, ok := err.(*ParseError); !ok {
			t.Errorf("%q: %T, want *ParseError", in, err)
		}
	}
	got, err := parseNetDev("x", []byte(head+"  veth-a:12 34 0\n"))
	if err != nil || got["veth-a"] != 34 {
		t.Errorf("a name touching its colon: %v, %v", got, err)
	}
}

func FuzzParseNetDev(f *testing.F) {
	for _, file := range []string{"testdata/netdev/host-6.18", "testdata/netdev/veth-netns-6.18"} {
		if b, err := os.ReadFile(file); err == nil {
			f.Add(b)
		}
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		got, err := parseNetDev("f", b)
		if err == nil && got == nil {
			t.Fatal("nil map without error")
		}
	})
}

// A process's view of /proc/net/dev is its network namespace's: this
// process sees its own loopback through its PID as through /proc/net.
func TestNetDevRxOfLive(t *testing.T) {
	f := New("/")
	if _, err := f.NetDevRx(); err != nil {
		t.Skipf("no /proc/net/dev: %v", err)
	}
	got, err := f.NetDevRxOf(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := got["lo"]; !ok {
		t.Errorf("/proc/%d/net/dev: no lo in %v", os.Getpid(), got)
	}
	if _, err := f.NetDevRxOf(1 << 30); err == nil {
		t.Error("a process that does not exist: no error")
	}
}
