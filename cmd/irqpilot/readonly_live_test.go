package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/irqpilot/irqpilot/internal/livetest"
)

// TestReadOnlyVerbsNeverWriteLive runs the verbs that only read, as root on
// this machine, under strace, and fails on any open of a file below /proc or
// /sys for writing: inventory, plan, doctor, top, record, capture and apply
// --dry-run must leave kernel settings alone even as root (they used to
// write every IRQ's affinity back to find kernel-managed IRQs). record and
// capture write their own output files, outside /proc and /sys.
func TestReadOnlyVerbsNeverWriteLive(t *testing.T) {
	// Root: the writes this guards against only happen as root.
	livetest.NeedRoot(t, "strace")
	straceBin, _ := exec.LookPath("strace")
	bin, dir := livetest.Irqpilot(t), t.TempDir()

	// Should a verb write IRQ affinities after all, put them back.
	restoreIRQs(t)

	// apply --dry-run of a plan for a veth pair in a namespace of our own
	// (RPS, flow count and XPS), plus the lowest-numbered IRQ of this machine.
	ns := newVethNamespace(t)
	firstIRQ := -1
	paths, _ := filepath.Glob("/proc/irq/*/smp_affinity_list")
	for _, p := range paths {
		if n, err := strconv.Atoi(filepath.Base(filepath.Dir(p))); err == nil && (firstIRQ < 0 || n < firstIRQ) {
			firstIRQ = n
		}
	}
	planFile := filepath.Join(dir, "plan.yaml")
	plan := "version: 1\npolicy: readonly-test\n"
	if firstIRQ >= 0 {
		plan += fmt.Sprintf("irqs:\n  - {irq: %d, cpus: 0, reason: dry run only}\n", firstIRQ)
	}
	plan += "rx_queues:\n  - {device: vq0, rps_cpus: 0, rps_flow_cnt: 256, reason: dry run only}\n" +
		"tx_queues:\n  - {device: vq0, queue: 0, xps_cpus: 0, reason: dry run only}\n"
	if err := os.WriteFile(planFile, []byte(plan), 0o644); err != nil {
		t.Fatal(err)
	}
	vethBefore := steeringState(t, ns)

	for _, tc := range []struct {
		args   []string
		prefix []string // run inside the namespace
		exit1  bool     // exit status 1 is a result, not a failure
	}{
		{args: []string{"inventory"}},
		{args: []string{"inventory", "--json"}},
		{args: []string{"plan", "--policy", "auto"}},
		{args: []string{"doctor", "--duration", "1s"}, exit1: true},
		{args: []string{"top", "--once", "--json"}},
		{args: []string{"record", "-o", filepath.Join(dir, "rec.jsonl"), "--duration", "2s"}},
		{args: []string{"capture", "-o", filepath.Join(dir, "cap.tar.gz")}},
		{args: []string{"apply", "--dry-run", "--state-dir", filepath.Join(dir, "state"), planFile}, prefix: ns.exec},
	} {
		name := strings.Join(tc.args[:1], " ")
		if tc.args[0] == "inventory" && len(tc.args) > 1 {
			name += " --json"
		}
		t.Run(name, func(t *testing.T) {
			log := filepath.Join(dir, "strace-"+strings.ReplaceAll(name, " ", "")+".log")
			argv := append(append(append([]string{}, tc.prefix...), straceBin, "-f", "-y", "-qq",
				"-e", "trace=open,openat,openat2,creat", "-o", log, bin), tc.args...)
			cmd := exec.Command(argv[0], argv[1:]...)
			cmd.Dir = dir
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			err := cmd.Run()
			var ee *exec.ExitError
			if err != nil && !(tc.exit1 && errors.As(err, &ee) && ee.ExitCode() == 1) {
				t.Fatalf("%s: %v\n%s", strings.Join(argv, " "), err, stderr.String())
			}
			opens, writes := kernelWrites(t, log)
			if opens == 0 {
				t.Fatalf("strace saw no open below /proc or /sys; is %s traced?\n%s", log, stderr.String())
			}
			for i, w := range writes {
				if i == 5 {
					t.Errorf("… and %d more opens for writing (%s)", len(writes)-i, log)
					break
				}
				t.Errorf("opened for writing: %s", w)
			}
		})
	}
	if after := steeringState(t, ns); !maps.Equal(vethBefore, after) {
		t.Errorf("veth steering changed by apply --dry-run: %v → %v", vethBefore, after)
	}
}

