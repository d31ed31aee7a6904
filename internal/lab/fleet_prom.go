package lab

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// FleetPrometheusPort is where the fleet's Prometheus server listens, on
// the bridge's address inside the fleet's namespace (never on the host's
// own interfaces).
const FleetPrometheusPort = 9090

// Prometheus is Debian's Prometheus server (/usr/bin/prometheus) scraping
// a fleet's agents from inside the fleet's namespace, with its own data
// directory. It is started and stopped by PID.
type Prometheus struct {
	// URL is the server's address, reachable inside the fleet's namespace
	// (Fleet.Command, Fleet.HTTPClient).
	URL string
	// Dir holds the configuration, the data and the server's log.
	Dir  string
	f    *Fleet
	cmd  *exec.Cmd
	done chan struct{}
}

// StartPrometheus writes a configuration with the guests' agents at
// Addr:port as static targets (job "irqpilot", scraped every scrape), starts
// the server in dir and waits until it is ready.
func (f *Fleet) StartPrometheus(ctx context.Context, dir string, port int, scrape time.Duration) (*Prometheus, error) {
	var targets []string
	for _, g := range f.Guests {
		targets = append(targets, fmt.Sprintf("%q", net.JoinHostPort(g.Addr, fmt.Sprint(port))))
	}
	conf := fmt.Sprintf(`global:
  scrape_interval: %s
  scrape_timeout: %s
scrape_configs:
  - job_name: irqpilot
    static_configs:
      - targets: [%s]
`, scrape, scrape, strings.Join(targets, ", "))
	if err := os.MkdirAll(filepath.Join(dir, "data"), 0o755); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(conf), 0o644); err != nil {
		return nil, err
	}
	p := &Prometheus{URL: fmt.Sprintf("http://%s:%d", FleetGateway, FleetPrometheusPort), Dir: dir, f: f}
	return p, p.Start(ctx)
}

// Start starts the server (again, on the same data) and waits until it
// answers /-/ready.
func (p *Prometheus) Start(ctx context.Context) error {
	if p.cmd != nil {
		return fmt.Errorf("prometheus already runs (pid %d)", p.PID())
	}
	log, err := os.OpenFile(filepath.Join(p.Dir, "prometheus.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer log.Close()
	// ip netns exec execs the server: the PID is the server's.
	cmd := exec.Command("ip", "netns", "exec", p.f.Namespace, "/usr/bin/prometheus",
		"--config.file="+filepath.Join(p.Dir, "prometheus.yml"),
		"--storage.tsdb.path="+filepath.Join(p.Dir, "data"),
		"--storage.tsdb.retention.time=1d",
		fmt.Sprintf("--web.listen-address=%s:%d", FleetGateway, FleetPrometheusPort))
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} // goes with a killed fleet run
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("prometheus (Debian's prometheus package): %w", err)
	}
	p.cmd, p.done = cmd, make(chan struct{})
	go func() { _ = cmd.Wait(); close(p.done) }()
	c := p.f.HTTPClient()
	for {
		resp, err := c.Get(p.URL + "/-/ready")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-p.done:
			b, _ := os.ReadFile(filepath.Join(p.Dir, "prometheus.log"))
			p.cmd = nil
			return fmt.Errorf("prometheus ended at start:\n%s", tail(string(b), 2000))
		case <-ctx.Done():
			_ = p.Stop()
			return fmt.Errorf("prometheus not ready at %s: %w", p.URL, ctx.Err())
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// PID is the running server's process id (0: not running).
func (p *Prometheus) PID() int {
	if p.cmd == nil {
		return 0
	}
	return p.cmd.Process.Pid
}

// Stop ends the server by its PID: SIGTERM (it flushes its head block),
// SIGKILL after 30 s.
func (p *Prometheus) Stop() error {
	if p.cmd == nil {
		return nil
	}
	defer func() { p.cmd = nil }()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		return err
	}
	select {
	case <-p.done:
		return nil
	case <-time.After(30 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
		return fmt.Errorf("prometheus (pid %d) ignored SIGTERM for 30 s: killed", p.cmd.Process.Pid)
	}
}

// HTTPClient is an HTTP client whose connections are made inside the
// fleet's namespace (to the guests and the fleet's Prometheus).
func (f *Fleet) HTTPClient() *http.Client {
	tr := &http.Transport{
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			var c net.Conn
			err := f.inNamespace(func() error {
				var err error
				c, err = (&net.Dialer{Timeout: 10 * time.Second}).DialContext(ctx, network, addr)
				return err
			})
			return c, err
		},
		DisableKeepAlives: true,
	}
	return &http.Client{Transport: tr, Timeout: time.Minute}
}

// memcachedLoad is one load generator (Debian's memcaslap) against one
// guest's memcached, run inside the fleet's namespace: the host's side of
// the bridge.
type memcachedLoad struct {
	cmd  *exec.Cmd
	out  bytes.Buffer
	done chan struct{}
}

// StartLoad starts one memcaslap per guest against its memcached, each
// asking for ktps thousand operations per second over conc connections,
// reconnecting when a guest goes away, for d. StopLoad ends them.
func (f *Fleet) StartLoad(ktps, conc int, d time.Duration) error {
	for _, g := range f.Guests {
		l := &memcachedLoad{done: make(chan struct{})}
		l.cmd = f.Command(context.Background(), "memcaslap", "-s", net.JoinHostPort(g.Addr, "11211"),
			"-T", "1", "-c", fmt.Sprint(conc), "-P", fmt.Sprintf("%dk", ktps), "-R", "-t", fmt.Sprintf("%ds", int(d.Seconds())))
		l.cmd.Stdout, l.cmd.Stderr = &l.out, &l.out
		if err := l.cmd.Start(); err != nil {
			f.StopLoad(0)
			return fmt.Errorf("memcaslap (Debian's libmemcached-tools): %w", err)
		}
		go func() { _ = l.cmd.Wait(); close(l.done) }()
		f.loads = append(f.loads, l)
	}
	return nil
}

// StopLoad gives the load generators grace to finish (they print their
// summary then), ends the rest by PID, and returns the tail of what each
// printed.
func (f *Fleet) StopLoad(grace time.Duration) []string {
	var out []string
	deadline := time.After(grace)
	for _, l := range f.loads {
		select {
		case <-l.done:
		case <-deadline:
			_ = l.cmd.Process.Signal(syscall.SIGINT)
			select {
			case <-l.done:
			case <-time.After(10 * time.Second):
				_ = l.cmd.Process.Kill()
				<-l.done
			}
		}
		out = append(out, tail(l.out.String(), 600))
	}
	f.loads = nil
	return out
}
