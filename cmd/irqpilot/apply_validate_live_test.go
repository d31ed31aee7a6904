package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/irqpilot/irqpilot/internal/cpuset"
	"github.com/irqpilot/irqpilot/internal/livetest"
)

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
	restoreIRQs(t) // should apply write IRQ affinities after all, put them back
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
// nothing (restoreIRQs puts every IRQ back at the end).
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
