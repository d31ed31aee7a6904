package load

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/irqpilot/irqpilot/internal/kernel"
	"github.com/irqpilot/irqpilot/internal/livetest"
)

// mpstatAverages runs `mpstat -P ALL <secs> 1` and returns its Average rows
// by CPU id: %usr %nice %sys %iowait %irq %soft %steal %guest %gnice %idle.
func parseMpstat(t *testing.T, out []byte) map[int][]float64 {
	t.Helper()
	rows := map[int][]float64{}
	var cols []string
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 3 || f[0] != "Average:" {
			continue
		}
		if f[1] == "CPU" {
			cols = f[2:]
			continue
		}
		id, err := strconv.Atoi(f[1])
		if err != nil {
			continue // "all"
		}
		var v []float64
		for _, s := range f[2:] {
			x, err := strconv.ParseFloat(s, 64)
			if err != nil {
				t.Fatalf("mpstat value %q: %v", s, err)
			}
			v = append(v, x)
		}
		rows[id] = v
	}
	want := "%usr %nice %sys %iowait %irq %soft %steal %guest %gnice %idle"
	if strings.Join(cols, " ") != want {
		t.Fatalf("mpstat columns %v, want %s\n%s", cols, want, out)
	}
	return rows
}

// Under loopback UDP traffic (stress-ng --udp) and a CPU hog, irqpilot's
// per-CPU %irq, %soft and %idle over an interval agree with mpstat's over
// the same interval within 3 points.
func TestLiveAgreesWithMpstat(t *testing.T) {
	livetest.NeedRoot(t, "mpstat", "stress-ng")
	load := exec.Command("stress-ng", "--udp", "1", "--cpu", "1", "--timeout", "8")
	if err := load.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = load.Process.Kill(); _ = load.Wait() })
	time.Sleep(1500 * time.Millisecond)

	s := NewSampler(kernel.New("/"))
	mp := exec.Command("mpstat", "-P", "ALL", "2", "1")
	mp.Env = append(os.Environ(), "LC_ALL=C", "S_TIME_FORMAT=ISO")
	var out bytes.Buffer
	mp.Stdout = &out
	if err := mp.Start(); err != nil {
		t.Fatal(err)
	}
	a, err := s.Sample()
	if err != nil {
		t.Fatal(err)
	}
	if err := mp.Wait(); err != nil {
		t.Fatalf("mpstat: %v", err)
	}
	l := ratesSince(t, s, a)
	rows := parseMpstat(t, out.Bytes())
	if len(rows) != len(l.CPUs) {
		t.Fatalf("mpstat has %d CPUs, irqpilot %d", len(rows), len(l.CPUs))
	}
	softSeen := false
	for _, c := range l.CPUs {
		m, ok := rows[c.ID]
		if !ok {
			t.Fatalf("CPU%d missing in mpstat", c.ID)
		}
		for _, x := range []struct {
			name       string
			ours, them float64
		}{{"%irq", c.IRQ, m[4]}, {"%soft", c.SoftIRQ, m[5]}, {"%idle", c.Idle, m[9]}, {"%usr", c.User, m[0]}, {"%sys", c.System, m[2]}} {
			t.Logf("CPU%d %s irqpilot %.2f mpstat %.2f", c.ID, x.name, x.ours, x.them)
			if d := x.ours - x.them; d > 3 || d < -3 {
				t.Errorf("CPU%d %s: irqpilot %.2f, mpstat %.2f (more than 3 points apart)", c.ID, x.name, x.ours, x.them)
			}
		}
		softSeen = softSeen || c.SoftIRQ > 1
	}
	if !softSeen {
		t.Errorf("the loopback load produced no softirq time; the comparison tested nothing")
	}
}

// ratesSince samples s again and returns the rates since a.
func ratesSince(t *testing.T, s *Sampler, a *Sample) *Load {
	t.Helper()
	b, err := s.Sample()
	if err != nil {
		t.Fatal(err)
	}
	l, err := Rates(a, b)
	if err != nil {
		t.Fatal(err)
	}
	return l
}
