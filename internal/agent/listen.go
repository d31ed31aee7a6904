package agent

import (
	"errors"
	"log/slog"
	"net"
	"net/http"
	"syscall"
	"time"

	"golang.org/x/net/netutil"
)

// What a local user can make the agent hold. The agent runs as root and
// listens on loopback (metrics) and on a root-only socket (status); any
// local user can open metrics connections. Every connection costs a file
// descriptor and a goroutine, so both listeners are capped far below the
// descriptor limit: the enforcement pass (the files it holds, journals,
// netlink) keeps fdReserve descriptors however many connections are
// offered, and connections beyond the cap wait in the kernel's backlog,
// costing the agent nothing. The timeouts free a slot a client holds idle
// or feeds slowly.
const (
	// maxMetricsConns: Prometheus scrapes over one connection; a few
	// more are for people and a second scraper.
	maxMetricsConns = 32
	// maxStatusConns: `irqpilot status` opens one connection per run.
	maxStatusConns = 8
	// fdReserve descriptors stay for the enforcement pass.
	fdReserve = 512
	// statusDeadline bounds one status connection, start to end.
	statusDeadline = 5 * time.Second

	metricsReadHeaderTimeout = 5 * time.Second
	metricsReadTimeout       = 10 * time.Second
	// metricsWriteTimeout leaves a large host's scrape time to finish.
	metricsWriteTimeout = 30 * time.Second
	// metricsIdleTimeout is above Prometheus' default 15 s scrape interval,
	// so a scraper's keep-alive connection is reused.
	metricsIdleTimeout = 30 * time.Second
	metricsMaxHeader   = 8 << 10

	acceptBackoffMin = 5 * time.Millisecond
	acceptBackoffMax = time.Second
)

// fdLimits raises the soft RLIMIT_NOFILE to the hard limit (the Go runtime
// does so at start too; this states the agent relies on it) and returns
// the connection caps that leave fdReserve descriptors free.
func fdLimits() (limit uint64, metricsCap, statusCap int) {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		return 0, maxMetricsConns, maxStatusConns
	}
	if rl.Cur < rl.Max {
		raised := rl
		raised.Cur = rl.Max
		if syscall.Setrlimit(syscall.RLIMIT_NOFILE, &raised) == nil {
			rl = raised
		}
	}
	metricsCap, statusCap = connCaps(rl.Cur)
	return rl.Cur, metricsCap, statusCap
}

// connCaps splits what the descriptor limit leaves above the reserve
// between the two listeners, at most their caps and at least one each.
func connCaps(limit uint64) (metricsCap, statusCap int) {
	avail := 0
	if limit > fdReserve {
		avail = int(min(limit-fdReserve, 1<<20))
	}
	return max(1, min(maxMetricsConns, avail*3/4)), max(1, min(maxStatusConns, avail/4))
}

// guardedListener caps the connections a listener holds open and never
// ends on an Accept error: net/http retries only errors it deems
// temporary, and a status loop that returned on its first EMFILE would
// never answer again. Errors other than the listener being closed are
// retried with a backoff doubling from 5 ms to 1 s, logged once per run
// of failures.
type guardedListener struct {
	net.Listener
	what  string
	log   *slog.Logger
	sleep func(time.Duration) // time.Sleep; tests count the backoff
}

func guard(ln net.Listener, limit int, what string, log *slog.Logger) *guardedListener {
	return &guardedListener{Listener: netutil.LimitListener(ln, limit), what: what, log: log, sleep: time.Sleep}
}

func (l *guardedListener) Accept() (net.Conn, error) {
	var delay time.Duration
	failures := 0
	for {
		c, err := l.Listener.Accept()
		if err == nil {
			if failures > 0 {
				l.log.Info(l.what+": accepting connections again", "failed_accepts", failures)
			}
			return c, nil
		}
		if errors.Is(err, net.ErrClosed) {
			return nil, err
		}
		if failures == 0 {
			l.log.Warn(l.what+": accept failed; retrying", "error", err)
		}
		failures++
		delay = min(max(2*delay, acceptBackoffMin), acceptBackoffMax)
		l.sleep(delay)
	}
}

// metricsServer is the HTTP server for handler with the timeouts and the
// header limit above (the connection cap is the listener's: guard).
func metricsServer(handler http.Handler, log *slog.Logger) *http.Server {
	return &http.Server{Handler: handler,
		ReadHeaderTimeout: metricsReadHeaderTimeout, ReadTimeout: metricsReadTimeout,
		WriteTimeout: metricsWriteTimeout, IdleTimeout: metricsIdleTimeout,
		MaxHeaderBytes: metricsMaxHeader,
		ErrorLog:       slog.NewLogLogger(log.Handler(), slog.LevelDebug)}
}
