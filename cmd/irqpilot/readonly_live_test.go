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

	"github.com/irqpilot/irqpilot/internal/cpuset"
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
	livetest.RestoreAllIRQs(t, true)

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

// possibleCPUs is the number of CPUs this machine may have (one past the
// highest in /sys/devices/system/cpu/possible).
func possibleCPUs(t *testing.T) int {
	b, err := os.ReadFile("/sys/devices/system/cpu/possible")
	if err != nil {
		t.Skip(err)
	}
	s, err := cpuset.Parse(strings.TrimSpace(string(b)))
	if err != nil || s.IsEmpty() {
		t.Skipf("possible CPUs %q: %v", b, err)
	}
	cpus := s.CPUs()
	return cpus[len(cpus)-1] + 1
}

// A plan that fails validation used to be refused only after apply had
// opened every IRQ's smp_affinity_list for writing (the managed-IRQ probe),
// eth0's included, even inside a namespace for a plan naming only a veth.
// Now validation comes first: under strace, inside a namespace of our own,
// apply of each bad plan exits 2 naming the problem and opens nothing below
// /proc or /sys for writing, and creates no state directory. A valid plan
// that names only a veth writes only that veth's files.
func TestApplyValidatesBeforeWritingLive(t *testing.T) {
	// Root: the writes this guards against only happen as root.
	livetest.NeedRoot(t, "strace")
	straceBin, _ := exec.LookPath("strace")
	ns := newVethPair(t).name
	livetest.RestoreAllIRQs(t, true) // should apply write IRQ affinities after all, put them back
	dir := t.TempDir()
	nCPU := possibleCPUs(t)

	run := func(t *testing.T, name string, args ...string) (code int, stderr string, writes []string) {
		t.Helper()
		log := filepath.Join(dir, "strace-"+name+".log")
		cmd := selfCmd([]string{"ip", "netns", "exec", ns, straceBin, "-f", "-y", "-qq",
			"-e", "trace=open,openat,openat2,creat", "-o", log}, args...)
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		err := cmd.Run()
		opens, w := kernelWrites(t, log)
		if opens == 0 {
			t.Fatalf("strace saw no open below /proc or /sys; is %s traced?\n%s", log, errb.String())
		}
		return exitCode(err), errb.String() + out.String(), w
	}

	for _, tc := range []struct{ name, plan, want string }{
		{"irq 99999", "irqs:\n  - {irq: 99999, cpus: 0, reason: test}\n", "99999"},
		{"unknown device", "rx_queues:\n  - {device: nosuchdev7, rps_cpus: 0, reason: test}\n", "nosuchdev7"},
		{"unknown queue", "rx_queues:\n  - {device: vq0, queue: 9, rps_cpus: 0, reason: test}\n", "9"},
		{"absent CPU", fmt.Sprintf("tx_queues:\n  - {device: vq0, queue: 0, xps_cpus: %d, reason: test}\n", nCPU), "CPU " + strconv.Itoa(nCPU)},
		{"good veth entry beside a bad one", "rx_queues:\n  - {device: vq0, queue: 0, rps_cpus: 0, reason: test}\n" +
			"tx_queues:\n  - {device: vq0, queue: 7, xps_cpus: 0, reason: test}\n", "7"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			planFile := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "-")+".yaml")
			if err := os.WriteFile(planFile, []byte("version: 1\npolicy: test\n"+tc.plan), 0o644); err != nil {
				t.Fatal(err)
			}
			state := filepath.Join(dir, "state-"+strings.ReplaceAll(tc.name, " ", "-"))
			code, stderr, writes := run(t, strings.ReplaceAll(tc.name, " ", "-"), "apply", "--state-dir", state, planFile)
			if code != 2 || !strings.Contains(stderr, tc.want) {
				t.Errorf("exit %d, want 2 naming %q:\n%s", code, tc.want, stderr)
			}
			for i, w := range writes {
				if i == 5 {
					t.Errorf("… and %d more opens for writing", len(writes)-i)
					break
				}
				t.Errorf("opened for writing before the plan was refused: %s", w)
			}
			if _, err := os.Lstat(state); err == nil {
				t.Errorf("state directory %s created for a refused plan", state)
			}
		})
	}

	t.Run("veth only", func(t *testing.T) {
		planFile := filepath.Join(dir, "veth.yaml")
		os.WriteFile(planFile, []byte("version: 1\npolicy: test\nrx_queues:\n  - {device: vq0, queue: 1, rps_cpus: 0, reason: test}\n"), 0o644)
		state := filepath.Join(dir, "state-veth")
		code, stderr, writes := run(t, "veth", "apply", "--state-dir", state, planFile)
		if code != 0 {
			t.Fatalf("apply: exit %d\n%s", code, stderr)
		}
		if len(writes) == 0 {
			t.Errorf("no write seen: is the veth's rps_cpus traced?")
		}
		for _, w := range writes {
			if !strings.Contains(w, "/vq0/queues/rx-1/rps_cpus") {
				t.Errorf("a plan naming only vq0 rx-1 opened for writing: %s", w)
			}
		}
		if out, err := selfCmd([]string{"ip", "netns", "exec", ns}, "revert", "--state-dir", state).CombinedOutput(); err != nil {
			t.Errorf("revert: %v\n%s", err, out)
		}
	})

	// A plan naming one IRQ probes and writes that IRQ alone.
	t.Run("one irq", func(t *testing.T) {
		irq, cur := quietIRQ(t)
		want := "0"
		if cur == "0" {
			want = "1"
		}
		planFile := filepath.Join(dir, "irq.yaml")
		os.WriteFile(planFile, []byte(fmt.Sprintf("version: 1\npolicy: test\nirqs:\n  - {irq: %d, cpus: %s, reason: test}\n", irq, want)), 0o644)
		state := filepath.Join(dir, "state-irq")
		code, stderr, writes := run(t, "irq", "apply", "--state-dir", state, planFile)
		if code != 0 {
			t.Fatalf("apply: exit %d\n%s", code, stderr)
		}
		mine := fmt.Sprintf("/proc/irq/%d/smp_affinity_list", irq)
		if len(writes) == 0 {
			t.Errorf("no write seen")
		}
		for _, w := range writes {
			if !strings.Contains(w, mine) {
				t.Errorf("a plan naming only irq %d opened for writing: %s", irq, w)
			}
		}
		if out, err := selfCmd(nil, "revert", "--state-dir", state).CombinedOutput(); err != nil {
			t.Errorf("revert: %v\n%s", err, out)
		}
	})
}

// quietIRQ finds an IRQ of this machine that is neither network, disk nor
// virtio (ACPI, serial) and returns it with its affinity; it writes
// nothing (livetest.RestoreAllIRQs puts every IRQ back at the end).
func quietIRQ(t *testing.T) (int, string) {
	t.Helper()
	data, err := os.ReadFile("/proc/interrupts")
	if err != nil {
		t.Skip(err)
	}
	for _, l := range strings.Split(string(data), "\n") {
		f := strings.Fields(l)
		if len(f) < 2 {
			continue
		}
		n, err := strconv.Atoi(strings.TrimSuffix(f[0], ":"))
		if err != nil {
			continue
		}
		if strings.Contains(l, "virtio") || strings.Contains(l, "eth") || strings.Contains(l, "nvme") || strings.Contains(l, "timer") {
			continue
		}
		b, err := os.ReadFile(fmt.Sprintf("/proc/irq/%d/smp_affinity_list", n))
		if err != nil {
			continue
		}
		return n, strings.TrimSpace(string(b))
	}
	t.Skip("no quiet IRQ on this machine")
	return 0, ""
}
