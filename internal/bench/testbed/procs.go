package testbed

// The processes a testbed starts inside its namespaces, and how it finds,
// waits for and stops them: by PID, never by name alone (/proc/PID/comm
// and the start time must still match the record).

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/irqpilot/irqpilot/internal/kernel"
	"github.com/irqpilot/irqpilot/internal/program"
	"golang.org/x/sys/unix"
)

// Programs starts the test bed's programs: its machine's (Options.FS).
func (t *Testbed) Programs() program.Runner { return t.fs.Programs() }

// start runs argv inside namespace ns (via ip netns exec, which execs, so
// the PID is the server's), records it and waits until /proc/PID/comm is
// comm (the exec happened).
//
// ip netns exec stays here, where a process starts: Go cannot enter a
// network namespace in a child between fork and exec, and ip netns exec
// also gives the child a mount namespace whose /sys shows the namespace's
// devices, which the holder's view (Root) is.
func (t *Testbed) start(role, comm, ns string, env []string, argv ...string) (Proc, error) {
	cmd := t.Programs().Command(context.Background(), "ip", append([]string{"netns", "exec", ns}, argv...)...)
	cmd.Env = append(os.Environ(), env...)
	log, err := os.Create(filepath.Join(t.Dir, role+".log"))
	if err != nil {
		return Proc{}, err
	}
	defer log.Close()
	cmd.Stdout, cmd.Stderr = log, log
	// Own process group: a Ctrl-C at the terminal reaches the harness,
	// which then stops the servers in order.
	program.Group(cmd)
	if err := cmd.Start(); err != nil {
		return Proc{}, fmt.Errorf("start %s: %w", role, err)
	}
	p := Proc{PID: cmd.Process.Pid, Comm: comm, Role: role}
	p.StartTime, _ = startTime(t.fs, p.PID)
	t.Procs = append(t.Procs, p)
	if err := t.save(); err != nil {
		return p, err
	}
	go func() { _ = cmd.Wait() }() // reap
	deadline := time.Now().Add(5 * time.Second)
	for {
		c, err := readComm(t.fs, p.PID)
		if err == nil && c == comm {
			return p, nil
		}
		if err != nil || time.Now().After(deadline) {
			b, _ := os.ReadFile(filepath.Join(t.Dir, role+".log"))
			return p, fmt.Errorf("%s (pid %d) did not start: %s", role, p.PID, strings.TrimSpace(string(b)))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// StartMemcached starts memcached with threads worker threads on
// ServerAddr:11211 and waits until it accepts connections.
//
// Its memory limit (8 GiB, taken only as items arrive) and its hash table
// (2^23 buckets from the start) are sized so that a bench never makes it
// evict or grow its table: each 3 s memcaslap run of bench's workload
// writes about 20 k fresh items, 23 MB (its window is small, see bench's
// memcaslapWindow), so some 350 runs fit. With 256 MiB the server filled
// within a few runs, and throughput then wandered with the hit rate
// earlier runs had left behind; a background table expansion mid-run is the
// same kind of noise.
func (t *Testbed) StartMemcached(threads int) (Proc, error) {
	p, err := t.start("memcached", "memcached", t.ServerNS, nil, "memcached", "-u", "nobody", "-t", strconv.Itoa(threads),
		"-l", ServerAddr, "-p", "11211", "-U", "0", "-m", "8192", "-o", "hashpower=23", "-c", "4096")
	if err != nil {
		return p, err
	}
	return p, t.waitPort(11211)
}

// StartNginx starts nginx (master plus workers) serving a small page on
// ServerAddr:80 from a generated configuration in Dir.
func (t *Testbed) StartNginx(workers int) (Proc, error) {
	www := filepath.Join(t.Dir, "www")
	if err := os.MkdirAll(www, 0o755); err != nil {
		return Proc{}, err
	}
	if err := os.WriteFile(filepath.Join(www, "index.html"), []byte(strings.Repeat("irqpilot testbed\n", 40)), 0o644); err != nil {
		return Proc{}, err
	}
	conf := fmt.Sprintf(`daemon off;
master_process on;
worker_processes %d;
pid %[2]s/nginx.pid;
error_log %[2]s/nginx-error.log warn;
events { worker_connections 4096; }
http {
  access_log off;
  client_body_temp_path %[2]s/tmp;
  proxy_temp_path %[2]s/tmp;
  fastcgi_temp_path %[2]s/tmp;
  uwsgi_temp_path %[2]s/tmp;
  scgi_temp_path %[2]s/tmp;
  keepalive_requests 1000000;
  server {
    listen %[3]s:80 reuseport;
    root %[4]s;
  }
}
`, workers, t.Dir, ServerAddr, www)
	cf := filepath.Join(t.Dir, "nginx.conf")
	if err := os.WriteFile(cf, []byte(conf), 0o644); err != nil {
		return Proc{}, err
	}
	// The temp directory is 0700; nginx workers run as www-data and read www.
	if err := os.Chmod(t.Dir, 0o755); err != nil {
		return Proc{}, err
	}
	p, err := t.start("nginx", "nginx", t.ServerNS, nil, "nginx", "-c", cf, "-p", t.Dir)
	if err != nil {
		return p, err
	}
	return p, t.waitPort(80)
}

// StartProgram starts argv in the server namespace as role and, when port
// is not 0, waits until it listens on ServerAddr:port (TCP). comm is what
// /proc/PID/comm reads once argv[0]'s program runs (after any exec chain
// such as env(1)); only a process with that comm is ever stopped.
func (t *Testbed) StartProgram(role, comm string, port int, argv ...string) (Proc, error) {
	if len(comm) > 15 {
		comm = comm[:15]
	}
	p, err := t.start(role, comm, t.ServerNS, nil, argv...)
	if err != nil || port == 0 {
		return p, err
	}
	return p, t.waitPort(port)
}

// waitPort waits until something listens on ServerAddr:port in the server
// namespace.
func (t *Testbed) waitPort(port int) error { return t.WaitListen(port, 5*time.Second) }

// WaitListen waits up to timeout until something listens on
// ServerAddr:port (TCP) in the server namespace: for a server that takes
// longer to start than StartProgram waits (a database).
func (t *Testbed) WaitListen(port int, timeout time.Duration) error {
	return t.wait(unix.IPPROTO_TCP, "listens on", port, timeout)
}

// WaitBound waits up to timeout until a UDP socket is bound to
// ServerAddr:port in the server namespace.
func (t *Testbed) WaitBound(port int, timeout time.Duration) error {
	return t.wait(unix.IPPROTO_UDP, "is bound to (udp)", port, timeout)
}

func (t *Testbed) wait(proto int, what string, port int, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		ok, err := listening(t.ServerNS, proto, ServerAddr, port)
		if ok {
			return nil
		}
		if time.Now().After(deadline) {
			if err != nil {
				return fmt.Errorf("sockets of %s: %w", t.ServerNS, err)
			}
			return fmt.Errorf("nothing %s %s:%d in %s after %s", what, ServerAddr, port, t.ServerNS, timeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Children lists the PIDs on fs's machine whose parent is pid (nginx
// workers).
func Children(fs *kernel.FS, pid int) []int {
	var out []int
	pids, _ := fs.PIDs()
	for _, c := range pids {
		if st, err := fs.ProcStat(c); err == nil && st.PPID == pid {
			out = append(out, c)
		}
	}
	return out
}

// NAPIThreads lists the kernel threads doing the server veth's threaded
// NAPI ("napi/DEV-ID"), by PID.
func (t *Testbed) NAPIThreads() []int {
	var out []int
	want := "napi/" + t.ServerDev + "-"
	pids, _ := t.fs.PIDs()
	for _, pid := range pids {
		// comm is cut at 15 bytes: "napi/vs1a2b-1234" reads "napi/vs1a2b-123".
		if c, err := readComm(t.fs, pid); err == nil && strings.HasPrefix(c, want) {
			out = append(out, pid)
		}
	}
	sort.Ints(out)
	return out
}

// stopProc sends SIGTERM to a recorded process of fs's machine (and, for
// nginx, its workers), then SIGKILL after 3 s — only if /proc/PID/comm and
// its start time still match the record.
func stopProc(fs *kernel.FS, p Proc) error {
	if !p.alive(fs) {
		return nil
	}
	kids := []int{}
	for _, c := range Children(fs, p.PID) {
		if comm, _ := readComm(fs, c); comm == p.Comm {
			kids = append(kids, c)
		}
	}
	_ = syscall.Kill(p.PID, syscall.SIGTERM)
	deadline := time.Now().Add(3 * time.Second)
	for p.alive(fs) && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if p.alive(fs) {
		_ = syscall.Kill(p.PID, syscall.SIGKILL)
	}
	for _, c := range kids {
		if comm, _ := readComm(fs, c); comm == p.Comm {
			_ = syscall.Kill(c, syscall.SIGKILL)
		}
	}
	for i := 0; i < 100 && p.alive(fs); i++ {
		time.Sleep(20 * time.Millisecond)
	}
	if p.alive(fs) {
		return fmt.Errorf("%s (pid %d) still running after SIGKILL", p.Role, p.PID)
	}
	return nil
}

// alive reports whether the recorded process still runs on fs's machine
// (the same one: its comm and start time match).
func (p Proc) alive(fs *kernel.FS) bool {
	c, err := readComm(fs, p.PID)
	if err != nil || c != p.Comm {
		return false
	}
	if st, err := startTime(fs, p.PID); err == nil && p.StartTime != 0 && st != p.StartTime {
		return false
	}
	// A zombie (exited, not yet reaped) counts as gone.
	st, err := fs.ProcStat(p.PID)
	return err != nil || st.State != "Z"
}

func readComm(fs *kernel.FS, pid int) (string, error) {
	if pid <= 0 {
		return "", fmt.Errorf("pid %d", pid)
	}
	return fs.Comm(pid)
}

func startTime(fs *kernel.FS, pid int) (uint64, error) { return fs.ProcStart(pid) }
