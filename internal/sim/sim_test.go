package sim

import (
	"math"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func sweep(t *testing.T) []Result {
	t.Helper()
	rs, err := Sweep(DefaultConfig(), DefaultPolicyParams(), Policies, DefaultCIFs)
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != len(Policies)*len(DefaultCIFs) {
		t.Fatalf("%d results", len(rs))
	}
	return rs
}

func TestDeterminism(t *testing.T) {
	c := DefaultConfig()
	c.Completions = 5000
	for _, pol := range Policies {
		p1, _ := NewPolicy(pol, DefaultPolicyParams(), c.EpochNs)
		p2, _ := NewPolicy(pol, DefaultPolicyParams(), c.EpochNs)
		a, err := Run(c, p1)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := Run(c, p2)
		if d := cmp.Diff(a, b); d != "" {
			t.Fatalf("%s: same seed, different results (-first +second):\n%s", pol, d)
		}
		c2 := c
		c2.Seed = 2
		p3, _ := NewPolicy(pol, DefaultPolicyParams(), c.EpochNs)
		d, _ := Run(c2, p3)
		if d.LatencyP99Us == a.LatencyP99Us && d.IOPS == a.IOPS {
			t.Fatalf("%s: seed 2 gave identical output to seed 1", pol)
		}
	}
}

// Conservation: every submitted I/O is completed (the run drains), and the
// measured window saw exactly Completions I/Os.
func TestConservation(t *testing.T) {
	for _, c := range []Config{DefaultConfig(), func() Config { c := DefaultConfig(); c.CIF = 0; c.OpenRate = 30000; c.Bursty = true; return c }()} {
		for _, pol := range Policies {
			p, _ := NewPolicy(pol, DefaultPolicyParams(), c.EpochNs)
			r, err := Run(c, p)
			if err != nil {
				t.Fatal(err)
			}
			if r.Submitted != r.Completed {
				t.Errorf("%s cif %d rate %v: submitted %d, completed %d", pol, c.CIF, c.OpenRate, r.Submitted, r.Completed)
			}
			if got := int64(math.Round(r.IOPS * float64(r.DurationNs) / 1e9)); got != int64(c.Completions) {
				t.Errorf("%s: window holds %d completions, want %d", pol, got, c.Completions)
			}
			if p.Pending() != 0 {
				t.Errorf("%s: %d completions still held after draining", pol, p.Pending())
			}
		}
	}
}

// Little's law: time-averaged I/Os outstanding = throughput × mean latency.
func TestLittlesLaw(t *testing.T) {
	cfgs := []Config{}
	for _, cif := range []int{4, 32} {
		c := DefaultConfig()
		c.CIF, c.Completions = cif, 100_000
		cfgs = append(cfgs, c)
	}
	o := DefaultConfig()
	o.CIF, o.OpenRate, o.Completions = 0, 40_000, 100_000
	cfgs = append(cfgs, o)
	for _, c := range cfgs {
		for _, pol := range []string{"none", "vic", "mcc+midl"} {
			p, _ := NewPolicy(pol, DefaultPolicyParams(), c.EpochNs)
			r, err := Run(c, p)
			if err != nil {
				t.Fatal(err)
			}
			lw := r.IOPS * r.MeanLatencyUs / 1e6
			if rel := math.Abs(lw-r.MeanInFlight) / r.MeanInFlight; rel > 0.02 {
				t.Errorf("%s cif %d rate %v: λW = %.3f, L = %.3f (%.1f %% apart)", pol, c.CIF, c.OpenRate, lw, r.MeanInFlight, 100*rel)
			}
			if c.CIF > 0 && math.Abs(r.MeanInFlight-float64(c.CIF)) > 1e-6*float64(c.CIF) {
				t.Errorf("%s: closed loop kept %.4f outstanding, want %d", pol, r.MeanInFlight, c.CIF)
			}
		}
	}
}

// The seed's claims, in shape, with the default parameters.
func TestSeedClaims(t *testing.T) {
	rs := sweep(t)
	for _, cif := range []int{1, 2, 4} {
		n, v := Find(rs, "none", cif), Find(rs, "vic", cif)
		if n.LatencyP50Us != v.LatencyP50Us || n.LatencyP99Us != v.LatencyP99Us || n.IOPS != v.IOPS {
			t.Errorf("cif %d: vic (p50 %.1f p99 %.1f) differs from none (p50 %.1f p99 %.1f)", cif, v.LatencyP50Us, v.LatencyP99Us, n.LatencyP50Us, n.LatencyP99Us)
		}
	}
	for _, cif := range []int{16, 32, 64} {
		n, v := Find(rs, "none", cif), Find(rs, "vic", cif)
		if n.CPUUtil < 0.95 {
			t.Fatalf("cif %d: none uses %.2f of the vCPU; the claim is about a CPU-bound vCPU", cif, n.CPUUtil)
		}
		gain := math.Max(v.IOPS/n.IOPS, v.IOPSPerCPU/n.IOPSPerCPU)
		if gain < 1.10 {
			t.Errorf("cif %d: vic gains %.1f %% IOPS or efficiency, want ≥ 10 %%", cif, 100*(gain-1))
		}
		// The seed's "≥ 3x fewer interrupts" does not hold in this model
		// (docs/coalescing.md, "What the model shows"): with the vCPU the
		// bottleneck, I/Os wait in the guest, the device sees ~12 commands
		// in flight whatever the workload's CIF, and the table's R there
		// is 1/2–2/3. Assert what the model does show.
		red := n.InterruptsPerSec / v.InterruptsPerSec
		if red < 1.3 {
			t.Errorf("cif %d: vic cuts interrupts %.2fx, want ≥ 1.3x", cif, red)
		}
		t.Logf("cif %d: vic %.2fx fewer interrupts, %+.1f %% IOPS, %+.1f %% IOPS/CPU", cif, red, 100*(v.IOPS/n.IOPS-1), 100*(v.IOPSPerCPU/n.IOPSPerCPU-1))
	}
	for _, cif := range []int{1, 2} {
		n, m := Find(rs, "none", cif), Find(rs, "mcc", cif)
		if !(m.LatencyP50Us > 2*n.LatencyP50Us && m.IOPS < 0.5*n.IOPS) {
			t.Errorf("cif %d: mcc=4 p50 %.1f µs / %.0f IOPS vs none %.1f µs / %.0f IOPS: expected it to hurt", cif, m.LatencyP50Us, m.IOPS, n.LatencyP50Us, n.IOPS)
		}
	}
}

func TestBadConfig(t *testing.T) {
	c := DefaultConfig()
	c.OpenRate = 1000 // both closed and open
	if _, err := Run(c, nil); err == nil || !strings.Contains(err.Error(), "exactly one of cif") {
		t.Fatalf("cif and rate both: %v", err)
	}
	// Errors name what was wrong.
	if _, err := Preset("tape"); err == nil || !strings.Contains(err.Error(), "tape") {
		t.Fatalf("unknown preset: %v", err)
	}
	if _, err := NewPolicy("magic", DefaultPolicyParams(), 1); err == nil || !strings.Contains(err.Error(), "magic") {
		t.Fatalf("unknown policy: %v", err)
	}
}
