// Package promsource reads the irqpilot agents' metrics back from a
// Prometheus server (its HTTP API, query_range) and turns them into the
// report package's Runs — one per node, the same per-interval loads a JSONL
// recording gives — so that `irqpilot report --prometheus` draws the cluster
// view of a whole fleet with the same charts as `irqpilot report run.jsonl`.
//
// Metrics used (internal/agent/metrics): irqpilot_cpu_seconds_total{cpu,mode}
// (user, nice, system, idle, iowait, steal), irqpilot_cpu_irq_seconds_total{cpu},
// irqpilot_cpu_softirq_seconds_total{cpu}, irqpilot_queue_interrupts_total{irq,
// device,queue} and irqpilot_node_info{nodename}; a node is a scrape target
// (the instance label), named by its nodename when the agent exports it.
package promsource

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"time"

	v1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"

	"github.com/irqpilot/irqpilot/internal/agent/metricnames"
	"github.com/irqpilot/irqpilot/internal/host"
	"github.com/irqpilot/irqpilot/internal/load"
	"github.com/irqpilot/irqpilot/internal/promclient"
)

// Metric names read from Prometheus: the agent's (metricnames).
var (
	MetricCPUModes = metricnames.CPUSeconds
	MetricIRQ      = metricnames.CPUIRQSeconds
	MetricSoftIRQ  = metricnames.CPUSoftIRQSeconds
	MetricQueue    = metricnames.QueueInterrupts
	MetricNodeInfo = metricnames.NodeInfo
)

// MaxPoints is Prometheus's limit of points per series in one range query.
const MaxPoints = 11000

// DefaultScrapeInterval is assumed when the data does not tell (Prometheus's
// own default).
const DefaultScrapeInterval = 15 * time.Second

// Options say where and what to read.
type Options struct {
	// URL of the Prometheus server ("http://prometheus:9090").
	URL string
	// Range is how far back from End to read.
	Range time.Duration
	// End of the range (zero: now).
	End time.Time
	// Step between points (zero: DefaultStep(Range)).
	Step time.Duration
	// RateWindow is the window of rate() (zero: max(step + scrape
	// interval, 4 × scrape interval), the scrape interval estimated from
	// the samples Prometheus holds).
	RateWindow time.Duration
	// Selector is added to every metric's label matchers, e.g.
	// `job="irqpilot"` (empty: every target that exports the metrics).
	Selector string
	// MaxAnswer is the largest answer read per query, in bytes (zero:
	// DefaultMaxAnswer). A range of many nodes and CPUs at a fine step
	// needs more.
	MaxAnswer int64
	// QueryTimeout bounds each query, its answer included (zero:
	// DefaultQueryTimeout).
	QueryTimeout time.Duration
	// Transport carries the requests (nil: http.DefaultTransport).
	Transport http.RoundTripper
}

// DefaultMaxAnswer bounds each answer: a day at the default step for 50
// nodes of 64 CPUs is about 20 MiB of JSON.
const DefaultMaxAnswer = 64 << 20

// DefaultQueryTimeout bounds each query.
const DefaultQueryTimeout = 30 * time.Second

func (o *Options) limits() promclient.Limits {
	l := promclient.Limits{MaxBytes: o.MaxAnswer, Timeout: o.QueryTimeout}
	if l.MaxBytes == 0 {
		l.MaxBytes = DefaultMaxAnswer
	}
	if l.Timeout == 0 {
		l.Timeout = DefaultQueryTimeout
	}
	return l
}

// DefaultStep is the step used when none is given: 5 s, or coarser so
// that a long range gives at most 720 columns.
func DefaultStep(r time.Duration) time.Duration {
	s := max(5*time.Second, r/720)
	return s.Round(time.Second)
}

// Node is one node's recording read back: its per-interval loads, all on
// the result's grid (a load with no CPUs is a gap), at least one with CPU
// data, and the IRQs' devices and queues in Inv.
type Node struct {
	Name   string // the host name its agent reports
	Source string // the Prometheus server
	Loads  []*load.Load
	Inv    *host.Host
}

