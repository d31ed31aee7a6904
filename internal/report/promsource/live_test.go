package promsource_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"image/png"
	"io"
	"math"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"gonum.org/v1/plot/vg"

	"github.com/irqpilot/irqpilot/internal/cpuset"
	"github.com/irqpilot/irqpilot/internal/livetest"
	"github.com/irqpilot/irqpilot/internal/report"
	"github.com/irqpilot/irqpilot/internal/report/promsource"
)

func run(t *testing.T, name string, args ...string) string {
	t.Helper()
	return livetest.Run(t, name, args...)
}

// start runs argv in the background; the cleanup stops it by PID
// (SIGTERM, SIGKILL after 10 s) and shows its output if the test failed.
func start(t *testing.T, what string, argv ...string) {
	t.Helper()
	cmd := exec.Command(argv[0], argv[1:]...)
	logb := &livetest.Buffer{}
	cmd.Stdout, cmd.Stderr = logb, logb
	// Registered before Start's own cleanup, so it runs after the process
	// has stopped and its output is complete.
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("%s output:\n%s", what, logb)
		}
	})
	livetest.Start(t, cmd, 10*time.Second)
}

// freePort is a loopback TCP port nobody listens on right now.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// subnet picks 10.250.X.0/24 with no address of this host in it.
func subnet(t *testing.T) string {
	t.Helper()
	addrs := run(t, "ip", "-4", "-o", "addr", "show")
	routes := run(t, "ip", "-4", "route", "show")
	for i := 0; i < 50; i++ {
		var b [1]byte
		rand.Read(b[:])
		p := fmt.Sprintf("10.250.%d.", b[0])
		if !strings.Contains(addrs, p) && !strings.Contains(routes, p) && !strings.Contains(routes, "10.250.0.0/16") {
			return p
		}
	}
	t.Skip("no free 10.250.X.0/24 subnet")
	return ""
}

// diskActivity writes and fsyncs a file on the real disk (/var/tmp, not a
// tmpfs TMPDIR) until the test ends, so that the disk's queue IRQ fires
// and the IRQ chart has lines.
func diskActivity(t *testing.T) {
	t.Helper()
	dir, err := os.MkdirTemp("/var/tmp", "irqpilot-fsync-")
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(filepath.Join(dir, "fsync.dat"))
	if err != nil {
		t.Fatal(err)
	}
	stop, done := make(chan struct{}), make(chan struct{})
	t.Cleanup(func() { close(stop); <-done; os.RemoveAll(dir) })
	go func() {
		defer close(done)
		defer f.Close()
		buf := bytes.Repeat([]byte("irqpilot"), 512)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			if i%1000 == 0 {
				_ = f.Truncate(0)
			}
			_, _ = f.WriteAt(buf, int64(i%1000)*int64(len(buf)))
			_ = f.Sync()
			time.Sleep(5 * time.Millisecond)
		}
	}()
}

// recorder keeps each Prometheus API answer by its query, for testdata.
type recorder struct {
	mu   sync.Mutex
	resp map[string]json.RawMessage
}

func (r *recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	var form url.Values
	if req.Body != nil {
		b, err := io.ReadAll(req.Body)
		if err != nil {
			return nil, err
		}
		req.Body = io.NopCloser(bytes.NewReader(b))
		form, _ = url.ParseQuery(string(b))
	}
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	resp.Body = io.NopCloser(bytes.NewReader(b))
	q := form.Get("query")
	if q == "" {
		q = req.URL.Query().Get("query")
	}
	r.mu.Lock()
	r.resp[q] = b
	r.mu.Unlock()
	return resp, nil
}

