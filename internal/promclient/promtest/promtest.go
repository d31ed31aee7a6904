// Package promtest holds the Prometheus servers that tests of the code
// querying Prometheus run against.
package promtest

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
)

// Endless is a server that sends the start of a Prometheus answer and then
// one JSON string without end, counting what it wrote, until its client
// hangs up.
type Endless struct {
	URL   string
	wrote atomic.Int64
	done  chan error
}

// NewEndless starts an Endless server, closed when the test ends.
func NewEndless(t testing.TB) *Endless {
	t.Helper()
	e := &Endless{done: make(chan error, 1)}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		chunk := []byte(strings.Repeat("x", 64<<10))
		n, err := io.WriteString(w, `{"status":"success","data":{"resultType":"vector","result":[{"metric":{"pad":"`)
		e.wrote.Add(int64(n))
		for err == nil {
			n, err = w.Write(chunk)
			e.wrote.Add(int64(n))
		}
		e.done <- err
	}))
	t.Cleanup(srv.Close)
	e.URL = srv.URL
	return e
}

// CheckStopped waits for the server's writes to fail, and fails the test
// if ctx ends first (the client did not hang up) or if the server wrote
// more than limit bytes and the loopback sockets' buffers (a few MiB at
// most) before they failed.
func (e *Endless) CheckStopped(t testing.TB, ctx context.Context, limit int64) {
	t.Helper()
	select {
	case werr := <-e.done:
		t.Logf("server stopped after %d bytes: %v", e.wrote.Load(), werr)
	case <-ctx.Done():
		t.Fatalf("server still writing after %d bytes: the client did not hang up", e.wrote.Load())
	}
	if w := e.wrote.Load(); w > limit+32<<20 {
		t.Errorf("server wrote %d bytes before its writes failed; want at most the limit and the sockets' buffers", w)
	}
}
