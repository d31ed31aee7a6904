package bench

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/irqpilot/irqpilot/internal/bench/stats"
)

// benchmarksDoc is the document whose numbers the evidence tests hold to
// the reports the campaigns wrote.
var benchmarksDoc = filepath.Join("..", "..", "docs", "benchmarks.md")

// readDoc returns docs/benchmarks.md, and the same text with every run
// of white space made one space (so a figure may wrap across lines).
func readDoc(t *testing.T) (string, string) {
	t.Helper()
	b, err := os.ReadFile(benchmarksDoc)
	if err != nil {
		t.Fatal(err)
	}
	return string(b), strings.Join(strings.Fields(string(b)), " ")
}

// docTable returns the rows of the first Markdown table after the first
// line starting with heading, each row its cells (trimmed), header and
// rule left out.
func docTable(t *testing.T, doc, heading string) [][]string {
	t.Helper()
	i := strings.Index(doc, "\n"+heading)
	if i < 0 {
		t.Fatalf("docs/benchmarks.md has no %q", heading)
	}
	var rows [][]string
	inTable := false
	for _, line := range strings.Split(doc[i+1:], "\n") {
		if !strings.HasPrefix(line, "|") {
			if inTable {
				break
			}
			continue
		}
		inTable = true
		cells := strings.Split(strings.Trim(line, "|"), " | ")
		for j := range cells {
			cells[j] = strings.TrimSpace(cells[j])
		}
		rows = append(rows, cells)
	}
	if len(rows) < 3 {
		t.Fatalf("no table after %q", heading)
	}
	return rows[2:]
}

// ratioText is a ratio with its interval as the docs print it.
func ratioText(s *Summary) string {
	if s == nil || s.Ratio == nil {
		return "no ratio"
	}
	return fmt.Sprintf("%.3f (%.3f–%.3f)", s.Ratio.Point, s.Ratio.Low, s.Ratio.High)
}

// summaryOf returns config's row of rep, or nil.
func summaryOf(rep *Report, config string) *Summary {
	for i := range rep.Summary {
		if rep.Summary[i].Config == config {
			return &rep.Summary[i]
		}
	}
	return nil
}