// openCall matches the start of an open in strace -y output:
// `123 openat(AT_FDCWD</tmp/x>, "/proc/irq/24/smp_affinity_list", O_WRONLY|O_CLOEXEC) = 3</proc/irq/24/smp_affinity_list>`.
var openCall = regexp.MustCompile(`^(?:\d+\s+)?(open|openat|openat2|creat)\((?:(AT_FDCWD|-?\d+)(?:<([^>]*)>)?, )?"((?:[^"\\]|\\.)*)"(.*)$`)

// kernelWrites reads an strace log and returns how many opens it saw below
// /proc or /sys and those that asked for write access.
func kernelWrites(t *testing.T, log string) (int, []string) {
	t.Helper()
	f, err := os.Open(log)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	opens := 0
	var writes []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<16), 1<<20)
	for sc.Scan() {
		m := openCall.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		call, dirPath, path, rest := m[1], m[3], m[4], m[5]
		if s, err := strconv.Unquote(`"` + path + `"`); err == nil {
			path = s
		}
		if !filepath.IsAbs(path) && dirPath != "" {
			path = filepath.Join(dirPath, path)
		}
		path = filepath.Clean(path)
		if !under(path, "/proc") && !under(path, "/sys") {
			continue
		}
		opens++
		// rest holds the flags: "O_RDONLY|O_CLOEXEC) = 3" or, for openat2,
		// "{flags=O_WRONLY|…, …}, 24) = 3".
		if call == "creat" || strings.Contains(rest, "O_WRONLY") || strings.Contains(rest, "O_RDWR") {
			writes = append(writes, sc.Text())
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return opens, writes
}

func under(path, dir string) bool { return path == dir || strings.HasPrefix(path, dir+"/") }

func TestKernelWritesParsesStrace(t *testing.T) {
	log := filepath.Join(t.TempDir(), "log")
	os.WriteFile(log, []byte(`100 openat(AT_FDCWD</tmp/x>, "/proc/interrupts", O_RDONLY|O_CLOEXEC) = 3</proc/interrupts>
100 openat(AT_FDCWD</tmp/x>, "/proc/irq/24/smp_affinity_list", O_WRONLY|O_CLOEXEC <unfinished ...>
101 openat(5</sys/class/net/vq0/queues/rx-0>, "rps_cpus", O_RDWR|O_CLOEXEC) = 6
101 openat(AT_FDCWD</tmp/x>, "/tmp/x/rec.jsonl", O_WRONLY|O_CREAT|O_TRUNC|O_CLOEXEC, 0644) = 7</tmp/x/rec.jsonl>
101 openat(AT_FDCWD</tmp/x>, "/run/irqpilot.lock", O_RDWR|O_CREAT|O_CLOEXEC, 0600) = 5</run/irqpilot.lock>
102 openat2(AT_FDCWD</>, "/sys/kernel/x", {flags=O_WRONLY|O_CLOEXEC, resolve=0}, 24) = 3
102 <... openat resumed>) = 3</proc/irq/24/smp_affinity_list>
102 openat(AT_FDCWD</tmp/x>, "/system/file", O_RDWR) = 3
`), 0o644)
	opens, writes := kernelWrites(t, log)
	if opens != 4 || len(writes) != 3 || !strings.Contains(writes[0], "smp_affinity_list") ||
		!strings.Contains(writes[1], "rps_cpus") || !strings.Contains(writes[2], "/sys/kernel/x") {
		t.Errorf("opens %d, writes %q", opens, writes)
	}
}