// Result is what was read.
type Result struct {
	// Nodes are the nodes with data, ordered by name: report.RunOf makes
	// each a report.Run for report.FleetCharts.
	Nodes []Node
	// Start, End and Step of the grid; Window of rate().
	Start, End   time.Time
	Step, Window time.Duration
	// Queries are the PromQL queries sent, in order.
	Queries []string
	// Warnings are Prometheus's warnings, prefixed with their query.
	Warnings []string
}

// Check validates the options without contacting the server.
func (o *Options) Check() error {
	if o.URL == "" {
		return errors.New("--prometheus: empty URL (give the Prometheus server, e.g. http://localhost:9090)")
	}
	u, err := url.Parse(o.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("--prometheus %q: not an http(s) URL with a host (e.g. http://localhost:9090)", o.URL)
	}
	if o.Range <= 0 {
		return fmt.Errorf("--range %s: must be positive (e.g. 5m)", o.Range)
	}
	if o.Step < 0 || (o.Step > 0 && o.Step < time.Second) {
		return fmt.Errorf("--step %s: must be at least 1s", o.Step)
	}
	step := o.step()
	if o.Range < 2*step {
		return fmt.Errorf("--range %s is shorter than two steps of %s: use a longer range or a smaller --step", o.Range, step)
	}
	if n := int64(o.Range/step) + 1; n > MaxPoints {
		return fmt.Errorf("--range %s with --step %s gives %d points per series; Prometheus allows %d: use a larger --step", o.Range, step, n, MaxPoints)
	}
	if o.RateWindow < 0 {
		return fmt.Errorf("--rate-window %s: must not be negative", o.RateWindow)
	}
	if o.MaxAnswer < 0 {
		return fmt.Errorf("answer limit of %d bytes: must be positive", o.MaxAnswer)
	}
	if o.QueryTimeout < 0 {
		return fmt.Errorf("--query-timeout %s: must be positive", o.QueryTimeout)
	}
	if strings.ContainsAny(o.Selector, "{}") {
		return fmt.Errorf("--selector %q: give label matchers without braces, e.g. job=\"irqpilot\"", o.Selector)
	}
	return nil
}

func (o *Options) step() time.Duration {
	if o.Step > 0 {
		return o.Step
	}
	return DefaultStep(o.Range)
}

// metric is name{selector[, extra]}.
func (o *Options) metric(name string, extra ...string) string {
	m := extra
	if o.Selector != "" {
		m = append([]string{o.Selector}, extra...)
	}
	if len(m) == 0 {
		return name
	}
	return name + "{" + strings.Join(m, ",") + "}"
}

// promDuration formats d as PromQL does ("90s", "1500ms").
func promDuration(d time.Duration) string {
	return model.Duration(d).String()
}

// fetcher runs queries against one server and remembers them.
type fetcher struct {
	api v1.API
	url string
	res *Result
}

func (f *fetcher) failed(q string, err error) error {
	var perr *v1.Error
	var large *promclient.TooLargeError
	var slow *promclient.TimeoutError
	switch {
	case errors.As(err, &large):
		return fmt.Errorf("prometheus %s: query %q: %v (--max-answer raises it; a larger --step or a shorter --range makes answers smaller)", f.url, q, large)
	case errors.As(err, &slow):
		return fmt.Errorf("prometheus %s: query %q: %v (--query-timeout raises it)", f.url, q, slow)
	case errors.As(err, &perr):
		return fmt.Errorf("prometheus %s: query %q: %s: %s", f.url, q, perr.Type, perr.Msg)
	}
	return fmt.Errorf("prometheus %s: query %q: %v (is Prometheus reachable at that URL?)", f.url, q, err)
}

func (f *fetcher) warn(q string, w v1.Warnings) {
	for _, s := range w {
		f.res.Warnings = append(f.res.Warnings, fmt.Sprintf("query %q: %s", q, s))
	}
}

