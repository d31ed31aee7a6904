package main

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"net"
	"os/exec"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/irqpilot/irqpilot/internal/kernel"
	"github.com/irqpilot/irqpilot/internal/livetest"
	"github.com/irqpilot/irqpilot/internal/load"
)

// startKilled starts a helper process and stops it by its PID when the test
// ends (SIGTERM, so that stress-ng reaps its workers; SIGKILL if it lingers).
func startKilled(t *testing.T, args ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(args[0], args[1:]...)
	if err := cmd.Start(); err != nil {
		t.Fatalf("%s: %v", strings.Join(args, " "), err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	})
	return cmd
}

// The machine, live: memcached in a namespace of its own behind a
// 2-queue veth pair, memcaslap loading it from the host side and two
// CPU-bound stress-ng workers keeping both CPUs saturated. doctor (the
// built binary, --json) must not move work onto a CPU whose measured
// headroom — the one it reports — is insufficient, must find memcached as
// the consumer of the traffic, and no fix may ever move memcaslap, the load
// generator.
func TestDoctorFixesRespectHeadroomLive(t *testing.T) {
	livetest.NeedRoot(t, "ip", "memcached", "memcaslap", "stress-ng")
	var tools []string
	for _, name := range []string{"ip", "memcached", "memcaslap", "stress-ng"} {
		p, _ := exec.LookPath(name)
		tools = append(tools, p)
	}
	mc, mcs, stress := tools[1], tools[2], tools[3]
	bin := livetest.Irqpilot(t)

	b := make([]byte, 3)
	_, _ = rand.Read(b)
	sfx := hex.EncodeToString(b)
	ns, hostEnd, peer := "ihr"+sfx, "vhr"+sfx, "vhp"+sfx
	o3 := int(b[1]%200) + 20
	hostIP, peerIP := fmt.Sprintf("10.216.%d.1", o3), fmt.Sprintf("10.216.%d.2", o3)
	livetest.Netns(t, ns)
	livetest.Run(t, "ip", "link", "add", hostEnd, "numtxqueues", "2", "numrxqueues", "2", "type", "veth",
		"peer", "name", peer, "numtxqueues", "2", "numrxqueues", "2", "netns", ns)
	t.Cleanup(func() { _ = exec.Command("ip", "link", "del", hostEnd).Run() })
	livetest.Run(t, "ip", "addr", "add", hostIP+"/24", "dev", hostEnd)
	livetest.Run(t, "ip", "link", "set", hostEnd, "up")
	livetest.Run(t, "ip", "-n", ns, "addr", "add", peerIP+"/24", "dev", peer)
	livetest.Run(t, "ip", "-n", ns, "link", "set", peer, "up")

	// `ip netns exec` execs memcached: the PID is memcached's.
	server := startKilled(t, "ip", "netns", "exec", ns, mc, "-u", "nobody", "-l", peerIP, "-p", "11211", "-U", "0", "-t", "2")
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", peerIP+":11211", time.Second)
		if err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("memcached never listened: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	gen := startKilled(t, mcs, "-s", peerIP+":11211", "-T", "2", "-c", "32", "-t", "60s")
	startKilled(t, stress, "--cpu", strconv.Itoa(runtime.NumCPU()), "--timeout", "60s", "--quiet")
	time.Sleep(2 * time.Second) // connections up, load steady

	out, err := exec.Command(bin, "--json", "doctor", "--duration", "3s").Output()
	if code := exitCode(err); code != 0 && code != 1 {
		t.Fatalf("doctor: exit %d: %v\n%s", code, err, out)
	}
	var rep struct {
		CPUs      []load.CPULoad       `json:"cpus"`
		Headroom  []load.Headroom      `json:"headroom"`
		Consumers []kernel.SocketOwner `json:"consumers"`
		Findings  []struct {
			ID    string      `json:"id"`
			Fix   string      `json:"fix"`
			Moves []load.Move `json:"moves"`
		} `json:"findings"`
	}
	if err := json.Unmarshal(out, &rep); err != nil {
		t.Fatalf("doctor --json: %v\n%s", err, out)
	}
	t.Logf("headroom %+v", rep.Headroom)

	// The consumer: memcached, through the host's end of the veth pair;
	// memcaslap is not one.
	var found bool
	for _, o := range rep.Consumers {
		if o.PID == gen.Process.Pid {
			t.Errorf("the load generator memcaslap (pid %d) is listed as a consumer: %+v", o.PID, o)
		}
		if o.PID == server.Process.Pid {
			found = true
			if o.Comm != "memcached" || len(o.Devices) != 1 || o.Devices[0] != hostEnd {
				t.Errorf("consumer %+v, want memcached behind %s", o, hostEnd)
			}
		}
	}
	if !found {
		t.Errorf("memcached (pid %d) not among the consumers %+v", server.Process.Pid, rep.Consumers)
	}

	// The measurement doctor printed.
	headroom := map[int]load.Headroom{}
	for _, h := range rep.Headroom {
		headroom[h.CPU] = h
	}
	saturated := true
	for _, c := range rep.CPUs {
		h, ok := headroom[c.ID]
		if !ok || (h.Measured && math.Abs(h.Busy-(100-c.Idle-c.IOWait)) > 1e-6) {
			t.Errorf("CPU%d: headroom %+v does not match its measured use %+v", c.ID, h, c)
		}
		saturated = saturated && h.Measured && h.Spare == 0
	}
	if !saturated {
		t.Errorf("two CPU-bound workers and memcaslap left spare time: %+v", rep.Headroom)
	}

	taskset := regexp.MustCompile("taskset -apc ([0-9,-]+) ([0-9]+)")
	for _, f := range rep.Findings {
		for _, m := range f.Moves {
			if m.PID != 0 && m.PID != server.Process.Pid {
				t.Errorf("%s moves pid %d (%s), not memcached (pid %d)", f.ID, m.PID, m.What, server.Process.Pid)
			}
			for _, p := range m.To {
				h := headroom[p.CPU]
				if !h.Measured || h.Spare <= 0 || p.Busy < h.Busy || p.After > load.HeadroomBusyMaxPct {
					t.Errorf("%s moves %s onto CPU%d without the headroom doctor measured (%+v): %+v", f.ID, m.What, p.CPU, h, p)
				}
			}
		}
		if saturated && len(f.Moves) != 0 {
			t.Errorf("%s moves work on a saturated machine: %+v", f.ID, f.Moves)
		}
		for _, mt := range taskset.FindAllStringSubmatch(f.Fix, -1) {
			if pid, _ := strconv.Atoi(mt[2]); pid != server.Process.Pid {
				t.Errorf("%s: fix moves pid %d, not memcached (pid %d): %q", f.ID, pid, server.Process.Pid, f.Fix)
			}
		}
		if strings.Contains(f.Fix, fmt.Sprintf("(pid %d)", gen.Process.Pid)) && !strings.Contains(f.Fix, fmt.Sprintf("(pid %d) stays", gen.Process.Pid)) {
			t.Errorf("%s: fix names memcaslap other than to keep it: %q", f.ID, f.Fix)
		}
	}
}
