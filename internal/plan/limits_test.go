package plan

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/procfs"
	"golang.org/x/sys/unix"
)

// A plan file must be a regular file: a FIFO hung apply for ever, and
// /dev/zero ran it out of memory. Each is refused before a byte is read.
func TestReadFileRefusesNonRegular(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "plan.fifo")
	if err := unix.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ file, want string }{
		{fifo, "a FIFO"},
		{"/dev/zero", "a character device"},
		{dir, "a directory"},
	} {
		done := make(chan error, 1)
		go func() { _, err := ReadFile(tc.file); done <- err }()
		select {
		case err := <-done:
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), tc.file) {
				t.Errorf("ReadFile(%s) = %v, want an error naming it %s", tc.file, err, tc.want)
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("ReadFile(%s) still blocked after 30s", tc.file)
		}
	}
}

// A 300 MB comment-only plan was accepted after 17.5 s at 1.8 GB. A plan
// file is now read up to MaxPlanBytes and refused past it, naming the limit.
func TestReadFileSizeCap(t *testing.T) {
	dir := t.TempDir()
	over := filepath.Join(dir, "over.yaml")
	// Sparse: the size is what is checked, nothing this big is read.
	fh, err := os.Create(over)
	if err != nil {
		t.Fatal(err)
	}
	fh.WriteString("# comment\n")
	fh.Truncate(300 << 20)
	fh.Close()
	if _, err := ReadFile(over); err == nil || !strings.Contains(err.Error(), "over the limit of "+strconv.Itoa(MaxPlanBytes)) {
		t.Errorf("300 MB plan: %v, want refused naming the limit", err)
	}

	// Just at the limit, comments only: read, then an empty plan.
	at := filepath.Join(dir, "at.yaml")
	line := "# a comment line of 32 bytes ...\n"
	body := strings.Repeat(line, MaxPlanBytes/len(line))
	os.WriteFile(at, []byte(body), 0o644)
	data, err := ReadFile(at)
	if err != nil || len(data) != len(body) {
		t.Fatalf("plan at the limit: %v (%d bytes)", err, len(data))
	}
	if _, err := Parse(at, data); err == nil || !strings.Contains(err.Error(), "empty plan") {
		t.Errorf("comment-only plan: %v", err)
	}
	// Parse enforces the same limit on bytes from elsewhere.
	if _, err := Parse("big", make([]byte, MaxPlanBytes+1)); err == nil || !strings.Contains(err.Error(), "over the limit") {
		t.Errorf("Parse of %d bytes: %v", MaxPlanBytes+1, err)
	}
}

// rxPlan is a plan with n rx_queues entries, each for a device of its own.
func rxPlan(n int, extra string) []byte {
	var b strings.Builder
	b.WriteString("version: 1\npolicy: test\nrx_queues:\n")
	for i := range n {
		fmt.Fprintf(&b, "- {device: d%d, rps_cpus: 0, reason: r}\n", i)
	}
	b.WriteString(extra)
	return []byte(b.String())
}

// 3×10⁴ distinct-device entries took 4.9 s and 10⁶ were killed after 659 s
// in the quadratic duplicate check. Duplicates are now found by map: a big
// plan of distinct entries passes, and a duplicate at its end is named with
// the line of the entry it repeats.
func TestBigPlansDuplicatesFoundLinearly(t *testing.T) {
	const n = 30000
	if _, err := Parse("big.yaml", rxPlan(n, "")); err != nil {
		t.Fatalf("%d distinct entries: %v", n, err)
	}
	// d7, queue 3 overlaps the entry for every queue of d7 (line 11);
	// d9's rps_flow_cnt does not overlap its rps_cpus.
	extra := "- {device: d7, queue: 3, rps_cpus: 1, reason: r}\n- {device: d9, rps_flow_cnt: 64, reason: r}\n"
	_, err := Parse("dup.yaml", rxPlan(n, extra))
	var es Errors
	if !errors.As(err, &es) || len(es) != 1 {
		t.Fatalf("want exactly one error, got %v", err)
	}
	if e := es[0]; e.Line != n+4 || !strings.Contains(e.Msg, "every rx queue of d7") && !strings.Contains(e.Msg, "d7 rx-3") || !strings.Contains(e.Msg, "line 11") {
		t.Errorf("duplicate error %v, want line %d naming d7 and line 11", e, n+4)
	}

	// tx: a queue entry, then the device's every-queue entry.
	tx := "tx_queues:\n- {device: t0, queue: 2, xps_cpus: 0, reason: r}\n- {device: t1, xps_cpus: 0, reason: r}\n- {device: t0, xps_cpus: 1, reason: r}\n"
	_, err = Parse("tx.yaml", append(rxPlan(10, ""), tx...))
	if !errors.As(err, &es) || len(es) != 1 || !strings.Contains(es[0].Msg, "every tx queue of t0") || !strings.Contains(es[0].Msg, "line 15") {
		t.Errorf("tx duplicate: %v", err)
	}
}

