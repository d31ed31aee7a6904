package promclient

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/irqpilot/irqpilot/internal/promclient/promtest"
)

// An answer that never ends fails at the size limit with an error that
// names it, and the client stops reading: the server's writes fail after
// the limit and at most the sockets' buffers more.
func TestEndlessAnswerStopsAtLimit(t *testing.T) {
	srv := promtest.NewEndless(t)
	const limit = 1 << 20
	api, err := New(srv.URL, Limits{MaxBytes: limit}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, _, _, err = api.Query(ctx, "up", time.Now())
	var tl *TooLargeError
	if !errors.As(err, &tl) || tl.Limit != limit || !strings.Contains(err.Error(), "limit of 1 MiB") {
		t.Fatalf("endless answer: %v; want a TooLargeError naming 1 MiB", err)
	}
	srv.CheckStopped(t, ctx, limit)
}

// An answer that trickles fails at the time limit with an error that
// names it, whether the headers or the body are slow.
func TestSlowAnswerStopsAtTimeLimit(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.FormValue("query") == "headers" {
			select {
			case <-release:
			case <-r.Context().Done():
			}
			return
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"status":"success","data":{"resultType":"vector","result":[`)
		w.(http.Flusher).Flush()
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	const limit = 300 * time.Millisecond
	api, err := New(srv.URL, Limits{MaxBytes: 1 << 20, Timeout: limit}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{"headers", "body"} {
		_, _, _, err := api.Query(context.Background(), q, time.Now())
		var te *TimeoutError
		if !errors.As(err, &te) || te.Limit != limit || !strings.Contains(err.Error(), "within the limit of 300ms") {
			t.Errorf("slow %s: %v; want a TimeoutError naming 300ms", q, err)
		}
	}
}

// An answer of exactly the limit is read whole; one byte more is refused.
func TestAnswerAtLimit(t *testing.T) {
	answer := `{"status":"success","data":{"resultType":"vector","result":[]}}`
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, answer)
	}))
	defer srv.Close()
	for _, c := range []struct {
		limit int64
		ok    bool
	}{{int64(len(answer)), true}, {int64(len(answer) - 1), false}} {
		api, err := New(srv.URL, Limits{MaxBytes: c.limit}, nil)
		if err != nil {
			t.Fatal(err)
		}
		_, _, _, err = api.Query(context.Background(), "up", time.Now())
		if (err == nil) != c.ok {
			t.Errorf("limit %d for an answer of %d bytes: %v", c.limit, len(answer), err)
		}
	}
	if _, err := New(srv.URL, Limits{}, nil); err == nil {
		t.Error("a zero size limit was accepted")
	}
}

func TestSize(t *testing.T) {
	for n, want := range map[int64]string{64 << 20: "64 MiB", 3 << 19: "1.5 MiB", 4 << 10: "4 KiB", 300: "300 bytes"} {
		if got := Size(n); got != want {
			t.Errorf("Size(%d) = %q, want %q", n, got, want)
		}
	}
}
