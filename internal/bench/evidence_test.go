package bench

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/irqpilot/irqpilot/internal/bench/stats"
)

// The campaign of record (docs/benchmarks.md) is kept as the reports bench
// wrote (docs/evidence/campaign). Re-read with this version's statistics, they must
// still give the ratios the docs state, so a change to the statistics
// cannot silently leave the published numbers behind: update the docs and
// this table together.
func TestCampaignOfRecord(t *testing.T) {
	dir := filepath.Join("..", "..", "docs", "evidence", "campaign")
	cases := []struct {
		scenario               string
		aa, autoDefault        string // paired ratio to default, interval, verdict
		autoBest, keptBest     string // paired ratio to #best
		keptName, best, tuneTo string // tune's kept plan, #best, the #tune row when tune kept another
		bestDefault            string // #best's paired ratio to default
		medians                string // auto's median / #best's median
	}{
		{"udp", "0.980 (0.951–0.993) worse", "1.212 (1.155–1.279) better", "1.000 (0.909–1.021)", "1.017 (0.900–1.039)", "spec:app=0,rps=1#tune", "spec:app=0,rps=1#best", "", "1.244 (1.173–1.276)", "0.990"},
		{"memcached", "0.981 (0.929–1.031) within noise", "1.003 (0.956–1.052) within noise", "1.010 (0.966–1.043)", "1.011 (0.962–1.074)", "default", "default#best", "efficiency#tune", "0.989 (0.931–1.040)", "0.997"},
		{"nginx", "0.999 (0.970–1.056) within noise", "0.984 (0.940–1.012) within noise", "0.982 (0.951–1.020)", "1.012 (0.949–1.047)", "default", "spec:app=0-1,rps=off#best", "latency#tune", "0.989 (0.955–1.054)", "0.987"},
		{"storage-libaio-qd16", "1.017 (0.856–1.088) within noise", "0.996 (0.902–1.055) within noise", "0.982 (0.917–1.013)", "0.981 (0.939–1.041)", "default", "default#best", "efficiency#tune", "1.019 (0.961–1.065)", "0.988"},
		{"storage-psync-qd1", "0.982 (0.953–1.007) within noise", "0.981 (0.894–1.013) within noise", "0.984 (0.940–1.002)", "0.985 (0.974–1.116)", "default", "default#best", "latency#tune", "1.015 (0.896–1.027)", "0.997"},
	}
	ratio := func(rep *Report, config string) string {
		for _, s := range rep.Summary {
			if s.Config == config && s.Ratio != nil {
				if s.Paired != rep.Rounds {
					t.Errorf("%s: %s paired over %d rounds, want %d", rep.Workload, config, s.Paired, rep.Rounds)
				}
				return fmt.Sprintf("%.3f (%.3f–%.3f)", s.Ratio.Point, s.Ratio.Low, s.Ratio.High)
			}
		}
		return "no ratio for " + config
	}
	for _, c := range cases {
		t.Run(c.scenario, func(t *testing.T) {
			b, rep := readEvidence(t, dir, c.scenario)
			verdict := func(config string) string {
				for _, s := range rep.Summary {
					if s.Config == config {
						if s.Test != stats.TestSign {
							t.Errorf("%s judged by %q, want the sign test", config, s.Test)
						}
						return " " + s.Verdict
					}
				}
				return ""
			}
			if got := ratio(rep, "default#aa") + verdict("default#aa"); got != c.aa {
				t.Errorf("A/A %s, docs say %s", got, c.aa)
			}
			if got := ratio(rep, "auto") + verdict("auto"); got != c.autoDefault {
				t.Errorf("auto/default %s, docs say %s", got, c.autoDefault)
			}
			if got := ratio(rep, c.best); got != c.bestDefault {
				t.Errorf("#best/default %s, docs say %s", got, c.bestDefault)
			}
			median := map[string]float64{}
			for _, s := range rep.Summary {
				median[s.Config] = s.Throughput.Point
			}
			if got := fmt.Sprintf("%.3f", median["auto"]/median[c.best]); got != c.medians {
				t.Errorf("auto/best medians %s, docs say %s", got, c.medians)
			}
			checkPrinted(t, rep, dir, c.scenario)
			var err error
			if rep, err = ReadReport(b, "#best"); err != nil {
				t.Fatal(err)
			}
			if rep.Baseline != c.best {
				t.Errorf("#best is %q, docs say %q", rep.Baseline, c.best)
			}
			if got := ratio(rep, "auto"); got != c.autoBest {
				t.Errorf("auto/best %s, docs say %s", got, c.autoBest)
			}
			if got := ratio(rep, c.keptName); got != c.keptBest {
				t.Errorf("%s/best %s, docs say %s", c.keptName, got, c.keptBest)
			}
			if c.tuneTo != "" && ratio(rep, c.tuneTo) == "no ratio for "+c.tuneTo {
				t.Errorf("no %s row", c.tuneTo)
			}
		})
	}
}

