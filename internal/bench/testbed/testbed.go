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
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/irqpilot/irqpilot/internal/kernel"
)

// DefaultStateDir holds one state file per testbed. /run is cleared at boot,
// as are network namespaces.
const DefaultStateDir = "/run/irqpilot/testbed"

// Prefix starts every name a testbed creates unless Options.Prefix names
// another.
const Prefix = "irqp-"

// prefixRE is what a prefix may be: the start of a namespace's, a state
// file's and a temporary directory's name.
var prefixRE = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,15}$`)

// idRE is a testbed's ID: its prefix and six hex digits.
var idRE = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,15}[0-9a-f]{6}$`)

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
	// Prefix starts the testbed's ID and its namespaces' names (Prefix
	// when empty): lower-case letters, digits, '-' and '_', at most 16.
	Prefix string
	// FS is the machine the testbed is made on, the live one (the
	// caller's kernel.New("/")): its processes are found and checked
	// there.
	FS *kernel.FS
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
	ID string `json:"id"`
	// Prefix is what the ID starts with (Options.Prefix).
	Prefix    string `json:"prefix,omitempty"`
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
	// User is who made it: the login behind sudo (SUDO_UID), since a
	// test bed needs root and every state file is root's.
	User int `json:"user"`

	stateDir string
	uid      int        // the state file's owner (List)
	fs       *kernel.FS // the machine (Options.FS; List's fs)
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