// The campaign of record (docs/benchmarks.md) is kept as the reports bench
// wrote (docs/evidence/campaign). Re-read with this version's statistics,
// they must give every figure of the document's table and of its goals,
// read from the document itself: a change to the statistics or to the
// document cannot leave one behind the other.
func TestCampaignOfRecord(t *testing.T) {
	dir := filepath.Join("..", "..", "docs", "evidence", "campaign")
	doc, flat := readDoc(t)
	rows := docTable(t, doc, "| scenario | A/A (`default#aa` / `default`) | auto / default | `#best` (plan) / default |")
	scenarios := []struct{ label, report, short string }{
		{"udp, single queue", "udp", "udp"},
		{"memcached", "memcached", "memcached"},
		{"nginx", "nginx", "nginx"},
		{"storage, fio libaio qd16", "storage-libaio-qd16", "libaio"},
		{"storage, fio psync qd1", "storage-psync-qd1", "psync"},
	}
	if len(rows) != len(scenarios) {
		t.Fatalf("the campaign table has %d rows, want %d", len(rows), len(scenarios))
	}
	var paired, medians, lows []string
	for i, sc := range scenarios {
		row := rows[i]
		t.Run(sc.report, func(t *testing.T) {
			if !strings.HasPrefix(row[0], sc.label) || len(row) != 7 {
				t.Fatalf("row %d is %q, want the %s scenario's 7 cells", i, row, sc.label)
			}
			b, rep := readEvidence(t, dir, sc.report)
			checkPrinted(t, rep, dir, sc.report)
			for _, s := range rep.Summary {
				if s.Ratio != nil && s.Paired != rep.Rounds {
					t.Errorf("%s paired over %d rounds, want %d", s.Config, s.Paired, rep.Rounds)
				}
				if s.Ratio != nil && s.Test != stats.TestSign {
					t.Errorf("%s judged by %q, want the sign test", s.Config, s.Test)
				}
			}
			judged := func(s *Summary) string {
				if s.Verdict == "within noise" {
					return ratioText(s) + ", within noise"
				}
				return fmt.Sprintf("%s, %s (p = %.3f)", ratioText(s), s.Verdict, s.P)
			}
			cell := func(j int) string { return strings.ReplaceAll(row[j], "**", "") }

			aa := summaryOf(rep, "default#aa")
			if want := ratioText(aa); !strings.HasPrefix(cell(1), want) ||
				(aa.Verdict != "within noise" && !strings.Contains(cell(1), fmt.Sprintf("%q (p = %.3f)", aa.Verdict, aa.P))) {
				t.Errorf("A/A cell %q, the report says %s", row[1], judged(aa))
			}
			if want := judged(summaryOf(rep, "auto")); cell(2) != want {
				t.Errorf("auto / default cell %q, the report says %s", row[2], want)
			}
			// #best: the exhaustive search's winner, whose name the bench
			// gave its row.
			var best string
			for _, s := range rep.Summary {
				if strings.HasSuffix(s.Config, "#best") {
					best = s.Config
				}
			}
			plan := "(`" + strings.TrimSuffix(best, "#best") + "`"
			if want := ratioText(summaryOf(rep, best)); !strings.HasPrefix(cell(3), want+" "+plan) {
				t.Errorf("#best / default cell %q, the report says %s %s`)", row[3], want, plan)
			}
			median := summaryOf(rep, "auto").Throughput.Point / summaryOf(rep, best).Throughput.Point

			// Against #best: what bench --from FILE --baseline '#best' prints.
			toBest, err := ReadReport(b, "#best")
			if err != nil {
				t.Fatal(err)
			}
			if toBest.Baseline != best {
				t.Fatalf("#best is %q, the bench's row %q", toBest.Baseline, best)
			}
			auto := summaryOf(toBest, "auto")
			if want := fmt.Sprintf("%s; medians %.3f", ratioText(auto), median); cell(4) != want {
				t.Errorf("auto / best cell %q, the report says %s", row[4], want)
			}
			paired = append(paired, fmt.Sprintf("%s %.3f", sc.short, auto.Ratio.Point))
			medians = append(medians, fmt.Sprintf("%.3f", median))
			if auto.Ratio.Low < 0.95 {
				lows = append(lows, fmt.Sprintf("%s %.3f", sc.short, auto.Ratio.Low))
			}

			// What tune kept: its report says; kept, it is the #tune row,
			// else the baseline, default.
			tb, err := os.ReadFile(filepath.Join(dir, sc.report+"-tune.json"))
			if err != nil {
				t.Fatal(err)
			}
			var tune struct {
				Best string `json:"best"`
				Kept bool   `json:"kept"`
			}
			if err := json.Unmarshal(tb, &tune); err != nil {
				t.Fatal(err)
			}
			kept, name := "default", "`default`: "
			if tune.Kept {
				kept, name = tune.Best+"#tune", "the best plan: "
				if tune.Best+"#best" != best {
					name = "`" + tune.Best + "`: "
				}
			}
			if want := name + ratioText(summaryOf(toBest, kept)); cell(5) != want {
				t.Errorf("tune's cell %q, the reports say %s", row[5], want)
			}
		})
	}
	for _, want := range []string{
		"Paired: " + strings.Join(paired, ", ") + ".",
		"Ratio of medians: " + strings.Join(medians, ", ") + ".",
	} {
		if !strings.Contains(flat, want) {
			t.Errorf("the goals do not say %q", want)
		}
	}
	if n := len(lows); n > 1 {
		want := "lower ends are " + strings.Join(lows[:n-1], ", ") + " and " + lows[n-1] + ", below 0.95"
		if !strings.Contains(flat, want) {
			t.Errorf("the goals do not say %q", want)
		}
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

// thousands prints n rounded, its thousands apart by a space, as the
// documents do.
func thousands(v float64) string {
	s := strconv.FormatInt(int64(v+0.5), 10)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + " " + s[i:]
	}
	return s
}

// The workloads campaign of record (docs/benchmarks.md, "The workloads
// campaign") is kept as the reports bench wrote (docs/evidence/workloads).
// Every row of the document's tables of its benches is read from the
// document and checked against the report, re-read with this version's
// statistics: the median, the ratio with its interval and the verdict;
// the .txt beside each must be what bench --from prints now, and the
// noise floor the document quotes its line.
func TestWorkloadsCampaignOfRecord(t *testing.T) {
	dir := filepath.Join("..", "..", "docs", "evidence", "workloads")
	doc, flat := readDoc(t)
	for _, c := range []struct {
		report, heading string
	}{
		{"mysql", "| config | trx/s (median, 95 %) |"},
		{"sockperf", "| config | p99 µs (median, 95 %) |"},
		{"sockperf-pingpong", "| config | p99 µs (median) |"},
	} {
		t.Run(c.report, func(t *testing.T) {
			_, rep := readEvidence(t, dir, c.report)
			table := checkPrinted(t, rep, dir, c.report)
			rows := docTable(t, doc, c.heading)
			if len(rows) != len(rep.Summary) {
				t.Errorf("the document's table has %d rows, the report %d configurations", len(rows), len(rep.Summary))
			}
			for _, row := range rows {
				config, note, _ := strings.Cut(row[0], " (")
				if strings.HasPrefix(note, "#best") {
					config += "#best"
				}
				s := summaryOf(rep, config)
				if s == nil {
					t.Errorf("%q: no such configuration in the report", row[0])
					continue
				}
				median := fmt.Sprintf("%.1f", s.Throughput.Point)
				interval := fmt.Sprintf(" (%.1f–%.1f)", s.Throughput.Low, s.Throughput.High)
				if !s.LowerIsBetter {
					median = thousands(s.Throughput.Point)
					interval = " (" + thousands(s.Throughput.Low) + "–" + thousands(s.Throughput.High) + ")"
				}
				if strings.Contains(c.heading, "95 %") {
					median += interval
				}
				if row[1] != median {
					t.Errorf("%s: median %q, the report says %q", config, row[1], median)
				}
				ratio, verdict := "—", s.Verdict
				if s.Ratio != nil {
					ratio = ratioText(s)
				}
				if s.Verdict == "better" || s.Verdict == "worse" {
					verdict = fmt.Sprintf("%s, p = %.3f", s.Verdict, s.P)
				}
				if row[2] != ratio {
					t.Errorf("%s: ratio %q, the report says %q", config, row[2], ratio)
				}
				if row[3] != verdict && !strings.HasPrefix(row[3], verdict+", ") {
					t.Errorf("%s: verdict %q, the report says %q", config, row[3], verdict)
				}
			}
			floor := regexp.MustCompile(`±[0-9.]+ % of 1 \(([0-9.]+)–([0-9.]+)\)`).FindStringSubmatch(table)
			if floor == nil {
				t.Fatalf("no noise-floor line:\n%s", table)
			}
			if c.report == "sockperf" && !strings.Contains(flat, floor[1]+"–"+floor[2]+" of each other") {
				t.Errorf("the document does not quote the noise floor %s–%s", floor[1], floor[2])
			}
		})
	}
}

// Every "x the best" figure in docs/benchmarks.md is the paired reading
// bench --from REPORT --baseline '#best' prints, with its interval: the
// median of the per-round ratios to the exhaustive best, never a ratio of
// two ratios to default.
func TestDocBestFiguresArePaired(t *testing.T) {
	_, flat := readDoc(t)
	b, err := os.ReadFile(filepath.Join("..", "..", "docs", "evidence", "workloads", "mysql.json"))
	if err != nil {
		t.Fatal(err)
	}
	rep, err := ReadReport(b, "#best")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{}
	defer func() {
		if n := strings.Count(flat, "x the best"); n != len(want) {
			t.Errorf("%d figures \"x the best\" in the document, %d from the reports", n, len(want))
		}
	}()
	for _, config := range []string{"auto", "default#tune"} {
		s := summaryOf(rep, config)
		want[fmt.Sprintf("**%.3fx the best** (%.3f–%.3f, %s)", s.Ratio.Point, s.Ratio.Low, s.Ratio.High, s.Verdict)] = false
	}
	for _, m := range regexp.MustCompile(`\*\*[0-9.]+x the best\*\*[^)]*\)`).FindAllString(flat, -1) {
		if _, ok := want[m]; !ok {
			t.Errorf("%q is not a paired reading of the reports", m)
			continue
		}
		want[m] = true
	}
	for m, found := range want {
		if !found {
			t.Errorf("the document does not say %q", m)
		}
	}
}
