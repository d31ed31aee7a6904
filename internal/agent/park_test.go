package agent

import (
	"bytes"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/irqpilot/irqpilot/internal/kernel"
	"github.com/irqpilot/irqpilot/internal/livetest"
)

// readOnly makes file p refuse writes (EROFS) and keep its reads: a
// read-only bind mount of the file on itself, in a test tree, undone when
// the test ends. It stands for a kernel file whose writes fail (EIO).
func readOnly(t *testing.T, p string) {
	t.Helper()
	run(t, "mount", "--bind", p, p)
	t.Cleanup(func() {
		if out, err := exec.Command("umount", "-l", p).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v %s", p, err, out)
		}
	})
	run(t, "mount", "-o", "remount,ro,bind", p)
}

// One setting whose write keeps failing does not stop the repair of the
// others: with rx-0's rps_cpus drifted and unwritable, rx-1's drift is
// repaired, and rx-0 is parked with its reason in status, the metric and
// one log line, while rx-1 stays enforced.
func TestOneFailingSettingDoesNotStopRepair(t *testing.T) {
	livetest.NeedRoot(t, "mount", "umount")
	root := genHost(t)
	plan := "version: 1\nrx_queues:\n" +
		"  - {device: eth0, queue: 0, rps_cpus: \"3\", reason: test}\n" +
		"  - {device: eth0, queue: 1, rps_cpus: \"3\", reason: test}\n"
	var log lockedBuf
	ag, err := New(Options{FS: kernel.New(root), StateDir: stateDir(t), PlanFile: writePlan(t, plan), Interval: 50 * time.Millisecond,
		NoLinkEvents: true, Log: slog.New(slog.NewTextHandler(&log, nil))})
	if err != nil {
		t.Fatal(err)
	}
	runAgent(t, ag)
	rps := func(q string) string { return filepath.Join(root, "sys/class/net/eth0/queues/rx-"+q+"/rps_cpus") }
	read := func(q string) string { b, _ := os.ReadFile(rps(q)); return strings.TrimSpace(string(b)) }
	waitForT(t, func() bool { return strings.Contains(read("0"), "8") && strings.Contains(read("1"), "8") })

	ag.mu.Lock() // drift both between two passes; rx-0 cannot be written back
	os.WriteFile(rps("0"), []byte("1\n"), 0o644)
	readOnly(t, rps("0"))
	os.WriteFile(rps("1"), []byte("1\n"), 0o644)
	ag.mu.Unlock()

	waitForT(t, func() bool { return strings.Contains(read("1"), "8") })
	waitForT(t, func() bool { st := ag.Status(); return len(st.Frozen) == 1 })
	st := ag.Status()
	if f := st.Frozen[0]; f.Target != "eth0 rx-0" || !strings.Contains(f.Reason, "write failed") || !strings.Contains(f.Reason, "read-only file system") {
		t.Errorf("parked setting %+v; want eth0 rx-0 with the write's error", f)
	}
	if g := testutil.ToFloat64(ag.m.Frozen); g != 1 {
		t.Errorf("frozen settings gauge %v, want 1", g)
	}
	if n := strings.Count(log.String(), "setting parked"); n != 1 {
		t.Errorf("%d log lines say the setting was parked, want 1:\n%s", n, log.String())
	}
	// rx-1 stays enforced while rx-0 is parked.
	os.WriteFile(rps("1"), []byte("2\n"), 0o644)
	waitForT(t, func() bool { return strings.Contains(read("1"), "8") })
}

// lockedBuf is a log the agent writes while the test reads it.
type lockedBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuf) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