// The entry and node caps: more entries than MaxPlanEntries, or more
// possible YAML nodes than maxPlanSeparators, are refused naming the limit.
func TestPlanEntryCaps(t *testing.T) {
	_, err := Parse("many.yaml", rxPlan(MaxPlanEntries+1, ""))
	if err == nil || !strings.Contains(err.Error(), "over the limit of "+strconv.Itoa(MaxPlanEntries)) {
		t.Errorf("%d entries: %v", MaxPlanEntries+1, err)
	}
	flow := "version: 1\nnotes: [" + strings.Repeat("a,", maxPlanSeparators) + "a]\n"
	_, err = Parse("flow.yaml", []byte(flow))
	if err == nil || !strings.Contains(err.Error(), "over the limit of "+strconv.Itoa(maxPlanSeparators)) {
		t.Errorf("%d flow items: %v", maxPlanSeparators+1, err)
	}
}

// parseChildEnv makes the test binary a child that parses plans under a
// lowered address-space limit (TestParseUnderAddressSpaceLimit).
const parseChildEnv = "IRQPILOT_PLAN_RLIMIT_CHILD"

// `apply --dry-run /dev/zero` died with a Go fatal out-of-memory under a
// 2 GB address-space limit (a fatal error cannot be recovered: no message,
// no cleanup). A child process (this test binary again) lowers RLIMIT_AS to
// its current size plus 768 MiB and loads the worst inputs: /dev/zero, a
// 300 MB file and the costliest flow list the caps let yaml.v3 build (each
// an error), and a plan at the entry cap (accepted); the child must exit
// normally.
func TestParseUnderAddressSpaceLimit(t *testing.T) {
	if os.Getenv(parseChildEnv) != "" {
		parseChild(t)
		return
	}
	if testing.Short() {
		t.Skip("builds inputs of hundreds of MB")
	}
	if raceEnabled {
		// The race detector reserves its shadow memory as address space,
		// so a limit on address space says nothing about the parser here
		// (ThreadSanitizer itself fails to allocate). make test runs this
		// test again without -race.
		t.Skip("address-space limit under -race: run without -race (make test does)")
	}
	dir := t.TempDir()
	big := filepath.Join(dir, "big.yaml")
	fh, _ := os.Create(big)
	fh.Truncate(300 << 20)
	fh.Close()
	flow := filepath.Join(dir, "flow.yaml")
	os.WriteFile(flow, []byte("version: 1\nnotes: ["+strings.Repeat("a,", maxPlanSeparators-16)+"a]\n"), 0o644)
	entries := filepath.Join(dir, "ok-entries.yaml") // at the cap: accepted
	os.WriteFile(entries, rxPlan(MaxPlanEntries, ""), 0o644)

	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "-test.run=^TestParseUnderAddressSpaceLimit$", "-test.v")
	cmd.Env = append(os.Environ(), parseChildEnv+"="+strings.Join([]string{"/dev/zero", big, flow, entries}, ":"))
	out, err := cmd.CombinedOutput()
	if strings.Contains(string(out), "fatal error") || strings.Contains(string(out), "out of memory") {
		t.Fatalf("the parser ran out of memory under the limit:\n%.4000s", out)
	}
	if err != nil {
		t.Fatalf("child: %v\n%.4000s", err, out)
	}
	if !strings.Contains(string(out), "limit set") {
		t.Fatalf("the child did not lower its limit:\n%s", out)
	}
	t.Logf("%s", out)
}

func parseChild(t *testing.T) {
	vm := vmSize(t)
	lim := vm + 768<<20
	if err := unix.Setrlimit(unix.RLIMIT_AS, &unix.Rlimit{Cur: lim, Max: lim}); err != nil {
		t.Fatal(err)
	}
	t.Logf("limit set: RLIMIT_AS %d MiB (VmSize %d MiB)", lim>>20, vm>>20)
	for _, f := range strings.Split(os.Getenv(parseChildEnv), ":") {
		p, err := LoadFile(f)
		if strings.HasPrefix(filepath.Base(f), "ok-") {
			if err != nil {
				t.Errorf("%s: %.300s", f, err)
			} else {
				t.Logf("%s: accepted, %d rx entries", filepath.Base(f), len(p.RxQueues))
			}
			continue
		}
		if err == nil {
			t.Errorf("%s: accepted (%d irqs, %d rx entries)", f, len(p.IRQs), len(p.RxQueues))
			continue
		}
		t.Logf("%s: %.160s", filepath.Base(f), err)
	}
}

// vmSize is this process's address-space size (vsize of /proc/self/stat,
// VmSize in status).
func vmSize(t *testing.T) uint64 {
	p, err := procfs.Self()
	if err != nil {
		t.Skip(err)
	}
	st, err := p.Stat()
	if err != nil {
		t.Skip(err)
	}
	return uint64(st.VirtualMemory())
}
