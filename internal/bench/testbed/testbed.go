// Package testbed builds a self-contained network test bed on one machine:
// two network namespaces (server and client) joined by a veth pair with a
// chosen number of rx/tx queues, optionally with GRO (which makes veth use
// NAPI) and threaded NAPI (per-queue "napi/DEV-N" kernel threads that can be
// placed like IRQs), and real servers (memcached, nginx) started inside the
// server namespace. Nothing is created in the root network namespace, so its
// routing and eth0 are never touched.
//
// Every testbed writes a state file before it creates anything, naming the
// namespaces, the temporary directory and the processes it starts. Down
// removes exactly those; Up first cleans any testbed whose owner process is
// gone (a harness killed mid-run). Down stops recorded PIDs whose
// /proc/PID/comm and start time still match, then kills whatever still runs
// inside the two namespaces it created (load generators started there with
// `ip netns exec`) before deleting them: the namespaces' names are unique
// to the testbed, so nothing else runs in them.
package testbed

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/irqpilot/irqpilot/internal/kernel"
)

// DefaultStateDir holds one state file per testbed. /run is cleared at boot,
// as are network namespaces.
const DefaultStateDir = "/run/irqpilot/testbed"

// Prefix starts every name a testbed creates.
const Prefix = "irqp-"

// Addresses inside the namespaces (never routed outside them).
const (
	ServerAddr = "10.77.0.1"
	ClientAddr = "10.77.0.2"
)

// Options describe a testbed.
type Options struct {
	// Queues is the number of rx and tx queues of each veth end (≥ 1).
	Queues int
	// GRO turns on GRO on both veth ends, which makes veth receive through
	// NAPI (per rx queue) instead of the per-CPU backlog — but only packets
	// veth finds eligible (drivers/net/veth.c veth_skb_is_eligible_for_gro):
	// from a sender with TSO (veth's default) just those whose socket
	// buffer is freed with sock_wfree (UDP, not TCP) and only when the
	// receiver has GRO forwarding or fraglist on. So GRO also turns on
	// rx-udp-gro-forwarding (kernel 5.12) on both ends: UDP from local
	// sockets — the udp workload — then takes the NAPI path (NAPI ids on
	// the skbs, busy polling, the NAPI knobs); TCP (memcached, nginx) still
	// takes the backlog. A socket without UDP_GRO still gets its datagrams
	// one by one.
	GRO bool
	// Threaded turns on threaded NAPI on the server end (implies GRO): the
	// receive work of each queue runs in a kernel thread "napi/DEV-ID".
	Threaded bool
	// StateDir is where state files live (DefaultStateDir when empty).
	StateDir string
}

// Proc is a process the testbed started.
type Proc struct {
	PID  int    `json:"pid"`
	Comm string `json:"comm"` // expected /proc/PID/comm
	Role string `json:"role"` // "holder", "memcached", "nginx"
	// StartTime is field 22 of /proc/PID/stat, to tell a recycled PID apart.
	StartTime uint64 `json:"start_time"`
}

// Testbed is one running testbed; it is also its state file's content.
type Testbed struct {
	ID        string `json:"id"`
	ServerNS  string `json:"server_ns"`
	ClientNS  string `json:"client_ns"`
	ServerDev string `json:"server_dev"`
	ClientDev string `json:"client_dev"`
	Queues    int    `json:"queues"`
	GRO       bool   `json:"gro"`
	Threaded  bool   `json:"threaded"`
	// Dir is a temporary directory (server configurations, logs).
	Dir string `json:"dir"`
	// Owner is the process that created the testbed; while it lives the
	// testbed is not stale.
	Owner          int       `json:"owner"`
	OwnerStartTime uint64    `json:"owner_start_time"`
	Procs          []Proc    `json:"procs"`
	Created        time.Time `json:"created"`

	stateDir string
}

// StatePath is the testbed's state file.
func (t *Testbed) StatePath() string { return filepath.Join(t.stateDir, t.ID+".json") }

func (t *Testbed) save() error {
	if err := os.MkdirAll(t.stateDir, 0o755); err != nil {
		return err
	}
	b, err := json.MarshalIndent(t, "", "  ")
	if err != nil {
		return err
	}
	tmp := t.StatePath() + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, t.StatePath())
}

