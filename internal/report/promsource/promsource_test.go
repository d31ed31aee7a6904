package promsource_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/common/model"
	"gonum.org/v1/plot/vg"

	"github.com/irqpilot/irqpilot/internal/promclient/promtest"
	"github.com/irqpilot/irqpilot/internal/report"
	"github.com/irqpilot/irqpilot/internal/report/promsource"
)

// replay serves a recording's answers by query, as Prometheus's HTTP API
// would, and notes the queries it was asked and any it did not know.
func replay(t *testing.T, rec *recording) (*httptest.Server, *[]string) {
	t.Helper()
	var mu sync.Mutex
	var asked []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := r.ParseForm(); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		q := r.Form.Get("query")
		mu.Lock()
		asked = append(asked, r.URL.Path+" "+q)
		mu.Unlock()
		body, ok := rec.Responses[q]
		if !ok {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			w.Write([]byte(`{"status":"error","errorType":"bad_data","error":"not in the recording"}`))
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write(body)
	}))
	t.Cleanup(srv.Close)
	return srv, &asked
}

func loadRecording(t *testing.T) *recording {
	t.Helper()
	b, err := os.ReadFile("testdata/three-nodes.json")
	if err != nil {
		t.Fatal(err)
	}
	var rec recording
	if err := json.Unmarshal(b, &rec); err != nil {
		t.Fatal(err)
	}
	return &rec
}

// A real Prometheus's answers (three agents, two CPUs each, 1 s scrapes;
// recorded by TestLiveThreeAgentsPrometheusReport with PROMSOURCE_RECORD)
// decode into three named nodes whose CPU modes add up to 100 %, with the
// queries and the rate window the live run used.
func TestFetchRecorded(t *testing.T) {
	rec := loadRecording(t)
	srv, asked := replay(t, rec)
	rng, _ := time.ParseDuration(rec.Range)
	step, _ := time.ParseDuration(rec.Step)
	res, err := promsource.Fetch(context.Background(), promsource.Options{URL: srv.URL, Range: rng, Step: step, End: rec.End})
	if err != nil {
		t.Fatalf("%v\nasked: %q", err, *asked)
	}
	runs := runsOf(t, res)
	if res.Window != 4*time.Second {
		t.Errorf("rate window %s, want 4s (1s scrapes: max(2s+1s, 4×1s))", res.Window)
	}
	want := []string{
		`count_over_time(irqpilot_cpu_irq_seconds_total{cpu="0"}[1m])`,
		`irqpilot_cpu_irq_seconds_total{cpu="0"}[1m]`,
		`last_over_time(irqpilot_node_info[1m])`,
		`rate(irqpilot_cpu_seconds_total[4s])`,
		`rate(irqpilot_cpu_irq_seconds_total[4s])`,
		`rate(irqpilot_cpu_softirq_seconds_total[4s])`,
		`rate(irqpilot_queue_interrupts_total[4s])`,
	}
	if strings.Join(res.Queries, "\n") != strings.Join(want, "\n") {
		t.Errorf("queries:\n%s\nwant:\n%s", strings.Join(res.Queries, "\n"), strings.Join(want, "\n"))
	}
	if n := int(res.End.Sub(res.Start)/res.Step) + 1; n != 31 {
		t.Errorf("%d points, want 31 (1m every 2s)", n)
	}
	if len(runs) != 3 {
		t.Fatalf("%d nodes, want 3", len(runs))
	}
	sawIRQ := false
	for i, r := range runs {
		if want := []string{"irqp-node-a", "irqp-node-b", "irqp-node-c"}[i]; r.Host != want {
			t.Errorf("node %d: %q, want %q", i, r.Host, want)
		}
		if len(r.CPUs) != 2 || r.CPUs[0] != 0 || r.CPUs[1] != 1 {
			t.Errorf("%s: CPUs %v, want [0 1]", r.Host, r.CPUs)
		}
		if len(r.Loads) != 31 {
			t.Errorf("%s: %d loads, want one per point (31)", r.Host, len(r.Loads))
		}
		for _, m := range r.MeanCPUs() {
			if sum := m.User + m.System + m.IRQ + m.SoftIRQ + m.Others() + m.Idle; math.Abs(sum-100) > 1e-6 {
				t.Errorf("%s cpu%d: %.3f %%", r.Host, m.ID, sum)
			}
		}
		for _, s := range r.IRQSeries() {
			if strings.Contains(s.Label, "vda queue 0") && s.Mean > 10 {
				sawIRQ = true
			}
		}
	}
	if !sawIRQ {
		t.Errorf("no node has vda queue 0's IRQ (the live test's disk I/O) above 10/s")
	}
	charts, err := report.FleetCharts(runs, report.Options{})
	if err != nil || len(charts) != 6 {
		t.Fatalf("fleet charts: %d, %v", len(charts), err)
	}
	var page bytes.Buffer
	if err := report.WriteHTML(&page, runs, charts, 10*vg.Inch); err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{"<td>irqp-node-a</td>", "<td>irqp-node-c</td>", "data:image/png;base64,"} {
		if !strings.Contains(page.String(), w) {
			t.Errorf("HTML page lacks %q", w)
		}
	}
}