// Three agents, each in a network namespace of its own with its own host
// name (a UTS namespace: unshare --uts + hostname), scraped by a real
// Prometheus over veths; report --prometheus then charts the three nodes
// on one axis. The agents enforce an empty plan (they share this machine's
// IRQs, which three enforcing agents would fight over), so they only
// export metrics. All three see this machine's CPUs (/proc/stat is not
// namespaced): three nodes with every online CPU each.
func TestLiveThreeAgentsPrometheusReport(t *testing.T) {
	livetest.NeedRoot(t, "prometheus", "ip", "unshare")
	prom, err := exec.LookPath("prometheus")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	bin := livetest.Irqpilot(t)
	diskActivity(t)
	plan := filepath.Join(dir, "plan.yaml")
	if err := os.WriteFile(plan, []byte("version: 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}

	var rb [3]byte
	rand.Read(rb[:])
	tag := hex.EncodeToString(rb[:])
	net24 := subnet(t)
	nodes := []string{"irqp-node-a", "irqp-node-b", "irqp-node-c"}
	var targets []string
	for i, node := range nodes {
		ns := fmt.Sprintf("irqp-pr-%s-%d", tag, i)
		livetest.Netns(t, ns)
		hostSide, nsSide := fmt.Sprintf("iqph%s%d", tag[:4], i), fmt.Sprintf("iqpn%s%d", tag[:4], i)
		run(t, "ip", "link", "add", hostSide, "type", "veth", "peer", "name", nsSide, "netns", ns)
		// Deleting the namespace deletes the pair; this covers a failure
		// before that.
		t.Cleanup(func() { exec.Command("ip", "link", "del", hostSide).Run() })
		hostIP, nsIP := fmt.Sprintf("%s%d", net24, 4*i+1), fmt.Sprintf("%s%d", net24, 4*i+2)
		run(t, "ip", "addr", "add", hostIP+"/30", "dev", hostSide)
		run(t, "ip", "link", "set", hostSide, "up")
		run(t, "ip", "-n", ns, "addr", "add", nsIP+"/30", "dev", nsSide)
		run(t, "ip", "-n", ns, "link", "set", nsSide, "up")
		run(t, "ip", "-n", ns, "link", "set", "lo", "up")

		sd := filepath.Join(dir, "state-"+node)
		if err := os.Mkdir(sd, 0o700); err != nil {
			t.Fatal(err)
		}
		listen := nsIP + ":9477"
		// ip netns exec, unshare and sh all exec: the PID start keeps is
		// the agent's.
		start(t, "agent "+node, "ip", "netns", "exec", ns, "unshare", "--uts", "sh", "-c",
			`hostname "$1" && exec "$2" agent --state-dir "$3" --plan "$4" --listen "$5" --interval 1s --log-level warn`,
			"sh", node, bin, sd, plan, listen)
		targets = append(targets, `"`+listen+`"`)
	}

	promPort := freePort(t)
	cfg := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf(`global:
  scrape_interval: 1s
  scrape_timeout: 900ms
scrape_configs:
  - job_name: irqpilot
    static_configs:
      - targets: [%s]
`, strings.Join(targets, ", "))), 0o644); err != nil {
		t.Fatal(err)
	}
	promURL := fmt.Sprintf("http://127.0.0.1:%d", promPort)
	start(t, "prometheus", prom, "--config.file="+cfg, "--storage.tsdb.path="+filepath.Join(dir, "prom-data"),
		fmt.Sprintf("--web.listen-address=127.0.0.1:%d", promPort), "--log.level=warn")

	// Wait (bounded) until Prometheus holds a dozen scrapes of every node.
	ready := url.Values{"query": {`count(count_over_time(irqpilot_node_info[1m]) >= 12)`}}
	deadline := time.Now().Add(40 * time.Second)
	for {
		var body struct {
			Data struct {
				Result []struct {
					Value [2]any `json:"value"`
				} `json:"result"`
			} `json:"data"`
		}
		resp, err := http.Get(promURL + "/api/v1/query?" + ready.Encode())
		if err == nil {
			json.NewDecoder(resp.Body).Decode(&body)
			resp.Body.Close()
			if r := body.Data.Result; len(r) == 1 && r[0].Value[1] == "3" {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("prometheus %s: three agents with 12 scrapes each not after 40s (last error %v)", promURL, err)
		}
		time.Sleep(500 * time.Millisecond)
	}

	out := filepath.Join(dir, "fleet.png")
	rep := exec.Command(bin, "report", "--prometheus", promURL, "--range", "1m", "--step", "2s", "-o", out)
	if b, err := rep.CombinedOutput(); err != nil || !strings.Contains(string(b), "3 node(s)") {
		t.Fatalf("report --prometheus: %v\n%s", err, b)
	} else {
		t.Logf("%s", bytes.TrimSpace(b))
	}

	// The series behind the charts: three nodes, named by their host
	// names, each with every online CPU.
	rec := &recorder{resp: map[string]json.RawMessage{}}
	opts := promsource.Options{URL: promURL, Range: time.Minute, Step: 2 * time.Second, Transport: rec}
	res, err := promsource.Fetch(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	runs := runsOf(t, res)
	online, err := os.ReadFile("/sys/devices/system/cpu/online")
	if err != nil {
		t.Fatal(err)
	}
	cpus, err := cpuset.Parse(strings.TrimSpace(string(online)))
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != 3 {
		t.Fatalf("%d nodes, want 3", len(runs))
	}
	for i, r := range runs {
		if r.Host != nodes[i] {
			t.Errorf("node %d is %q, want %q", i, r.Host, nodes[i])
		}
		if fmt.Sprint(r.CPUs) != fmt.Sprint(cpus.CPUs()) {
			t.Errorf("%s: CPUs %v, want the online CPUs %v", r.Host, r.CPUs, cpus.CPUs())
		}
		points := 0
		for _, l := range r.Loads {
			if len(l.CPUs) == cpus.Len() {
				points++
			}
		}
		if points < 3 {
			t.Errorf("%s: %d of %d points have every CPU, want at least 3", r.Host, points, len(r.Loads))
		}
		for _, m := range r.MeanCPUs() {
			if sum := m.User + m.System + m.IRQ + m.SoftIRQ + m.Others() + m.Idle; math.Abs(sum-100) > 0.5 {
				t.Errorf("%s cpu%d: modes add up to %.2f %%, want 100", r.Host, m.ID, sum)
			}
		}
	}
	if res.Window < 2*time.Second || res.Window > 10*time.Second {
		t.Errorf("rate window %s for a 1s scrape interval and a 2s step, want 4s–10s", res.Window)
	}

	// The PNG: decodes, 10 in at 96 dpi wide, as high as the fleet charts.
	f, err := os.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("%s: %v", out, err)
	}
	charts, err := report.FleetCharts(runs, report.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var h float64
	for _, c := range charts {
		h += float64(c.Height / vg.Inch)
	}
	if b := img.Bounds(); b.Dx() != 960 || math.Abs(float64(b.Dy())-h*report.DPI) > 1 {
		t.Errorf("png %dx%d, want 960x%.0f", b.Dx(), b.Dy(), h*report.DPI)
	}
	if keep := os.Getenv("PROMSOURCE_KEEP_PNG"); keep != "" {
		b, _ := os.ReadFile(out)
		os.WriteFile(keep, b, 0o644)
	}
	// PROMSOURCE_RECORD=file keeps Prometheus's answers for the offline
	// test (testdata/three-nodes.json).
	if path := os.Getenv("PROMSOURCE_RECORD"); path != "" {
		b, err := json.MarshalIndent(recording{End: res.End, Range: "1m", Step: "2s", Responses: rec.resp}, "", " ")
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// recording is testdata/*.json: Prometheus's answers to one Fetch, by query.
type recording struct {
	End       time.Time                  `json:"end"`
	Range     string                     `json:"range"`
	Step      string                     `json:"step"`
	Responses map[string]json.RawMessage `json:"responses"`
}

// TestMain removes the binary the live test built.
func TestMain(m *testing.M) {
	code := m.Run()
	livetest.RemoveBuilt()
	os.Exit(code)
}
