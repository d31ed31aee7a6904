package kernel_test

import (
	"crypto/rand"
	"fmt"
	"net"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/irqpilot/irqpilot/internal/kernel"
	"github.com/irqpilot/irqpilot/internal/livetest"
)

// sockRun runs a command for the test and fails it with the output.
func sockRun(t *testing.T, args ...string) {
	t.Helper()
	if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// SocketOwners, live: memcached listening in a namespace of its own behind a
// veth pair is found as the process serving the connections this test opens
// to it from the caller's namespace, with the caller's veth end as its
// device; the test process, a client, is not a serving owner.
func TestSocketOwnersLive(t *testing.T) {
	livetest.NeedRoot(t, "memcached", "ip")
	mc, err := exec.LookPath("memcached")
	if err != nil {
		t.Fatal(err)
	}
	ns := livetest.Netns(t, livetest.Name("ipso"))
	host, peer := livetest.Name("vso"), livetest.Name("vsp")
	b := make([]byte, 1)
	_, _ = rand.Read(b)
	sockRun(t, "ip", "link", "add", host, "type", "veth", "peer", "name", peer, "netns", ns)
	t.Cleanup(func() { _ = exec.Command("ip", "link", "del", host).Run() })
	o3 := int(b[0]%200) + 20
	hostIP, peerIP := fmt.Sprintf("10.213.%d.1", o3), fmt.Sprintf("10.213.%d.2", o3)
	sockRun(t, "ip", "addr", "add", hostIP+"/24", "dev", host)
	sockRun(t, "ip", "link", "set", host, "up")
	sockRun(t, "ip", "-n", ns, "addr", "add", peerIP+"/24", "dev", peer)
	sockRun(t, "ip", "-n", ns, "link", "set", peer, "up")

	cmd := exec.Command("ip", "netns", "exec", ns, mc, "-u", "nobody", "-l", peerIP, "-p", "11211", "-U", "0")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }) // by PID
	var conns []net.Conn
	deadline := time.Now().Add(10 * time.Second)
	for len(conns) < 3 {
		c, err := net.DialTimeout("tcp", peerIP+":11211", time.Second)
		if err != nil {
			if time.Now().After(deadline) {
				t.Fatalf("memcached never answered: %v", err)
			}
			time.Sleep(100 * time.Millisecond)
			continue
		}
		conns = append(conns, c)
	}
	t.Cleanup(func() {
		for _, c := range conns {
			c.Close()
		}
	})
	// The connections are accepted once memcached answers on each.
	for _, c := range conns {
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		if _, err := c.Write([]byte("version\r\n")); err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 64)
		if _, err := c.Read(buf); err != nil {
			t.Fatal(err)
		}
	}

	owners, err := kernel.New("/").SocketOwners()
	if err != nil {
		t.Fatal(err)
	}
	// `ip netns exec` execs memcached: same PID.
	var got *kernel.SocketOwner
	for i := range owners {
		if owners[i].PID == cmd.Process.Pid {
			got = &owners[i]
		}
		if owners[i].PID == os.Getpid() && owners[i].Serves() {
			t.Errorf("the test process, a client, is listed as serving: %+v", owners[i])
		}
	}
	if got == nil {
		t.Fatalf("memcached (pid %d) not among the socket owners %+v", cmd.Process.Pid, owners)
	}
	if got.Comm != "memcached" || got.NetNS.Name != ns || got.NetNS.Initial {
		t.Errorf("owner %+v, want memcached in %s", got, ns)
	}
	if !got.Serves() || len(got.Listening) != 1 || got.Listening[0].Addr.String() != peerIP+":11211" || got.Listening[0].Accepted != len(conns) {
		t.Errorf("listening %+v, want tcp %s:11211 with %d accepted", got.Listening, peerIP, len(conns))
	}
	if !slices.Equal(got.Devices, []string{host}) {
		t.Errorf("devices %v, want the caller's veth end [%s]", got.Devices, host)
	}
}
