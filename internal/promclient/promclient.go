// Package promclient is the one way irqpilot asks a Prometheus server:
// client_golang's API client with every answer bounded in size and in time.
//
// client_golang reads a whole answer into memory and has no limit of its
// own, so a server (or anything listening at the URL) that streams without
// end would fill the process. Here each answer's body fails as soon as it
// passes its size limit, and each request, body included, fails when it
// takes longer than its time limit; both errors name the limit.
package promclient

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/api"
	v1 "github.com/prometheus/client_golang/api/prometheus/v1"
)

// Limits bound one answer.
type Limits struct {
	// MaxBytes is the largest answer body read (must be positive).
	MaxBytes int64
	// Timeout bounds one request from sending it to the answer's last
	// byte (zero: no bound but the caller's context).
	Timeout time.Duration
}

// TooLargeError is an answer that passed Limits.MaxBytes.
type TooLargeError struct{ Limit int64 }

func (e *TooLargeError) Error() string {
	return fmt.Sprintf("prometheus answer larger than the limit of %s", Size(e.Limit))
}

// TimeoutError is an answer not complete within Limits.Timeout.
type TimeoutError struct{ Limit time.Duration }

func (e *TimeoutError) Error() string {
	return fmt.Sprintf("prometheus answer not complete within the limit of %s", e.Limit)
}

// Size formats n bytes as "64 MiB", "1.5 KiB" or "300 bytes".
func Size(n int64) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}

// New returns an API client for the server at address whose answers are
// bounded by l. rt is the transport (nil: http.DefaultTransport).
func New(address string, l Limits, rt http.RoundTripper) (v1.API, error) {
	if l.MaxBytes <= 0 {
		return nil, fmt.Errorf("prometheus answer limit %d: must be positive", l.MaxBytes)
	}
	if rt == nil {
		rt = http.DefaultTransport
	}
	c, err := api.NewClient(api.Config{Address: address, RoundTripper: &Transport{RT: rt, Limits: l}})
	if err != nil {
		return nil, err
	}
	return v1.NewAPI(c), nil
}

// Transport bounds every answer of RT by Limits.
type Transport struct {
	RT     http.RoundTripper
	Limits Limits
}

// RoundTrip sends r with the time limit on its context and returns the
// answer with its body bounded.
func (t *Transport) RoundTrip(r *http.Request) (*http.Response, error) {
	ctx, cancel := r.Context(), context.CancelFunc(func() {})
	if t.Limits.Timeout > 0 {
		ctx, cancel = context.WithTimeoutCause(ctx, t.Limits.Timeout, &TimeoutError{Limit: t.Limits.Timeout})
	}
	resp, err := t.RT.RoundTrip(r.WithContext(ctx))
	if err != nil {
		err = timedOut(ctx, err)
		cancel()
		return nil, err
	}
	resp.Body = &body{rc: resp.Body, left: t.Limits.MaxBytes, limit: t.Limits.MaxBytes, ctx: ctx, cancel: cancel}
	return resp, nil
}

// timedOut is err, or the TimeoutError when ctx ended by the time limit.
func timedOut(ctx context.Context, err error) error {
	var te *TimeoutError
	if ctx.Err() != nil && errors.As(context.Cause(ctx), &te) {
		return te
	}
	return err
}

// body fails a read past its limit, where io.LimitReader would end the
// body quietly and leave a truncated answer to the decoder.
type body struct {
	rc     io.ReadCloser
	left   int64
	limit  int64
	ctx    context.Context
	cancel context.CancelFunc
}

func (b *body) Read(p []byte) (int, error) {
	if b.left <= 0 {
		// More than the limit, or exactly it: one byte more tells.
		var one [1]byte
		n, err := b.rc.Read(one[:])
		if n > 0 {
			return 0, &TooLargeError{Limit: b.limit}
		}
		return 0, b.failed(err)
	}
	n, err := b.rc.Read(p[:min(int64(len(p)), b.left)])
	b.left -= int64(n)
	return n, b.failed(err)
}

func (b *body) failed(err error) error {
	if err == nil || err == io.EOF {
		return err
	}
	return timedOut(b.ctx, err)
}

func (b *body) Close() error {
	defer b.cancel()
	return b.rc.Close()
}
