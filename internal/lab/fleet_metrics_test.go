package lab

import (
	"bytes"
	"context"
	"fmt"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/model"

	"github.com/irqpilot/irqpilot/internal/promclient"
)

// The fleet's metrics: Debian's Prometheus inside the fleet's namespace
// scrapes every guest's agent at Addr:fleetAgentPort; memcached in every
// guest serves memcaslap from the host's side of the bridge.

const (
	fleetAgentPort = 9477
	fleetScrape    = 5 * time.Second
)

// observePlan is a plan with nothing in it: an agent enforcing it changes
// nothing and exports the metrics, so that the fleet is measured before
// the rollout too.
const observePlan = "version: 1\npolicy: none\nwhy: observe only, nothing to change\n"

// startObservers copies the static irqpilot to every guest (to /run, a
// tmpfs: gone at the next boot) and runs it as a transient unit, an agent
// on observePlan serving metrics where Prometheus scrapes the packaged
// agent later. No package is installed.
func (fx *fleetFixture) startObservers(t *testing.T, bin string) {
	t.Helper()
	b, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range fx.f.Guests {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		cmd := fx.f.Command(ctx, "ssh", "-i", fx.key, "-o", "BatchMode=yes", "-o", "UserKnownHostsFile="+fx.f.KnownHosts,
			"-o", "StrictHostKeyChecking=yes", FleetUser+"@"+g.Addr, "cat > /tmp/irqpilot-observe")
		cmd.Stdin = strings.NewReader(string(b))
		out, err := cmd.CombinedOutput()
		cancel()
		if err != nil {
			t.Fatalf("copying irqpilot to %s: %v\n%s", g.Name, err, out)
		}
		fx.ssh(t, g, fmt.Sprintf(`mkdir -p -m 700 /run/irqpilot-observe &&
install -m 755 /tmp/irqpilot-observe /run/irqpilot-observe/irqpilot && rm /tmp/irqpilot-observe &&
printf '%s' > /run/irqpilot-observe/plan.yaml &&
systemd-run --unit=irqpilot-observe /run/irqpilot-observe/irqpilot agent --plan /run/irqpilot-observe/plan.yaml --listen :%d --state-dir /run/irqpilot-observe/state`,
			strings.ReplaceAll(observePlan, "\n", `\n`), fleetAgentPort))
	}
}

func (fx *fleetFixture) stopObservers(t *testing.T) {
	t.Helper()
	for _, g := range fx.f.Guests {
		fx.ssh(t, g, "systemctl stop irqpilot-observe.service; rm -rf /run/irqpilot-observe")
	}
}

// query is one instant PromQL query's single value.
func (fx *fleetFixture) query(q string) (float64, error) {
	hc := fx.f.HTTPClient()
	c, err := promclient.New(fx.prom.URL, promclient.Limits{MaxBytes: 64 << 20, Timeout: hc.Timeout}, hc.Transport)
	if err != nil {
		return 0, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	v, _, _, err := c.Query(ctx, q, time.Now())
	if err != nil {
		return 0, err
	}
	vec, ok := v.(model.Vector)
	if !ok || len(vec) != 1 {
		return 0, fmt.Errorf("%s: got %v", q, v)
	}
	return float64(vec[0].Value), nil
}

// waitScraped waits until Prometheus has every agent up.
func (fx *fleetFixture) waitScraped(t *testing.T, d time.Duration) {
	t.Helper()
	for start := time.Now(); ; time.Sleep(2 * time.Second) {
		n, err := fx.query(`count(up{job="irqpilot"} == 1)`)
		if err == nil && n == float64(len(fx.f.Guests)) {
			return
		}
		if time.Since(start) > d {
			t.Fatalf("Prometheus does not scrape every agent after %s: %v %v", d, n, err)
		}
	}
}

// loadWindow runs memcaslap against every guest for d and returns the
// window, waiting a rate window at each end so that the window holds only
// loaded intervals.
func (fx *fleetFixture) loadWindow(t *testing.T, name string, d time.Duration) (from, to time.Time) {
	t.Helper()
	settle := 4 * fleetScrape
	if err := fx.f.StartLoad(1, 8, settle+d+5*time.Second); err != nil {
		t.Fatal(err)
	}
	time.Sleep(settle)
	from = time.Now()
	time.Sleep(d)
	to = time.Now()
	for i, out := range fx.f.StopLoad(time.Minute) {
		t.Logf("load %s, %s: %s", name, fx.f.Guests[i].Name, lastLine(out))
	}
	return from, to
}

func lastLine(s string) string {
	l := strings.Split(strings.TrimSpace(s), "\n")
	return l[len(l)-1]
}

// report runs irqpilot report --prometheus inside the fleet's namespace
// over everything Prometheus holds, with the two windows, and returns what
// it printed and the PNG it drew (also kept in $FLEET_EVIDENCE when set).
func (fx *fleetFixture) report(t *testing.T, bin string, since time.Time, before, after [2]time.Time) (string, string) {
	t.Helper()
	dir := os.Getenv("FLEET_EVIDENCE")
	if dir == "" {
		dir = t.TempDir()
	}
	out := filepath.Join(dir, fmt.Sprintf("fleet-%d.png", len(fx.f.Guests)))
	span := func(w [2]time.Time) string {
		return w[0].UTC().Format(time.RFC3339) + "," + w[1].UTC().Format(time.RFC3339)
	}
	rng := time.Since(since).Round(time.Minute) + time.Minute
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := fx.f.Command(ctx, bin, "report", "--prometheus", fx.prom.URL, "--range", rng.String(), "--step", "5s",
		"--before", span(before), "--after", span(after), "--width", "14", "-o", out)
	printed, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("irqpilot report --prometheus: %v\n%s", err, printed)
	}
	drawn, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := png.Decode(bytes.NewReader(drawn)); err != nil {
		t.Fatalf("%s: %v", out, err)
	}
	t.Logf("report: %s (%d bytes)\n%s", out, len(drawn), printed)
	return string(printed), out
}