// readEvidence reads a campaign's report NAME.json from dir, with its
// whole baseline, and checks it ran its 10 rounds and restored the machine.
func readEvidence(t *testing.T, dir, name string) ([]byte, *Report) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, name+".json"))
	if err != nil {
		t.Fatal(err)
	}
	rep, err := ReadReport(b, "")
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Restored || rep.Rounds != 10 {
		t.Errorf("%s: restored %v, %d rounds", name, rep.Restored, rep.Rounds)
	}
	return b, rep
}

// checkPrinted checks that NAME.txt beside the report is what bench --from
// prints for it now, and returns that table.
func checkPrinted(t *testing.T, rep *Report, dir, name string) string {
	t.Helper()
	var table bytes.Buffer
	if err := rep.WriteTable(&table); err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile(filepath.Join(dir, name+".txt"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(table.Bytes(), want) {
		t.Errorf("%s.txt is not what bench --from prints now:\n%s", name, table.Bytes())
	}
	return table.String()
}

// The workloads campaign of record (docs/benchmarks.md, "The workloads
// campaign") is kept as the reports bench wrote (docs/evidence/workloads).
// Re-read with this version's statistics they must still give the ratios
// and verdicts the docs state, and the .txt beside each must be what bench
// --from prints now: update the docs and this table together.
func TestWorkloadsCampaignOfRecord(t *testing.T) {
	dir := filepath.Join("..", "..", "docs", "evidence", "workloads")
	for _, c := range []struct {
		report string
		want   map[string]string // config → "ratio (low–high) verdict"
		floor  string            // the noise-floor line's band
	}{
		{"mysql", map[string]string{
			"default#aa":                "1.001 (0.966–1.019) within noise",
			"default#tune":              "0.957 (0.923–1.087) within noise",
			"spec:app=0-1,rps=off#best": "0.969 (0.914–1.110) within noise",
			"auto":                      "0.955 (0.920–1.106) within noise",
			"rps-spread":                "0.873 (0.772–0.945) worse",
			"dedicated-core":            "0.356 (0.337–0.402) worse",
		}, "±8.7 % of 1 (0.920–1.087)"},
		{"sockperf", map[string]string{
			"default#aa":            "1.480 (0.332–2.780) within noise",
			"spec:app=1,rps=0#best": "0.404 (0.155–1.714) within noise",
			"dedicated-core":        "0.527 (0.286–0.890) better",
			"colocate":              "3.930 (2.374–6.525) worse",
		}, "±359.4 % of 1 (0.218–4.594)"},
		{"sockperf-pingpong", map[string]string{
			"default#aa":              "1.028 (0.969–1.099) within noise",
			"spec:app=0,rps=off#best": "0.956 (0.898–1.538) within noise",
			"per-queue":               "0.915 (0.796–1.003) within noise",
		}, "±28.8 % of 1 (0.776–1.288)"},
	} {
		t.Run(c.report, func(t *testing.T) {
			_, rep := readEvidence(t, dir, c.report)
			got := map[string]string{}
			for _, s := range rep.Summary {
				if _, ok := c.want[s.Config]; ok && s.Ratio != nil {
					got[s.Config] = fmt.Sprintf("%.3f (%.3f–%.3f) %s", s.Ratio.Point, s.Ratio.Low, s.Ratio.High, s.Verdict)
				}
			}
			for config, want := range c.want {
				if got[config] != want {
					t.Errorf("%s: %q, docs say %q", config, got[config], want)
				}
			}
			if table := checkPrinted(t, rep, dir, c.report); !strings.Contains(table, c.floor) {
				t.Errorf("the noise floor is not %s:\n%s", c.floor, table)
			}
		})
	}
}