// Errors name the URL and the query, and say what to check.
func TestFetchErrors(t *testing.T) {
	empty := &recording{Responses: map[string]json.RawMessage{
		`count_over_time(irqpilot_cpu_irq_seconds_total{cpu="0"}[5m])`: json.RawMessage(`{"status":"success","data":{"resultType":"vector","result":[]}}`),
	}}
	srv, _ := replay(t, empty)
	for _, c := range []struct {
		name string
		o    promsource.Options
		want []string
	}{
		{"unreachable", promsource.Options{URL: "http://127.0.0.1:1", Range: 5 * time.Minute},
			[]string{"http://127.0.0.1:1", "count_over_time(irqpilot_cpu_irq_seconds_total", "reachable"}},
		{"empty", promsource.Options{URL: srv.URL, Range: 5 * time.Minute},
			[]string{srv.URL, "no irqpilot_cpu_irq_seconds_total samples", "--listen", "--range"}},
		{"server error", promsource.Options{URL: srv.URL, Range: time.Minute},
			[]string{srv.URL, "bad_data", "not in the recording"}},
		{"no url", promsource.Options{Range: time.Minute}, []string{"--prometheus", "empty URL"}},
		{"bad url", promsource.Options{URL: "localhost:9090", Range: time.Minute}, []string{`"localhost:9090"`, "http(s)"}},
		{"bad range", promsource.Options{URL: srv.URL, Range: -time.Minute}, []string{"--range -1m0s", "positive"}},
		{"range under two steps", promsource.Options{URL: srv.URL, Range: 5 * time.Second, Step: 5 * time.Second}, []string{"--range 5s", "--step"}},
		{"too many points", promsource.Options{URL: srv.URL, Range: 24 * time.Hour, Step: time.Second}, []string{"86401 points", "11000", "larger --step"}},
		{"selector braces", promsource.Options{URL: srv.URL, Range: time.Minute, Selector: `{job="x"}`}, []string{"--selector", "without braces"}},
	} {
		_, err := promsource.Fetch(context.Background(), c.o)
		if err == nil {
			t.Errorf("%s: no error", c.name)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %q does not say %q", c.name, err, w)
			}
		}
	}
}

func TestHelpers(t *testing.T) {
	if w := promsource.RateWindow(5*time.Second, 15*time.Second); w != time.Minute {
		t.Errorf("RateWindow(5s, 15s) = %s, want 1m", w)
	}
	if w := promsource.RateWindow(30*time.Second, 1500*time.Millisecond); w != 32*time.Second {
		t.Errorf("RateWindow(30s, 1.5s) = %s, want 32s (rounded up)", w)
	}
	if s := promsource.DefaultStep(5 * time.Minute); s != 5*time.Second {
		t.Errorf("DefaultStep(5m) = %s", s)
	}
	if s := promsource.DefaultStep(24 * time.Hour); s != 2*time.Minute {
		t.Errorf("DefaultStep(24h) = %s, want 2m (720 points)", s)
	}
	o := promsource.Options{URL: "http://x", Range: time.Minute, Selector: `job="irqpilot"`}
	if err := o.Check(); err != nil {
		t.Fatal(err)
	}
	// Two instances reporting one host name keep both, told apart.
	vec := model.Vector{
		{Metric: model.Metric{"instance": "10.0.0.1:9477", "nodename": "db1"}},
		{Metric: model.Metric{"instance": "10.0.0.2:9477", "nodename": "db1"}},
		{Metric: model.Metric{"instance": "10.0.0.3:9477", "nodename": "db3"}},
	}
	n := promsource.NodeNames(vec)
	if n["10.0.0.1:9477"] != "db1 (10.0.0.1:9477)" || n["10.0.0.2:9477"] != "db1 (10.0.0.2:9477)" || n["10.0.0.3:9477"] != "db3" {
		t.Errorf("NodeNames: %v", n)
	}
	// The scrape interval is the median gap, not thrown by one missed scrape.
	m := model.Matrix{{Values: []model.SamplePair{{Timestamp: 0}, {Timestamp: 1000}, {Timestamp: 2000}, {Timestamp: 5000}, {Timestamp: 6000}}}}
	if d := promsource.SampleInterval(m); d != time.Second {
		t.Errorf("SampleInterval = %s, want 1s", d)
	}
}

// A server that answers with a JSON string without end (a hostile or
// broken one on the URL given) makes Fetch fail at the answer limit with
// an error naming it and the flag that raises it; the server's writes
// start failing after the limit and the loopback sockets' buffers, so
// the report never held more than that.
func TestFetchEndlessAnswerBounded(t *testing.T) {
	srv := promtest.NewEndless(t)
	const limit = 2 << 20
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err := promsource.Fetch(ctx, promsource.Options{URL: srv.URL, Range: 5 * time.Minute, MaxAnswer: limit})
	if err == nil || !strings.Contains(err.Error(), "limit of 2 MiB") || !strings.Contains(err.Error(), "--max-answer") {
		t.Fatalf("endless answer: %v; want an error naming the 2 MiB limit and --max-answer", err)
	}
	srv.CheckStopped(t, ctx, limit)
}

// A server that sends part of an answer and then nothing fails at the
// query's time limit, named with its flag.
func TestFetchStalledAnswerTimesOut(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"status":"success","data":`)
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	}))
	defer srv.Close()
	_, err := promsource.Fetch(context.Background(), promsource.Options{URL: srv.URL, Range: 5 * time.Minute, QueryTimeout: 200 * time.Millisecond})
	if err == nil || !strings.Contains(err.Error(), "within the limit of 200ms") || !strings.Contains(err.Error(), "--query-timeout") {
		t.Fatalf("stalled answer: %v; want an error naming the 200ms limit and --query-timeout", err)
	}
}

// runsOf makes the nodes read the report's runs, as `report --prometheus`
// does: every node promsource returns must be one.
func runsOf(t *testing.T, res *promsource.Result) []*report.Run {
	t.Helper()
	runs := make([]*report.Run, len(res.Nodes))
	for i, n := range res.Nodes {
		r, err := report.RunOf(n.Name, n.Source, n.Loads, n.Inv)
		if err != nil {
			t.Fatalf("node %s: %v", n.Name, err)
		}
		runs[i] = r
	}
	return runs
}
