package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"

	"github.com/irqpilot/irqpilot/internal/diagnose"
	"github.com/irqpilot/irqpilot/internal/setting"
)

// Status is what `irqpilot status --json` prints (docs/agent.md, "Status").
type Status struct {
	PID      int       `json:"pid"`
	Started  time.Time `json:"started"`
	Plan     string    `json:"plan"`
	Policy   string    `json:"policy,omitempty"`
	Interval string    `json:"interval"`
	Adapt    bool      `json:"adapt"`
	Passes   int       `json:"passes"`
	LastPass time.Time `json:"last_pass"`
	// LastError is the last pass's error ("" when it succeeded).
	LastError string `json:"last_error"`
	// Enforced are the settings the agent enforces (frozen ones excluded).
	Enforced []Enforced `json:"enforced"`
	Frozen   []Frozen   `json:"frozen"`
	// Waiting: plan entries waiting for a device or a CPU.
	Waiting     []string           `json:"waiting"`
	Repairs     []Repair           `json:"repairs"`
	Adaptations []Adaptation       `json:"adaptations"`
	Findings    []diagnose.Finding `json:"findings"`
	Journals    []string           `json:"journals"`
	// LastReload is the last plan reload (SIGHUP); nil when none was asked.
	LastReload *ReloadResult `json:"last_reload,omitempty"`
	// PassRunning is set when a pass was running and did not end within
	// statusWait: the status is as the last pass left it.
	PassRunning bool `json:"pass_running,omitempty"`

	// pending are the enforced IRQ affinities whose Note is read when the
	// status is asked for (withNotes), not when a pass keeps it: a pass
	// should not read a file per IRQ for a status nobody may ask for.
	pending []pendingIRQ
}

// pendingIRQ is an enforced IRQ affinity: Enforced[i], IRQ irq, value.
type pendingIRQ struct {
	i, irq int
	value  string
}

// ReloadResult is what a plan reload did: applied, or rejected with the
// previous plan kept in force.
type ReloadResult struct {
	Time     time.Time `json:"time"`
	Rejected bool      `json:"rejected"`
	// Error says why it was rejected (the file, line and field).
	Error string `json:"error,omitempty"`
}

// Enforced is one setting the agent keeps in force.
type Enforced struct {
	Setting string `json:"setting"`
	Target  string `json:"target"`
	Device  string `json:"device,omitempty"`
	// Value is in the kernel's form; ValueCPUs is its cpulist when that
	// form is a hex mask (rps-cpus, xps-cpus).
	Value     string  `json:"value"`
	ValueCPUs *string `json:"value_cpus,omitempty"`
	// Note: "move pending until its next interrupt" for an IRQ affinity in
	// force whose interrupt still lands on a CPU outside it.
	Note string `json:"note,omitempty"`
}

// statusWait is how long a status query waits for a running pass to end
// before it answers with the status the last pass left. A pass re-reads
// the host and samples the load under the agent's lock; on a large
// machine under load that takes seconds (a 32-vCPU lab guest under TCG:
// longer than the client's 10 s, three times running), and a status that
// waits for it times out where it should answer.
const statusWait = time.Second

