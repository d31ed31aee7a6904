package bench

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
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
			b, err := os.ReadFile(filepath.Join(dir, c.scenario+".json"))
			if err != nil {
				t.Fatal(err)
			}
			rep, err := ReadReport(b, "")
			if err != nil {
				t.Fatal(err)
			}
			if !rep.Restored || rep.Rounds != 10 {
				t.Errorf("restored %v, %d rounds", rep.Restored, rep.Rounds)
			}
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
			// The .txt beside each report is what bench --from prints.
			var table bytes.Buffer
			if err := rep.WriteTable(&table); err != nil {
				t.Fatal(err)
			}
			want, err := os.ReadFile(filepath.Join(dir, c.scenario+".txt"))
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(table.Bytes(), want) {
				t.Errorf("%s.txt is not what bench --from prints now:\n%s", c.scenario, table.Bytes())
			}
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
