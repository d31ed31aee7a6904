package agent

import (
	"errors"
	"log/slog"
	"net"
	"net/http"
	"sync"
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
// offered. On the status socket connections beyond the cap wait in the
// kernel's backlog, costing the agent nothing; on the metrics listener a
// fresh connection takes the slot of the one idle longest
// (evictingListener), so idle connections cannot starve a scrape. The
// timeouts free a slot a client feeds slowly.
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

// metricsServer is the HTTP server for handler on ln, with the timeouts
// and the header limit above, and the listener to serve: at most limit
// connections held, where one that is idle (no request yet, or between
// keep-alive requests) is closed, the longest idle first, to make room
// for a fresh one. Connections beyond the cap never wait behind idle ones
// (4,000 idle connections from any local user made every real scrape time
// out when they waited in the kernel's backlog), and a request being
// served is never cut.
func metricsServer(handler http.Handler, ln net.Listener, limit int, log *slog.Logger) (*http.Server, net.Listener) {
	el := &evictingListener{Listener: ln, limit: limit, conns: map[net.Conn]*connSlot{}, free: make(chan struct{}, 1)}
	srv := &http.Server{Handler: handler,
		ReadHeaderTimeout: metricsReadHeaderTimeout, ReadTimeout: metricsReadTimeout,
		WriteTimeout: metricsWriteTimeout, IdleTimeout: metricsIdleTimeout,
		MaxHeaderBytes: metricsMaxHeader,
		ConnState:      el.state,
		ErrorLog:       slog.NewLogLogger(log.Handler(), slog.LevelDebug)}
	return srv, &guardedListener{Listener: el, what: "metrics listener", log: log, sleep: time.Sleep}
}

// evictingListener holds at most limit connections; at the cap it closes
// the connection idle longest (http.StateNew or StateIdle) for the next,
// and when every connection is serving a request it waits for one to end.
type evictingListener struct {
	net.Listener
	limit int
	mu    sync.Mutex
	conns map[net.Conn]*connSlot
	seq   uint64
	free  chan struct{} // a slot freed (buffered: one wake-up)
}

// connSlot is one held connection: its state and since when (a sequence
// number: the lowest is idle longest).
type connSlot struct {
	state http.ConnState
	since uint64
}

func (l *evictingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	for !l.admit(c) {
		select {
		case <-l.free:
		case <-time.After(100 * time.Millisecond):
		}
	}
	return c, nil
}

// admit makes room for c and holds it, or reports that every held
// connection is serving a request.
func (l *evictingListener) admit(c net.Conn) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.conns) >= l.limit {
		var victim net.Conn
		var oldest uint64
		for vc, s := range l.conns {
			if (s.state == http.StateNew || s.state == http.StateIdle) && (victim == nil || s.since < oldest) {
				victim, oldest = vc, s.since
			}
		}
		if victim == nil {
			return false
		}
		victim.Close() // its ConnState(StateClosed) finds it gone
		delete(l.conns, victim)
	}
	l.seq++
	l.conns[c] = &connSlot{state: http.StateNew, since: l.seq}
	return true
}

// state is the server's ConnState hook.
func (l *evictingListener) state(c net.Conn, st http.ConnState) {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.conns[c]
	if s == nil {
		return
	}
	switch st {
	case http.StateClosed, http.StateHijacked:
		delete(l.conns, c)
		select {
		case l.free <- struct{}{}:
		default:
		}
	default:
		if st != s.state {
			l.seq++
			s.state, s.since = st, l.seq
		}
	}
}
