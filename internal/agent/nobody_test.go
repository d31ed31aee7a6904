package agent

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/vishvananda/netns"

	"github.com/irqpilot/irqpilot/internal/livetest"
)

// The unprivileged side of the live tests: this test binary re-executed as
// nobody (uid/gid 65534), doing what another local user could do to the
// agent. nobodyMode selects what; TestNobodyHelper is the entry point and
// skips in a normal run.
const (
	nobodyEnv   = "IRQPILOT_TEST_NOBODY"
	nobodyUID   = 65534
	modeFlood   = "flood"
	modeFakeSts = "fake-status"
)

// TestNobodyHelper runs only in the child asNobody starts.
func TestNobodyHelper(t *testing.T) {
	mode := os.Getenv(nobodyEnv)
	if mode == "" {
		t.Skip("the unprivileged child of the live tests")
	}
	if os.Geteuid() != nobodyUID {
		fmt.Printf("error: running as uid %d, not nobody\n", os.Geteuid())
		os.Exit(1)
	}
	switch mode {
	case modeFlood:
		n, _ := strconv.Atoi(os.Getenv("FLOOD_CONNS"))
		flood(os.Getenv("FLOOD_ADDR"), n)
	case modeFakeSts:
		fakeStatus(os.Getenv("FAKE_SOCKET"))
	}
	os.Exit(0)
}

// floodResult is what the flooding child reports on stdout.
type floodResult struct {
	Opened   int    `json:"opened"`   // connections established
	Answered int    `json:"answered"` // of those, answered (404) within 1 s
	Failed   int    `json:"failed"`   // dials that failed or timed out
	FirstErr string `json:"first_err,omitempty"`
}

// flood opens n keep-alive connections to addr, sends each `GET /x
// HTTP/1.1` and reads the answer if one comes, reports on stdout, and
// keeps every socket open until stdin closes.
func flood(addr string, n int) {
	var mu sync.Mutex
	var conns []net.Conn
	var res floodResult
	var answered atomic.Int64
	sem := make(chan struct{}, 1000)
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			c, err := net.DialTimeout("tcp", addr, 3*time.Second)
			mu.Lock()
			if err != nil {
				res.Failed++
				if res.FirstErr == "" {
					res.FirstErr = err.Error()
				}
				mu.Unlock()
				return
			}
			conns = append(conns, c)
			mu.Unlock()
			io.WriteString(c, "GET /x HTTP/1.1\r\nHost: x\r\n\r\n")
			c.SetReadDeadline(time.Now().Add(time.Second))
			if l, err := bufio.NewReader(c).ReadString('\n'); err == nil && strings.Contains(l, "404") {
				answered.Add(1)
			}
		}()
	}
	wg.Wait()
	res.Opened, res.Answered = len(conns), int(answered.Load())
	json.NewEncoder(os.Stdout).Encode(res)
	io.Copy(io.Discard, os.Stdin)
	for _, c := range conns {
		c.Close()
	}
}

// fakeStatus answers on socket with a status of its own making.
func fakeStatus(socket string) {
	ln, err := net.Listen("unix", socket)
	if err != nil {
		fmt.Printf("error: %v\n", err)
		os.Exit(1)
	}
	os.Chmod(socket, 0o666)
	fmt.Println("ready")
	go func() { io.Copy(io.Discard, os.Stdin); os.Exit(0) }()
	for {
		c, err := ln.Accept()
		if err != nil {
			os.Exit(1)
		}
		json.NewEncoder(c).Encode(Status{PID: 1, Plan: "FAKE plan from nobody"})
		c.Close()
	}
}

var (
	nobodyBinOnce sync.Once
	nobodyBin     string
	nobodyBinErr  error
)

// nobodyBinary is a copy of this test binary that nobody may execute (go
// test builds it below a directory only root can enter); TestMain
// removes it.
func nobodyBinary(t *testing.T) string {
	t.Helper()
	nobodyBinOnce.Do(func() {
		dir, err := os.MkdirTemp("", "irqp-agentsec-")
		if err != nil {
			nobodyBinErr = err
			return
		}
		os.Chmod(dir, 0o755)
		self, err := os.Executable()
		if err != nil {
			nobodyBinErr = err
			return
		}
		data, err := os.ReadFile(self)
		if err != nil {
			nobodyBinErr = err
			return
		}
		nobodyBin = filepath.Join(dir, "agent.test")
		nobodyBinErr = os.WriteFile(nobodyBin, data, 0o755)
	})
	if nobodyBinErr != nil {
		t.Fatal(nobodyBinErr)
	}
	return nobodyBin
}

func removeNobodyBinary() {
	if nobodyBin != "" {
		os.RemoveAll(filepath.Dir(nobodyBin))
	}
}

// nobodyProc is the unprivileged child.
type nobodyProc struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	out   *bufio.Reader
	errb  *livetest.Buffer
	done  chan struct{}
}

// asNobody starts this test binary as uid/gid 65534 in mode with env, in
// network namespace ns when not "" (the child is forked from a thread
// that entered it). Closing stdin (end) ends it; the cleanup kills it by
// PID if it is still running.
func asNobody(t *testing.T, ns, mode string, env ...string) *nobodyProc {
	t.Helper()
	bin := nobodyBinary(t)
	cmd := exec.Command(bin, "-test.run=^TestNobodyHelper$", "-test.count=1")
	cmd.Env = append([]string{nobodyEnv + "=" + mode, "PATH=/usr/bin:/bin", "GOMAXPROCS=2"}, env...)
	cmd.Dir = "/"
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobodyUID, Gid: nobodyUID, Groups: []uint32{}}}
	p := &nobodyProc{cmd: cmd, errb: &livetest.Buffer{}, done: make(chan struct{})}
	cmd.Stderr = p.errb
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	p.stdin, p.out = stdin, bufio.NewReader(stdout)
	started := make(chan error, 1)
	go func() {
		// This thread enters ns and is never returned to the pool (the
		// goroutine ends locked, so the runtime discards the thread).
		runtime.LockOSThread()
		if ns != "" {
			h, err := netns.GetFromName(ns)
			if err != nil {
				started <- err
				return
			}
			defer h.Close()
			if err := netns.Set(h); err != nil {
				started <- err
				return
			}
		}
		started <- cmd.Start()
	}()
	if err := <-started; err != nil {
		t.Fatalf("start the unprivileged child: %v", err)
	}
	go func() { cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		p.end()
		select {
		case <-p.done:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-p.done
		}
		if t.Failed() {
			t.Logf("unprivileged child stderr:\n%s", p.errb)
		}
	})
	return p
}

// line reads one line of the child's output (bounded).
func (p *nobodyProc) line(t *testing.T, limit time.Duration) string {
	t.Helper()
	ch := make(chan string, 1)
	go func() { s, _ := p.out.ReadString('\n'); ch <- s }()
	select {
	case s := <-ch:
		return strings.TrimSpace(s)
	case <-time.After(limit):
		t.Fatalf("unprivileged child said nothing in %s\n%s", limit, p.errb)
		return ""
	}
}

func (p *nobodyProc) end() { p.stdin.Close() }
