package agent

import (
	"context"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/common/model"

	"github.com/irqpilot/irqpilot/internal/program"
	"github.com/irqpilot/irqpilot/internal/promclient"
)

// maxMetricOutput bounds what the agent keeps of the metric command's
// output: one number needs a few bytes; a command that prints without end
// is cut off rather than held in the root process's memory.
const maxMetricOutput = 4 << 10

// capped keeps at most maxMetricOutput bytes and notes that more came.
type capped struct {
	b    []byte
	over bool
}

func (c *capped) Write(p []byte) (int, error) {
	if len(c.b)+len(p) > maxMetricOutput {
		c.over = true
	}
	if room := maxMetricOutput - len(c.b); room > 0 {
		c.b = append(c.b, p[:min(room, len(p))]...)
	}
	return len(p), nil
}

// runMetricCommand runs the command and returns its standard output, at
// most maxMetricOutput bytes of it.
//
// It runs in /bin/sh through the machine's runner, in a process group of
// its own (program.Group) killed whole when ctx ends, so a child the shell
// left behind, "sleep 15; echo 5", cannot hold the output pipe open and
// keep the agent, its lock and `irqpilot status` waiting.
func runMetricCommand(ctx context.Context, r program.Runner, command string) ([]byte, error) {
	cmd := program.Group(r.Command(ctx, "/bin/sh", "-c", command))
	out := &capped{}
	cmd.Stdout = out
	if err := cmd.Run(); err != nil {
		return nil, err
	}
	if out.over {
		return nil, fmt.Errorf("printed more than %d bytes; want one number", maxMetricOutput)
	}
	return out.b, nil
}

// maxPromAnswer bounds the Prometheus answer the agent reads: one sample
// needs a few hundred bytes. The agent is a long-running root process, and
// a query that matches a huge answer fails rather than filling it.
const maxPromAnswer = 1 << 20

// promInstantQuery splits an instant query URL
// (http://host:9090/api/v1/query?query=…) into the server's address, for
// client_golang's API client, and the PromQL expression. The query is
// evaluated at the time it is asked; other parameters are not sent.
func promInstantQuery(raw string) (addr, expr string, err error) {
	u, err := url.Parse(raw)
	if err != nil {
		return "", "", err
	}
	base, ok := strings.CutSuffix(u.Path, "/api/v1/query")
	expr = u.Query().Get("query")
	if !ok || expr == "" {
		return "", "", fmt.Errorf("%q is not a Prometheus instant query URL (…/api/v1/query?query=…)", raw)
	}
	u.Path, u.RawPath, u.RawQuery, u.Fragment = base, "", "", ""
	return u.String(), expr, nil
}

// promValue asks Prometheus (client_golang's API client, the one
// `irqpilot report --prometheus` uses) the instant query rawURL names and
// returns its single sample's value.
func promValue(ctx context.Context, rawURL string) (float64, error) {
	addr, expr, err := promInstantQuery(rawURL)
	if err != nil {
		return 0, err
	}
	c, err := promclient.New(addr, promclient.Limits{MaxBytes: maxPromAnswer}, nil)
	if err != nil {
		return 0, err
	}
	v, _, _, err := c.Query(ctx, expr, time.Now())
	if err != nil {
		return 0, fmt.Errorf("prometheus query failed: %w", err)
	}
	vec, ok := v.(model.Vector)
	if !ok {
		return 0, fmt.Errorf("prometheus query returned a %s; the metric query must return one series", v.Type())
	}
	if len(vec) != 1 {
		return 0, fmt.Errorf("prometheus query returned %d series; the metric query must return exactly one", len(vec))
	}
	return float64(vec[0].Value), nil
}

var errNoMetric = fmt.Errorf("no user metric")

// userMetric reads the user's metric: a command's output or a Prometheus
// instant query's single value.
func (ag *Agent) userMetric() (float64, error) {
	o := ag.adapt.o
	ctx, cancel := context.WithTimeout(context.Background(), max(ag.o.Interval/2, time.Second))
	defer cancel()
	switch {
	case o.MetricCommand != "":
		out, err := runMetricCommand(ctx, ag.o.FS.Programs(), o.MetricCommand)
		if err != nil {
			return 0, fmt.Errorf("metric command %q: %w", o.MetricCommand, err)
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(string(out)), 64)
		if err != nil {
			return 0, fmt.Errorf("metric command %q printed %q, not a number", o.MetricCommand, strings.TrimSpace(string(out)))
		}
		return v, nil
	case o.MetricQuery != "":
		return promValue(ctx, o.MetricQuery)
	}
	return 0, errNoMetric
}