func (f *fetcher) instant(ctx context.Context, q string, at time.Time) (model.Vector, error) {
	v, err := f.query(q, "vector", func() (model.Value, v1.Warnings, error) {
		v, w, _, err := f.api.Query(ctx, q, at)
		return v, w, err
	})
	vec, _ := v.(model.Vector)
	return vec, err
}

func (f *fetcher) matrix(ctx context.Context, q string) (model.Matrix, error) {
	v, err := f.query(q, "matrix", func() (model.Value, v1.Warnings, error) {
		v, w, _, err := f.api.QueryRange(ctx, q, v1.Range{Start: f.res.Start, End: f.res.End, Step: f.res.Step})
		return v, w, err
	})
	m, _ := v.(model.Matrix)
	return m, err
}

// query runs q with do, records it and its warnings, and checks that the
// answer is of the type want names ("vector", "matrix").
func (f *fetcher) query(q, want string, do func() (model.Value, v1.Warnings, error)) (model.Value, error) {
	f.res.Queries = append(f.res.Queries, q)
	v, w, err := do()
	if err != nil {
		return nil, f.failed(q, err)
	}
	f.warn(q, w)
	if v.Type().String() != want {
		return nil, fmt.Errorf("prometheus %s: query %q: got a %s, want a %s", f.url, q, v.Type(), want)
	}
	return v, nil
}

// Fetch reads the range from Prometheus and builds one Run per node.
func Fetch(ctx context.Context, o Options) (*Result, error) {
	if err := o.Check(); err != nil {
		return nil, err
	}
	api, err := promclient.New(o.URL, o.limits(), o.Transport)
	if err != nil {
		return nil, fmt.Errorf("--prometheus %q: %v", o.URL, err)
	}
	end := o.End
	if end.IsZero() {
		end = time.Now()
	}
	step := o.step()
	// Align the grid to the step so that repeated reports of the same
	// range agree.
	end = end.Truncate(step)
	res := &Result{Start: end.Add(-o.Range), End: end, Step: step}
	f := &fetcher{api: api, url: o.URL, res: res}

	// Samples of CPU 0's irq counter per node over the range: whether
	// there is anything to read at all, and the scrape interval.
	countQ := fmt.Sprintf("count_over_time(%s[%s])", o.metric(MetricIRQ, `cpu="0"`), promDuration(o.Range))
	counts, err := f.instant(ctx, countQ, end)
	if err != nil {
		return nil, err
	}
	if len(counts) == 0 {
		return nil, fmt.Errorf("prometheus %s: no %s samples between %s and %s (query %q): is Prometheus scraping the agents (irqpilot agent --listen), and is --range right?",
			o.URL, MetricIRQ, res.Start.Format(time.RFC3339), end.Format(time.RFC3339), countQ)
	}
	res.Window = o.RateWindow
	if res.Window == 0 {
		scrape, err := f.scrapeInterval(ctx, o, end)
		if err != nil {
			return nil, err
		}
		if scrape == 0 {
			scrape = ScrapeInterval(o.Range, counts)
		}
		res.Window = RateWindow(step, scrape)
	}
	w := promDuration(res.Window)

	names, err := f.nodeNames(ctx, o, end)
	if err != nil {
		return nil, err
	}
	b := newBuilder(res)
	for _, q := range []struct {
		metric string
		add    func(model.Metric, int, float64)
	}{
		{MetricCPUModes, b.addMode},
		{MetricIRQ, func(m model.Metric, i int, v float64) { b.addCPU(m, i, func(c *load.CPUTime) { c.IRQ = v }) }},
		{MetricSoftIRQ, func(m model.Metric, i int, v float64) { b.addCPU(m, i, func(c *load.CPUTime) { c.SoftIRQ = v }) }},
		{MetricQueue, b.addQueue},
	} {
		query := fmt.Sprintf("rate(%s[%s])", o.metric(q.metric), w)
		m, err := f.matrix(ctx, query)
		if err != nil {
			return nil, err
		}
		if len(m) == 0 && q.metric != MetricQueue {
			return nil, fmt.Errorf("prometheus %s: query %q returned no series between %s and %s: do the agents export %s (irqpilot agent's /metrics), and does --rate-window %s cover at least two scrapes?",
				o.URL, query, res.Start.Format(time.RFC3339), end.Format(time.RFC3339), q.metric, w)
		}
		b.add(m, q.add)
	}
	if res.Nodes, err = b.nodeList(names, o.URL); err != nil {
		return nil, err
	}
	return res, nil
}

