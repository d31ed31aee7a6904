package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"
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
func runMetricCommand(ctx context.Context, command string) ([]byte, error) {
	cmd := metricCommand(ctx, command)
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

// metricWaitDelay bounds how long the agent waits for the command's output
// pipe after the command was killed.
const metricWaitDelay = time.Second

// metricCommand is --adapt-metric-command run by /bin/sh in a process group
// of its own. When ctx ends the whole group is killed, not only the shell:
// a child the shell left behind ("sleep 15; echo 5") would otherwise hold
// the output pipe open and keep the agent (and its lock, and `irqpilot
// status`) waiting until it exits. WaitDelay stops waiting for the pipe
// even if something escaped the group.
func metricCommand(ctx context.Context, command string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, "/bin/sh", "-c", command)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error {
		return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
	cmd.WaitDelay = metricWaitDelay
	return cmd
}

// PromValue reads the single value of a Prometheus instant query answer
// (/api/v1/query).
func PromValue(r io.Reader) (float64, error) {
	var ans struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			ResultType string `json:"resultType"`
			Result     []struct {
				Value [2]any `json:"value"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := json.NewDecoder(io.LimitReader(r, 1<<20)).Decode(&ans); err != nil {
		return 0, fmt.Errorf("prometheus answer: %w", err)
	}
	if ans.Status != "success" {
		return 0, fmt.Errorf("prometheus query failed: %s", ans.Error)
	}
	if len(ans.Data.Result) != 1 {
		return 0, fmt.Errorf("prometheus query returned %d series; the metric query must return exactly one", len(ans.Data.Result))
	}
	str, ok := ans.Data.Result[0].Value[1].(string)
	if !ok {
		return 0, fmt.Errorf("prometheus answer: value is not a string")
	}
	return strconv.ParseFloat(str, 64)
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
		out, err := runMetricCommand(ctx, o.MetricCommand)
		if err != nil {
			return 0, fmt.Errorf("metric command %q: %w", o.MetricCommand, err)
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(string(out)), 64)
		if err != nil {
			return 0, fmt.Errorf("metric command %q printed %q, not a number", o.MetricCommand, strings.TrimSpace(string(out)))
		}
		return v, nil
	case o.MetricQuery != "":
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, o.MetricQuery, nil)
		if err != nil {
			return 0, err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, err
		}
		defer resp.Body.Close()
		return PromValue(resp.Body)
	}
	return 0, errNoMetric
}
