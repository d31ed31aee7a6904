package agent

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"testing"
	"time"
)

// Idle connections cannot starve a scrape: with the cap held many times
// over by connections that sent nothing and by keep-alive connections
// left idle after one request, a real scrape is still answered, well
// within a probe's timeout, because the listener closes the longest-idle
// connection to make room for a fresh one.
func TestMetricsScrapeBesideIdleConnections(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	const limit = 4
	mux := http.NewServeMux()
	mux.HandleFunc("/metrics", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "up 1\n") })
	srv, sl := metricsServer(mux, ln, limit, quiet())
	go srv.Serve(sl)
	defer srv.Close()
	addr := ln.Addr().String()

	var idle []net.Conn
	defer func() {
		for _, c := range idle {
			c.Close()
		}
	}()
	// Keep-alive connections that made one request and stay open.
	for range 3 * limit {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		idle = append(idle, c)
		fmt.Fprintf(c, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		if resp, err := http.ReadResponse(bufio.NewReader(c), nil); err == nil {
			resp.Body.Close()
		}
	}
	// Connections that never send a header, opened from a goroutine while
	// the scrape is made.
	stop := make(chan struct{})
	flooded := make(chan []net.Conn)
	go func() {
		var cs []net.Conn
		defer func() { flooded <- cs }()
		for len(cs) < 20*limit {
			select {
			case <-stop:
				return
			default:
			}
			c, err := net.Dial("tcp", addr)
			if err != nil {
				return
			}
			cs = append(cs, c)
		}
	}()
	time.Sleep(100 * time.Millisecond)

	client := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	for i := range 3 {
		resp, err := client.Get("http://" + addr + "/metrics")
		if err != nil {
			t.Fatalf("scrape %d beside %d idle connections (cap %d): %v", i, len(idle)+20*limit, limit, err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if string(b) != "up 1\n" {
			t.Fatalf("scrape %d: %q", i, b)
		}
	}
	close(stop)
	idle = append(idle, <-flooded...)
}
