package bench

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

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
			b, err := os.ReadFile(filepath.Join(dir, c.report+".json"))
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
			var table bytes.Buffer
			if err := rep.WriteTable(&table); err != nil {
				t.Fatal(err)
			}
			if !bytes.Contains(table.Bytes(), []byte(c.floor)) {
				t.Errorf("the noise floor is not %s:\n%s", c.floor, table.Bytes())
			}
			want, err := os.ReadFile(filepath.Join(dir, c.report+".txt"))
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(table.Bytes(), want) {
				t.Errorf("%s.txt is not what bench --from prints now:\n%s", c.report, table.Bytes())
			}
		})
	}
}