// Status returns the agent's status: current, or while a pass runs longer
// than statusWait, as the last pass left it (PassRunning).
func (ag *Agent) Status() Status {
	deadline := time.Now().Add(statusWait)
	for !ag.mu.TryLock() {
		if time.Now().After(deadline) {
			if last := ag.lastStatus.Load(); last != nil {
				st := *last
				st.PassRunning = true
				return ag.withNotes(st)
			}
			ag.mu.Lock() // no pass has ended yet: wait for the first
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	st := ag.publishStatusLocked()
	ag.mu.Unlock()
	return ag.withNotes(st)
}

// publishStatusLocked makes the status with ag.mu held and keeps it for
// the queries that come while the next pass runs.
func (ag *Agent) publishStatusLocked() Status {
	st := ag.statusLocked()
	ag.lastStatus.Store(&st)
	return st
}

// withNotes fills the notes of st's enforced IRQ affinities from their
// effective affinity, read now (without the agent's lock), on a copy of
// st.Enforced: the published status is shared.
func (ag *Agent) withNotes(st Status) Status {
	if len(st.pending) == 0 {
		return st
	}
	st.Enforced = append([]Enforced(nil), st.Enforced...)
	for _, p := range st.pending {
		st.Enforced[p.i].Note = ag.movePending(p.irq, p.value)
	}
	st.pending = nil
	return st
}

func (ag *Agent) statusLocked() Status {
	st := Status{PID: os.Getpid(), Started: ag.started, Plan: ag.source(), Policy: ag.pl.Policy,
		Interval: ag.o.Interval.String(), Adapt: ag.o.Adapt, Passes: ag.passes, LastPass: ag.lastPass,
		LastError: ag.lastErr, Enforced: []Enforced{}, Frozen: []Frozen{}, Waiting: nonNil(ag.waiting),
		Repairs: withCPUs(nonNil(ag.repairs)), Adaptations: nonNil(ag.adaptations), Findings: nonNil(ag.findings),
		Journals: nonNil(ag.journals)}
	if ag.lastReload != nil {
		r := *ag.lastReload
		st.LastReload = &r
	}
	for i := range ag.changes {
		c := &ag.changes[i]
		if f := ag.frozen[setting.Key(c)]; f != nil {
			continue
		}
		if c.Kind == setting.KindIRQAffinity && c.IRQ != nil {
			st.pending = append(st.pending, pendingIRQ{i: len(st.Enforced), irq: *c.IRQ, value: c.Value})
		}
		st.Enforced = append(st.Enforced, Enforced{Setting: string(c.Kind), Target: c.Target, Device: c.Device, Value: c.Value,
			ValueCPUs: maskList(c.Kind, c.Value)})
	}
	for _, f := range ag.frozen {
		st.Frozen = append(st.Frozen, *f)
	}
	return st
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return append([]T(nil), s...)
}

// serveStatus listens on the status socket (mode 0600, in a directory
// only root can change) and answers every connection with the status as
// JSON: at most limit connections at once, each within statusDeadline.
// It keeps accepting through any error until stop is called.
func (ag *Agent) serveStatus(limit int) (stop func(), err error) {
	p := ag.o.Socket
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		return nil, fmt.Errorf("status socket directory: %w", err)
	}
	// Another user who can change the socket's directory could replace
	// the socket and answer root's `irqpilot status` in the agent's name.
	if _, err := checkTrusted("status socket directory", filepath.Dir(p)); err != nil {
		return nil, fmt.Errorf("%w; nothing was changed", err)
	}
	if fi, err := os.Lstat(p); err == nil {
		if fi.Mode()&os.ModeSocket == 0 {
			return nil, fmt.Errorf("status socket %s exists and is not a socket; refused (remove it)", p)
		}
		if c, err := net.DialTimeout("unix", p, time.Second); err == nil {
			c.Close()
			return nil, fmt.Errorf("another agent answers on %s; stop it first (nothing was changed)", p)
		}
		os.Remove(p) // left by a crashed agent
	}
	old := unix.Umask(0o177)
	ln, err := net.Listen("unix", p)
	unix.Umask(old)
	if err != nil {
		return nil, fmt.Errorf("status socket %s: %w", p, err)
	}
	if err := os.Chmod(p, 0o600); err != nil {
		ln.Close()
		return nil, err
	}
	gl := guard(ln, limit, "status socket", ag.log)
	go func() {
		for {
			c, err := gl.Accept()
			if err != nil {
				return // closed by stop
			}
			go func() {
				defer c.Close()
				c.SetDeadline(time.Now().Add(statusDeadline))
				json.NewEncoder(c).Encode(ag.Status())
			}()
		}
	}()
	return func() { ln.Close(); os.Remove(p) }, nil
}

// Running reports whether an agent answers on the status socket in
// stateDir, and names the socket. A socket file an agent left behind when
// it died answers nothing and does not count.
func Running(stateDir string) (socket string, running bool) {
	socket = filepath.Join(stateDir, SocketName)
	c, err := net.DialTimeout("unix", socket, time.Second)
	if err != nil {
		return socket, false
	}
	c.Close()
	return socket, true
}

// Query asks the agent listening on socket for its status.
func Query(ctx context.Context, socket string) (*Status, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "unix", socket)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) || errors.Is(err, unix.ECONNREFUSED) {
			return nil, fmt.Errorf("no agent is running (nothing answers on %s; start one with 'irqpilot agent', or pass its --state-dir)", socket)
		}
		return nil, fmt.Errorf("status socket %s: %w", socket, err)
	}
	defer c.Close()
	if err := checkPeer(c, socket); err != nil {
		return nil, err
	}
	if dl, ok := ctx.Deadline(); ok {
		c.SetDeadline(dl)
	}
	var st Status
	if err := json.NewDecoder(io.LimitReader(c, 64<<20)).Decode(&st); err != nil {
		return nil, fmt.Errorf("status from %s: %w", socket, err)
	}
	return &st, nil
}

// LastPass is when the last pass started (the watchdog's liveness).
func (ag *Agent) LastPass() time.Time {
	ag.mu.Lock()
	defer ag.mu.Unlock()
	return ag.lastPass
}

// checkPeer refuses an answer from a process that is neither root nor this
// user (SO_PEERCRED: who created the listening socket): another user who
// could put a socket where the agent's is expected would otherwise show
// root a status of their choosing.
func checkPeer(c net.Conn, socket string) error {
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return nil
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		return fmt.Errorf("status socket %s: %w", socket, err)
	}
	var cred *unix.Ucred
	var cerr error
	if err := raw.Control(func(fd uintptr) {
		cred, cerr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return fmt.Errorf("status socket %s: %w", socket, err)
	}
	if cerr != nil {
		return fmt.Errorf("status socket %s: peer credentials: %w", socket, cerr)
	}
	if me := os.Geteuid(); cred.Uid != 0 && int(cred.Uid) != me {
		return fmt.Errorf("status socket %s is served by pid %d of uid %d, not by root; refused (it is not the agent)", socket, cred.Pid, cred.Uid)
	}
	return nil
}
