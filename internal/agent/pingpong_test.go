package agent

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/irqpilot/irqpilot/internal/kernel"
	"github.com/irqpilot/irqpilot/internal/livetest"
)

// A setting changed back until it is frozen: the log line, status (what
// `irqpilot status` prints) and the drift-repairs metric give the same
// count of repairs.
func TestPingPongCountsAgree(t *testing.T) {
	root := genHost(t)
	fs := kernel.New(root)
	rps := filepath.Join(root, "sys/class/net/eth0/queues/rx-0/rps_cpus")
	pf := writePlan(t, rpsPlanText("3"))
	var log livetest.Buffer
	const limit = 3
	ag := newTestAgent(t, Options{FS: fs, PlanFile: pf, Interval: time.Second,
		Log: slog.New(slog.NewTextHandler(&log, nil)), PingPongLimit: limit, PingPongWindow: time.Minute})
	withMetrics(t, ag)
	ag.pass("start")
	for i := 0; i < limit+2; i++ {
		if err := os.WriteFile(rps, []byte("1\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		ag.pass("test")
	}
	st := ag.Status()
	if len(st.Frozen) != 1 {
		t.Fatalf("frozen %+v, want eth0 rx-0's rps_cpus", st.Frozen)
	}
	f := st.Frozen[0]
	logged := regexp.MustCompile(`msg="ping-pong: setting frozen".* repairs=(\d+)`).FindStringSubmatch(log.String())
	if logged == nil {
		t.Fatalf("no ping-pong log line with repairs=:\n%s", log.String())
	}
	metric := testutil.ToFloat64(ag.m.DriftRepairs.WithLabelValues("rps-cpus", "eth0"))
	n := fmt.Sprint(limit)
	if logged[1] != n || f.Repairs != limit || metric != limit || len(st.Repairs) != limit {
		t.Errorf("repairs: log %s, status %d, metric %v, recent repairs %d; want %d everywhere", logged[1], f.Repairs, metric, len(st.Repairs), limit)
	}
	if !strings.Contains(f.Reason, fmt.Sprintf("repaired %d times", limit)) {
		t.Errorf("status reason %q does not say it was repaired %d times", f.Reason, limit)
	}
	for _, c := range regexp.MustCompile(`(\d+) times`).FindAllStringSubmatch(f.Reason, -1) {
		if c[1] != n {
			t.Errorf("status reason %q counts %s, the log %s", f.Reason, c[1], n)
		}
	}
}