// Up cleans stale testbeds, then creates a new one. On any failure
// everything created so far is removed.
func Up(o Options) (t *Testbed, err error) {
	if o.Queues < 1 {
		return nil, fmt.Errorf("testbed: %d queues; need at least 1", o.Queues)
	}
	if o.Queues > 64 {
		return nil, fmt.Errorf("testbed: %d queues is more than the 64 this harness supports", o.Queues)
	}
	if o.FS == nil {
		return nil, errors.New("testbed: no machine to make it on (Options.FS)")
	}
	if o.Threaded {
		o.GRO = true
	}
	if o.StateDir == "" {
		o.StateDir = DefaultStateDir
	}
	if o.Prefix == "" {
		o.Prefix = Prefix
	}
	if !prefixRE.MatchString(o.Prefix) {
		return nil, fmt.Errorf("testbed: prefix %q: want 1 to 16 lower-case letters, digits, '-' or '_', starting with a letter or digit", o.Prefix)
	}
	if _, err := CleanStale(o.FS, o.StateDir); err != nil {
		return nil, fmt.Errorf("testbed: clean stale: %w", err)
	}
	var rb [3]byte
	if _, err := rand.Read(rb[:]); err != nil {
		return nil, err
	}
	id := o.Prefix + hex.EncodeToString(rb[:])
	tag := id[len(o.Prefix) : len(o.Prefix)+4]
	self := os.Getpid()
	st, err := startTime(o.FS, self)
	if err != nil {
		// Without it a recycled owner PID would keep a dead testbed
		// from ever being found stale.
		return nil, fmt.Errorf("testbed: own start time: %w", err)
	}
	t = &Testbed{
		ID: id, Prefix: o.Prefix, ServerNS: id + "-s", ClientNS: id + "-c",
		// Device names live inside our namespaces; they are short so that
		// the NAPI threads' names "napi/vsXXXX-ID" fit the 15-byte comm.
		ServerDev: "vs" + tag, ClientDev: "vc" + tag,
		Queues: o.Queues, GRO: o.GRO, Threaded: o.Threaded,
		Owner: self, OwnerStartTime: st, Created: time.Now().UTC(), User: invoker(), stateDir: o.StateDir, fs: o.FS,
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
		if err = kernel.AddNetns(ns); err != nil {
			return t, err
		}
	}
	if err = addVeth(t.ServerNS, t.ServerDev, t.ClientNS, t.ClientDev, o.Queues); err != nil {
		return t, err
	}
	for _, s := range []struct{ ns, dev, addr string }{{t.ServerNS, t.ServerDev, ServerAddr}, {t.ClientNS, t.ClientDev, ClientAddr}} {
		if err = linkUp(s.ns, s.dev, s.addr); err != nil {
			return t, err
		}
		if o.GRO {
			if err = setFeatures(s.ns, s.dev, groFeatures); err != nil {
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

// NetNSPath is the nsfs file of the server namespace (bind-mounted there
// as `ip netns add` does): netlink sockets opened in it see the server veth.
func (t *Testbed) NetNSPath() string { return filepath.Join(kernel.RunNetNSDir, t.ServerNS) }

func (t *Testbed) nsWrite(rel, value string) error {
	r := t.Root()
	if r == "" {
		return fmt.Errorf("testbed %s has no holder process", t.ID)
	}
	return os.WriteFile(filepath.Join(r, rel), []byte(value), 0)
}

// Down stops the recorded processes, deletes the namespaces (which deletes
// the veth pair and the NAPI threads), removes the temporary directory and
// the state file. It is idempotent and reports every failure.
func (t *Testbed) Down() error {
	var errs []error
	for i := len(t.Procs) - 1; i >= 0; i-- {
		if err := stopProc(t.fs, t.Procs[i]); err != nil {
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
		for _, pid := range kernel.NetnsPIDs(ns) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		if err := kernel.DelNetns(ns); err != nil {
			errs = append(errs, err)
		}
	}
	// The kernel frees a namespace, its veth end and the NAPI threads in a
	// work queue after the name is gone: wait for the threads, so that
	// what comes next (another testbed, a check) finds the machine as it
	// was before Up.
	for deadline := time.Now().Add(5 * time.Second); t.Threaded && len(t.NAPIThreads()) > 0 && time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
	}
	if t.Dir != "" && strings.HasPrefix(filepath.Base(t.Dir), t.ID+"-") {
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

// List reads every state file in dir; fs is the machine the testbeds are
// on (see Options.FS).
func List(fs *kernel.FS, dir string) ([]*Testbed, error) {
	if dir == "" {
		dir = DefaultStateDir
	}
	names, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		return nil, err
	}
	var out []*Testbed
	for _, n := range names {
		b, err := os.ReadFile(n)
		if err != nil {
			return nil, err
		}
		t := &Testbed{stateDir: dir, fs: fs}
		if err := json.Unmarshal(b, t); err != nil {
			return nil, fmt.Errorf("%s: %w", n, err)
		}
		// Down deletes what a state file names: accept only the names Up
		// derives from the ID, so a damaged file cannot point it elsewhere.
		prefix := t.Prefix
		if prefix == "" {
			prefix = Prefix // written before prefixes could be chosen
		}
		if !prefixRE.MatchString(prefix) || !strings.HasPrefix(t.ID, prefix) || !idRE.MatchString(t.ID) || len(t.ID) != len(prefix)+6 ||
			t.ID+".json" != filepath.Base(n) || t.ServerNS != t.ID+"-s" || t.ClientNS != t.ID+"-c" ||
			(t.Dir != "" && !strings.HasPrefix(filepath.Base(t.Dir), t.ID+"-")) {
			return nil, fmt.Errorf("%s: does not describe testbed %q as irqpilot writes it; remove it by hand", n, t.ID)
		}
		if fi, err := os.Stat(n); err == nil {
			if st, ok := fi.Sys().(*syscall.Stat_t); ok {
				t.uid = int(st.Uid)
			}
		}
		out = append(out, t)
	}
	return out, nil
}

// Mine reports whether the current user made the testbed: its state file
// is this user's and it names this login (the one behind sudo) as its
// maker.
func (t *Testbed) Mine() bool { return t.uid == os.Getuid() && t.User == invoker() }

// invoker is the user behind this process: SUDO_UID's when root runs it
// through sudo, else the real uid.
func invoker() int {
	if os.Geteuid() == 0 {
		if u, err := strconv.Atoi(os.Getenv("SUDO_UID")); err == nil && u >= 0 {
			return u
		}
	}
	return os.Getuid()
}

// Namespaces are the testbed's two network namespaces.
func (t *Testbed) Namespaces() []string { return []string{t.ServerNS, t.ClientNS} }

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
	c, err := readComm(t.fs, t.Owner)
	if err != nil || c == "" {
		return true
	}
	st, err := startTime(t.fs, t.Owner)
	return err != nil || (t.OwnerStartTime != 0 && st != t.OwnerStartTime)
}

// CleanStale removes every testbed in dir whose owner process is gone and
// returns their IDs; fs is the machine (see Options.FS).
func CleanStale(fs *kernel.FS, dir string) ([]string, error) {
	all, err := List(fs, dir)
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

// Load reads the state file of testbed id; fs is the machine (see
// Options.FS).
func Load(fs *kernel.FS, dir, id string) (*Testbed, error) {
	all, err := List(fs, dir)
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

// Namespaces lists the network namespaces named with Prefix.
func Namespaces() []string {
	ents, _ := os.ReadDir(kernel.RunNetNSDir)
	var out []string
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), Prefix) {
			out = append(out, e.Name())
		}
	}
	return out
}
