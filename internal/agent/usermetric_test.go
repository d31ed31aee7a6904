package agent

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// A metric command that outlives its timeout through a child ("sleep;
// echo") is killed with its whole process group: userMetric returns once
// the timeout fires, not when the child would have ended, and nothing of
// the command is left running.
func TestMetricCommandTimeoutKillsGroup(t *testing.T) {
	pidFile := filepath.Join(t.TempDir(), "pgid")
	const sleep = 60 * time.Second
	ag := &Agent{o: Options{Interval: time.Second},
		adapt: newAdaptState(AdaptOptions{MetricCommand: "echo $$ > " + pidFile + "; sleep " + strconv.Itoa(int(sleep.Seconds())) + "; echo 5"})}
	start := time.Now()
	_, err := ag.userMetric()
	took := time.Since(start)
	if err == nil {
		t.Fatal("a metric command killed by its timeout gave a value")
	}
	// A bound against the old behaviour (waiting out the child), far
	// above the 1 s timeout: not a timing assertion.
	if took > sleep/2 {
		t.Fatalf("userMetric returned after %s: it waited for the command's child (timeout 1s)", took)
	}
	b, rerr := os.ReadFile(pidFile)
	if rerr != nil {
		t.Fatal(rerr)
	}
	pgid := strings.TrimSpace(string(b))
	var left []string
	waitForT(t, func() bool {
		left = groupMembers(t, pgid)
		return len(left) == 0
	})
	t.Logf("returned after %s: %v", took.Round(time.Millisecond), err)
}

// groupMembers lists the live (not zombie) processes in process group pgid.
func groupMembers(t *testing.T, pgid string) []string {
	t.Helper()
	ents, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(s[i+1:])
		// state ppid pgrp ...
		if len(f) > 2 && f[2] == pgid && f[0] != "Z" && f[0] != "X" {
			out = append(out, e.Name())
		}
	}
	return out
}

// A metric command that prints without end is cut off at maxMetricOutput
// and refused; one number passes.
func TestMetricCommandOutputCapped(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := runMetricCommand(ctx, "head -c 1000000 /dev/zero | tr '\\0' 1"); err == nil || !strings.Contains(err.Error(), "printed more than") {
		t.Errorf("a megabyte of output: %v", err)
	}
	out, err := runMetricCommand(ctx, "echo 42")
	if err != nil || strings.TrimSpace(string(out)) != "42" {
		t.Errorf("echo 42: %q %v", out, err)
	}
}

// The Prometheus metric query goes through client_golang's API client to
// a server answering as Prometheus's /api/v1/query does: one series is the
// value; none, an error answer, another result type, an answer over
// maxPromAnswer and a URL that is no instant query are errors that say so.
func TestUserMetricPrometheus(t *testing.T) {
	answers := map[string]string{
		"one":    `{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[1700000000.1,"42.5"]}]}}`,
		"none":   `{"status":"success","data":{"resultType":"vector","result":[]}}`,
		"bad":    `{"status":"error","errorType":"bad_data","error":"parse error at char 4"}`,
		"scalar": `{"status":"success","data":{"resultType":"scalar","result":[1700000000.1,"1"]}}`,
		"huge": `{"status":"success","data":{"resultType":"vector","result":[{"metric":{"pad":"` +
			strings.Repeat("x", maxPromAnswer) + `"},"value":[1700000000.1,"1"]}]}}`,
	}
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := r.ParseForm(); err != nil {
			t.Error(err)
		}
		q := r.Form.Get("query")
		got = append(got, r.URL.Path+" "+q)
		w.Header().Set("Content-Type", "application/json")
		if q == "bad" {
			w.WriteHeader(http.StatusBadRequest)
		}
		io.WriteString(w, answers[q])
	}))
	defer srv.Close()
	ag := &Agent{o: Options{Interval: 10 * time.Second}, adapt: newAdaptState(AdaptOptions{})}
	for _, c := range []struct{ url, err string }{
		{srv.URL + "/api/v1/query?query=one", ""},
		{srv.URL + "/prom/api/v1/query?query=one", ""},
		{srv.URL + "/api/v1/query?query=none", "exactly one"},
		{srv.URL + "/api/v1/query?query=bad", "parse error at char 4"},
		{srv.URL + "/api/v1/query?query=scalar", "returned a scalar"},
		{srv.URL + "/api/v1/query?query=huge", "larger than"},
		{srv.URL + "/api/v1/query_range?query=one", "not a Prometheus instant query URL"},
		{srv.URL + "/api/v1/query", "not a Prometheus instant query URL"},
	} {
		ag.adapt.o.MetricQuery = c.url
		v, err := ag.userMetric()
		switch {
		case c.err == "" && (err != nil || v != 42.5):
			t.Errorf("%s: %v, %v; want 42.5", c.url, v, err)
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
			t.Errorf("%s: %v, %v; want an error saying %q", c.url, v, err, c.err)
		}
	}
	want := []string{"/api/v1/query one", "/prom/api/v1/query one", "/api/v1/query none", "/api/v1/query bad",
		"/api/v1/query scalar", "/api/v1/query huge"}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("queries asked (-want +got):\n%s", d)
	}
}

func TestUserMetricCommand(t *testing.T) {
	ag := &Agent{o: Options{Interval: time.Second}, adapt: newAdaptState(AdaptOptions{MetricCommand: "echo 42.5"})}
	if v, err := ag.userMetric(); err != nil || v != 42.5 {
		t.Fatalf("userMetric = %v, %v", v, err)
	}
	ag.adapt.o.MetricCommand = "echo fast"
	if _, err := ag.userMetric(); err == nil || !strings.Contains(err.Error(), `printed "fast", not a number`) {
		t.Errorf("non-numeric output: %v", err)
	}
	ag.adapt.o.MetricCommand = ""
	if _, err := ag.userMetric(); err != errNoMetric {
		t.Errorf("no metric configured: %v", err)
	}
}
