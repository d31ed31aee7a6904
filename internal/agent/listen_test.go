package agent

import (
	"errors"
	"net"
	"syscall"
	"testing"
	"time"
)

// errListener fails Accept with each of errs in turn, then accepts from
// the real listener.
type errListener struct {
	net.Listener
	errs []error
}

func (l *errListener) Accept() (net.Conn, error) {
	if len(l.errs) > 0 {
		err := l.errs[0]
		l.errs = l.errs[1:]
		return nil, err
	}
	return l.Listener.Accept()
}

// Accept errors, whether net/http would call them temporary (EMFILE) or
// not, are retried with a backoff doubling to a bound; only a closed
// listener ends Accept. (A status loop that returned on its first EMFILE
// never answered again.)
func TestGuardedListenerRetriesAcceptErrors(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var errs []error
	for range 12 {
		errs = append(errs, &net.OpError{Op: "accept", Net: "tcp", Err: syscall.EMFILE})
	}
	errs = append(errs, errors.New("accept: something else"))
	gl := guard(&errListener{Listener: ln, errs: errs}, 2, "test listener", quiet())
	var slept []time.Duration
	gl.sleep = func(d time.Duration) { slept = append(slept, d) }
	go func() {
		if c, err := net.Dial("tcp", ln.Addr().String()); err == nil {
			defer c.Close()
			time.Sleep(time.Second)
		}
	}()
	c, err := gl.Accept()
	if err != nil {
		t.Fatalf("Accept ended on an error it should retry: %v", err)
	}
	c.Close()
	if len(slept) != len(errs) {
		t.Fatalf("backoffs %v, want one per error (%d)", slept, len(errs))
	}
	if slept[0] != acceptBackoffMin || slept[len(slept)-1] != acceptBackoffMax {
		t.Errorf("backoffs %v: want from %s doubling to at most %s", slept, acceptBackoffMin, acceptBackoffMax)
	}
	for i := 1; i < len(slept); i++ {
		if slept[i] != min(2*slept[i-1], acceptBackoffMax) {
			t.Errorf("backoff %d is %s after %s", i, slept[i], slept[i-1])
		}
	}
	ln.Close()
	if _, err := gl.Accept(); !errors.Is(err, net.ErrClosed) {
		t.Errorf("Accept on a closed listener: %v, want net.ErrClosed", err)
	}
}

// The listener holds at most its cap of connections: the next waits in
// the kernel's backlog until one closes.
func TestGuardedListenerCapsConnections(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	gl := guard(ln, 2, "test listener", quiet())
	for range 3 {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
	}
	got := make(chan net.Conn, 3)
	go func() {
		for {
			c, err := gl.Accept()
			if err != nil {
				return
			}
			got <- c
		}
	}()
	a, b := <-got, <-got
	select {
	case c := <-got:
		t.Fatalf("a third connection %v accepted beyond the cap of 2", c.RemoteAddr())
	case <-time.After(300 * time.Millisecond):
	}
	a.Close()
	select {
	case c := <-got:
		c.Close()
	case <-time.After(10 * time.Second):
		t.Fatal("the waiting connection was not accepted after one closed")
	}
	b.Close()
}

// The caps leave fdReserve descriptors free, and one connection each even
// at a tiny limit.
func TestConnCaps(t *testing.T) {
	for _, c := range []struct {
		limit     uint64
		mcap, scp int
	}{
		{1 << 20, maxMetricsConns, maxStatusConns},
		{1024, maxMetricsConns, maxStatusConns},
		{fdReserve + 20, 15, 5},
		{fdReserve, 1, 1},
		{64, 1, 1},
	} {
		m, s := connCaps(c.limit)
		if m != c.mcap || s != c.scp {
			t.Errorf("connCaps(%d) = %d, %d; want %d, %d", c.limit, m, s, c.mcap, c.scp)
		}
	}
}