// nodeNames maps each instance to the host name its agent reports (the
// instance itself when it reports none; "name (instance)" when two
// instances report the same name).
func (f *fetcher) nodeNames(ctx context.Context, o Options, end time.Time) (map[string]string, error) {
	q := fmt.Sprintf("last_over_time(%s[%s])", o.metric(MetricNodeInfo), promDuration(o.Range))
	vec, err := f.instant(ctx, q, end)
	if err != nil {
		return nil, err
	}
	return NodeNames(vec), nil
}

// NodeNames maps instance → node name from irqpilot_node_info samples.
func NodeNames(vec model.Vector) map[string]string {
	names := map[string]string{}
	for _, s := range vec {
		inst, node := string(s.Metric[model.InstanceLabel]), string(s.Metric["nodename"])
		if node == "" {
			continue
		}
		if old, ok := names[inst]; !ok || node < old { // a rename within the range: pick one, stably
			names[inst] = node
		}
	}
	uses := map[string]int{}
	for _, n := range names {
		uses[n]++
	}
	for inst, n := range names {
		if uses[n] > 1 {
			names[inst] = n + " (" + inst + ")"
		}
	}
	return names
}

// scrapeInterval reads CPU 0's raw irq samples of the last (at most) five
// minutes of the range and returns the median time between them (0: too
// few samples there).
func (f *fetcher) scrapeInterval(ctx context.Context, o Options, end time.Time) (time.Duration, error) {
	q := fmt.Sprintf("%s[%s]", o.metric(MetricIRQ, `cpu="0"`), promDuration(min(o.Range, 5*time.Minute)))
	f.res.Queries = append(f.res.Queries, q)
	v, w, _, err := f.api.Query(ctx, q, end)
	if err != nil {
		return 0, f.failed(q, err)
	}
	f.warn(q, w)
	m, ok := v.(model.Matrix)
	if !ok {
		return 0, fmt.Errorf("prometheus %s: query %q: got a %s, want a matrix", f.url, q, v.Type())
	}
	return SampleInterval(m), nil
}

// SampleInterval is the smallest over series of the median time between
// consecutive samples (0: no series has two samples).
func SampleInterval(m model.Matrix) time.Duration {
	best := time.Duration(0)
	for _, s := range m {
		if len(s.Values) < 2 {
			continue
		}
		d := make([]time.Duration, 0, len(s.Values)-1)
		for i := 1; i < len(s.Values); i++ {
			d = append(d, s.Values[i].Timestamp.Time().Sub(s.Values[i-1].Timestamp.Time()))
		}
		sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
		if med := d[len(d)/2]; med > 0 && (best == 0 || med < best) {
			best = med
		}
	}
	return best
}

// ScrapeInterval estimates the scrape interval from count_over_time
// samples over r (the smallest interval of any node; DefaultScrapeInterval
// when there are too few samples to tell).
func ScrapeInterval(r time.Duration, counts model.Vector) time.Duration {
	best := time.Duration(0)
	for _, s := range counts {
		n := float64(s.Value)
		if n < 2 {
			continue
		}
		d := time.Duration(float64(r) / (n - 1))
		if best == 0 || d < best {
			best = d
		}
	}
	if best == 0 {
		return DefaultScrapeInterval
	}
	return best.Round(100 * time.Millisecond)
}

// RateWindow is Grafana's $__rate_interval: max(step + scrape, 4 × scrape),
// long enough that every rate() sees at least two samples, rounded up to
// the second.
func RateWindow(step, scrape time.Duration) time.Duration {
	w := max(step+scrape, 4*scrape)
	if r := w.Round(time.Second); r < w {
		w = r + time.Second
	} else {
		w = r
	}
	return w
}