func run(name string, args ...string) error {
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %v: %s", name, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// Up cleans stale testbeds, then creates a new one. On any failure
// everything created so far is removed.
func Up(o Options) (t *Testbed, err error) {
	if o.Queues < 1 {
		return nil, fmt.Errorf("testbed: %d queues; need at least 1", o.Queues)
	}
	if o.Queues > 64 {
		return nil, fmt.Errorf("testbed: %d queues is more than the 64 this harness supports", o.Queues)
	}
	if o.Threaded {
		o.GRO = true
	}
	if o.StateDir == "" {
		o.StateDir = DefaultStateDir
	}
	if _, err := CleanStale(o.StateDir); err != nil {
		return nil, fmt.Errorf("testbed: clean stale: %w", err)
	}
	var rb [3]byte
	if _, err := rand.Read(rb[:]); err != nil {
		return nil, err
	}
	id := Prefix + hex.EncodeToString(rb[:])
	self := os.Getpid()
	st, err := startTime(self)
	if err != nil {
		// Without it a recycled owner PID would keep a dead testbed
		// from ever being found stale.
		return nil, fmt.Errorf("testbed: own start time: %w", err)
	}
	t = &Testbed{
		ID: id, ServerNS: id + "-s", ClientNS: id + "-c",
		// Device names live inside our namespaces; they are short so that
		// the NAPI threads' names "napi/vsXXXX-ID" fit the 15-byte comm.
		ServerDev: "vs" + id[len(Prefix):len(Prefix)+4], ClientDev: "vc" + id[len(Prefix):len(Prefix)+4],
		Queues: o.Queues, GRO: o.GRO, Threaded: o.Threaded,
		Owner: self, OwnerStartTime: st, Created: time.Now().UTC(), stateDir: o.StateDir,
	}
	// Record the intent before creating anything, so a kill at any moment
	// leaves a state file naming what may exist.
	if err := t.save(); err != nil {
		return nil, fmt.Errorf("testbed: state file: %w", err)
	}
	defer func() {
		if err != nil {
			if derr := t.Down(); derr != nil {
				err = errors.Join(err, fmt.Errorf("cleanup: %w", derr))
			}
			t = nil
		}
	}()
	if t.Dir, err = os.MkdirTemp("", id+"-"); err != nil {
		return t, err
	}
	if err = t.save(); err != nil {
		return t, err
	}
	for _, ns := range []string{t.ServerNS, t.ClientNS} {
		if err = run("ip", "netns", "add", ns); err != nil {
			return t, err
		}
	}
	q := strconv.Itoa(o.Queues)
	if err = run("ip", "link", "add", t.ServerDev, "numrxqueues", q, "numtxqueues", q, "netns", t.ServerNS,
		"type", "veth", "peer", "name", t.ClientDev, "numrxqueues", q, "numtxqueues", q, "netns", t.ClientNS); err != nil {
		return t, err
	}
	for _, s := range []struct{ ns, dev, addr string }{{t.ServerNS, t.ServerDev, ServerAddr}, {t.ClientNS, t.ClientDev, ClientAddr}} {
		for _, args := range [][]string{
			{"-n", s.ns, "addr", "add", s.addr + "/24", "dev", s.dev},
			{"-n", s.ns, "link", "set", s.dev, "up"},
			{"-n", s.ns, "link", "set", "lo", "up"},
		} {
			if err = run("ip", args...); err != nil {
				return t, err
			}
		}
		if o.GRO {
			if err = run("ip", "netns", "exec", s.ns, "ethtool", "-K", s.dev, "gro", "on", "rx-udp-gro-forwarding", "on"); err != nil {
				return t, err
			}
		}
	}
	// The holder keeps a mount namespace in which /sys shows the server
	// namespace's devices: /proc/HOLDER/root/sys/class/net/DEV.
	if _, err = t.start("holder", "sleep", t.ServerNS, nil, "sleep", "infinity"); err != nil {
		return t, err
	}
	if o.Threaded {
		if err = t.nsWrite(filepath.Join("sys/class/net", t.ServerDev, "threaded"), "1"); err != nil {
			return t, fmt.Errorf("threaded NAPI on %s: %w", t.ServerDev, err)
		}
	}
	return t, nil
}

// Root is a directory whose sys/ shows the server namespace's network
// devices and whose proc/ is the machine's: a kernel.FS root for reading
// and changing the server veth's queues.
func (t *Testbed) Root() string {
	for _, p := range t.Procs {
		if p.Role == "holder" {
			return fmt.Sprintf("/proc/%d/root", p.PID)
		}
	}
	return ""
}

// NetNSPath is the nsfs file of the server namespace (`ip netns add`
// bind-mounts it there): netlink sockets opened in it see the server veth.
func (t *Testbed) NetNSPath() string { return filepath.Join("/run/netns", t.ServerNS) }

func (t *Testbed) nsWrite(rel, value string) error {
	r := t.Root()
	if r == "" {
		return fmt.Errorf("testbed %s has no holder process", t.ID)
	}
	return os.WriteFile(filepath.Join(r, rel), []byte(value), 0)
}

// start runs argv inside namespace ns (via ip netns exec, which execs, so
// the PID is the server's), records it and waits until /proc/PID/comm is
// comm (the exec happened).
func (t *Testbed) start(role, comm, ns string, env []string, argv ...string) (Proc, error) {
	cmd := exec.Command("ip", append([]string{"netns", "exec", ns}, argv...)...)
	cmd.Env = append(os.Environ(), env...)
	log, err := os.Create(filepath.Join(t.Dir, role+".log"))
	if err != nil {
		return Proc{}, err
	}
	defer log.Close()
	cmd.Stdout, cmd.Stderr = log, log
	// Own process group: a Ctrl-C at the terminal reaches the harness, which
	// then stops the servers in order.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return Proc{}, fmt.Errorf("start %s: %w", role, err)
	}
	p := Proc{PID: cmd.Process.Pid, Comm: comm, Role: role}
	p.StartTime, _ = startTime(p.PID)
	t.Procs = append(t.Procs, p)
	if err := t.save(); err != nil {
		return p, err
	}
	go func() { _ = cmd.Wait() }() // reap
	deadline := time.Now().Add(5 * time.Second)
	for {
		c, err := readComm(p.PID)
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
// namespace (ss inside the namespace).
func (t *Testbed) waitPort(port int) error { return t.WaitListen(port, 5*time.Second) }

// WaitListen waits up to timeout until something listens on
// ServerAddr:port (TCP) in the server namespace: for a server that takes
// longer to start than StartProgram waits (a database).
func (t *Testbed) WaitListen(port int, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		out, err := exec.Command("ip", "netns", "exec", t.ServerNS, "ss", "-Hltn", "sport", "= :"+strconv.Itoa(port)).Output()
		if err == nil && strings.Contains(string(out), ServerAddr+":"+strconv.Itoa(port)) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("nothing listens on %s:%d in %s after %s", ServerAddr, port, t.ServerNS, timeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Children lists the PIDs whose parent is pid (nginx workers).
func Children(pid int) []int {
	var out []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		c, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", c))
		if err != nil {
			continue
		}
		f := statFields(b)
		if len(f) > 1 && f[1] == strconv.Itoa(pid) {
			out = append(out, c)
		}
	}
	sort.Ints(out)
	return out
}

// NAPIThreads lists the kernel threads doing the server veth's threaded
// NAPI ("napi/DEV-ID"), by PID.
func (t *Testbed) NAPIThreads() []int {
	var out []int
	want := "napi/" + t.ServerDev + "-"
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		// comm is cut at 15 bytes: "napi/vs1a2b-1234" reads "napi/vs1a2b-123".
		if c, err := readComm(pid); err == nil && strings.HasPrefix(c, want) {
			out = append(out, pid)
		}
	}
	sort.Ints(out)
	return out
}

// Down stops the recorded processes, deletes the namespaces (which deletes
// the veth pair and the NAPI threads), removes the temporary directory and
// the state file. It is idempotent and reports every failure.
func (t *Testbed) Down() error {
	var errs []error
	for i := len(t.Procs) - 1; i >= 0; i-- {
		if err := stopProc(t.Procs[i]); err != nil {
			errs = append(errs, err)
		}
	}
	for _, ns := range []string{t.ClientNS, t.ServerNS} {
		if ns == "" || !nsExists(ns) {
			continue
		}
		// A process we did not record (a client still running) would keep
		// the namespace's devices alive: stop what runs inside our own
		// namespaces first.
		for _, pid := range nsPIDs(ns) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		if err := run("ip", "netns", "del", ns); err != nil {
			errs = append(errs, err)
		}
	}
	if t.Dir != "" && strings.Contains(filepath.Base(t.Dir), Prefix) {
		if err := os.RemoveAll(t.Dir); err != nil {
			errs = append(errs, err)
		}
	}
	if t.stateDir != "" {
		if err := os.Remove(t.StatePath()); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// stopProc sends SIGTERM to a recorded process (and, for nginx, its
// workers), then SIGKILL after 3 s — only if /proc/PID/comm and its start
// time still match the record.
func stopProc(p Proc) error {
	if !p.alive() {
		return nil
	}
	kids := []int{}
	for _, c := range Children(p.PID) {
		if comm, _ := readComm(c); comm == p.Comm {
			kids = append(kids, c)
		}
	}
	_ = syscall.Kill(p.PID, syscall.SIGTERM)
	deadline := time.Now().Add(3 * time.Second)
	for p.alive() && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if p.alive() {
		_ = syscall.Kill(p.PID, syscall.SIGKILL)
	}
	for _, c := range kids {
		if comm, _ := readComm(c); comm == p.Comm {
			_ = syscall.Kill(c, syscall.SIGKILL)
		}
	}
	for i := 0; i < 100 && p.alive(); i++ {
		time.Sleep(20 * time.Millisecond)
	}
	if p.alive() {
		return fmt.Errorf("%s (pid %d) still running after SIGKILL", p.Role, p.PID)
	}
	return nil
}

func (p Proc) alive() bool {
	c, err := readComm(p.PID)
	if err != nil || c != p.Comm {
		return false
	}
	if st, err := startTime(p.PID); err == nil && p.StartTime != 0 && st != p.StartTime {
		return false
	}
	// A zombie (exited, not yet reaped) counts as gone.
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p.PID))
	f := statFields(b)
	return len(f) == 0 || f[0] != "Z"
}

// List reads every state file in dir.
func List(dir string) ([]*Testbed, error) {
	if dir == "" {
		dir = DefaultStateDir
	}
	names, err := filepath.Glob(filepath.Join(dir, Prefix+"*.json"))
	if err != nil {
		return nil, err
	}
	var out []*Testbed
	for _, n := range names {
		b, err := os.ReadFile(n)
		if err != nil {
			return nil, err
		}
		t := &Testbed{stateDir: dir}
		if err := json.Unmarshal(b, t); err != nil {
			return nil, fmt.Errorf("%s: %w", n, err)
		}
		// Down deletes what a state file names: accept only the names Up
		// derives from the ID, so a damaged file cannot point it elsewhere.
		if t.ID+".json" != filepath.Base(n) || t.ServerNS != t.ID+"-s" || t.ClientNS != t.ID+"-c" ||
			(t.Dir != "" && !strings.HasPrefix(filepath.Base(t.Dir), t.ID+"-")) {
			return nil, fmt.Errorf("%s: does not describe testbed %q as irqpilot writes it; remove it by hand", n, t.ID)
		}
		out = append(out, t)
	}
	return out, nil
}

// Detach hands the testbed over to the user: it has no owner and is never
// stale; only Down (irqpilot testbed down) removes it.
func (t *Testbed) Detach() error {
	t.Owner, t.OwnerStartTime = 0, 0
	return t.save()
}

// Stale reports whether the testbed's owner is gone (never for a detached
// testbed).
func (t *Testbed) Stale() bool {
	if t.Owner == 0 {
		return false
	}
	c, err := readComm(t.Owner)
	if err != nil || c == "" {
		return true
	}
	st, err := startTime(t.Owner)
	return err != nil || (t.OwnerStartTime != 0 && st != t.OwnerStartTime)
}

// CleanStale removes every testbed in dir whose owner process is gone and
// returns their IDs.
func CleanStale(dir string) ([]string, error) {
	all, err := List(dir)
	if err != nil {
		return nil, err
	}
	var cleaned []string
	var errs []error
	for _, t := range all {
		if !t.Stale() {
			continue
		}
		if err := t.Down(); err != nil {
			errs = append(errs, fmt.Errorf("stale testbed %s: %w", t.ID, err))
			continue
		}
		cleaned = append(cleaned, t.ID)
	}
	return cleaned, errors.Join(errs...)
}

// Load reads the state file of testbed id.
func Load(dir, id string) (*Testbed, error) {
	all, err := List(dir)
	if err != nil {
		return nil, err
	}
	for _, t := range all {
		if t.ID == id {
			return t, nil
		}
	}
	return nil, fmt.Errorf("no testbed %q in %s", id, dir)
}

func nsExists(ns string) bool {
	_, err := os.Stat(filepath.Join("/run/netns", ns))
	return err == nil
}

// Namespaces lists the network namespaces named with Prefix.
func Namespaces() []string {
	ents, _ := os.ReadDir("/run/netns")
	var out []string
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), Prefix) {
			out = append(out, e.Name())
		}
	}
	return out
}

func nsPIDs(ns string) []int {
	out, err := exec.Command("ip", "netns", "pids", ns).Output()
	if err != nil {
		return nil
	}
	var pids []int
	for _, f := range strings.Fields(string(out)) {
		if p, err := strconv.Atoi(f); err == nil && p != os.Getpid() {
			pids = append(pids, p)
		}
	}
	return pids
}

func readComm(pid int) (string, error) {
	if pid <= 0 {
		return "", fmt.Errorf("pid %d", pid)
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
	return strings.TrimSpace(string(b)), err
}

// statFields returns /proc/PID/stat's fields after the command name
// (state is [0], ppid [1], start time [19]).
func statFields(b []byte) []string {
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return nil
	}
	return strings.Fields(string(b[i+1:]))
}

func startTime(pid int) (uint64, error) { return kernel.New("/").ProcStart(pid) }
