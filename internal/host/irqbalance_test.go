package host

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/irqpilot/irqpilot/internal/kernel"
	"github.com/irqpilot/irqpilot/internal/livetest/liveroot"
)

func irqbalanceTree(t *testing.T, environ, config, configPath string) *devTree {
	tr := newDevTree(t)
	tr.file("proc/77/comm", "bash\n")
	tr.file("proc/77/environ", "IRQBALANCE_BANNED_CPULIST=7\x00")
	if environ != "" {
		tr.file("proc/4242/comm", "irqbalance\n")
		tr.file("proc/4242/environ", environ)
	}
	if config != "" {
		tr.file(configPath, config)
	}
	return tr
}

func TestIrqbalanceBannedCPUs(t *testing.T) {
	debian := "# comment\n#IRQBALANCE_BANNED_CPULIST=\nIRQBALANCE_BANNED_CPUS=0000000f\nIRQBALANCE_ARGS=\"-j\"\n"
	for _, tc := range []struct {
		name, environ, config, configPath string
		running                           bool
		banned, file                      string
	}{
		{"environment wins over file", "PATH=/bin\x00IRQBALANCE_BANNED_CPULIST=2-3\x00SECRET_TOKEN=hunter2\x00", debian, "etc/default/irqbalance", true, "2-3", "/etc/default/irqbalance"},
		{"file when environment has none", "PATH=/bin\x00", debian, "etc/default/irqbalance", true, "0-3", "/etc/default/irqbalance"},
		{"environment mask", "IRQBALANCE_BANNED_CPUS=00000000,00000101\x00", "", "", true, "0,8", ""},
		{"cpulist wins over mask", "IRQBALANCE_BANNED_CPUS=f\x00IRQBALANCE_BANNED_CPULIST=5\x00", "", "", true, "5", ""},
		{"sysconfig quoted, not running", "", "IRQBALANCE_BANNED_CPULIST=\"1,3\"\n", "etc/sysconfig/irqbalance", false, "1,3", "/etc/sysconfig/irqbalance"},
		{"nothing", "", "", "", false, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr := irqbalanceTree(t, tc.environ, tc.config, tc.configPath)
			kfs := kernel.New(tr.root)
			kfs.StartRecording()
			h := &Host{}
			readIrqbalance(kfs, h)
			ib := h.Irqbalance
			wantPID := 0
			if tc.running {
				wantPID = 4242
			}
			if ib.Running != tc.running || ib.PID != wantPID || ib.BannedCPUs.String() != tc.banned || ib.ConfigFile != tc.file {
				t.Errorf("got %+v banned %q, want running=%v banned %q file %q", ib, ib.BannedCPUs, tc.running, tc.banned, tc.file)
			}
			// Nothing of the process table is archived; only the PID and the ban variables.
			for p := range kfs.Recorded() {
				if strings.HasPrefix(p, "/proc") {
					t.Errorf("capture would archive %s", p)
				}
			}
			syn := string(kfs.Synthetics()[irqbalanceFile])
			if strings.Contains(syn, "hunter2") || strings.Contains(syn, "PATH") {
				t.Errorf("synthetic file keeps more than the ban variables: %s", syn)
			}
			// A snapshot made of the recorded facts gives the same answer.
			if err := os.MkdirAll(filepath.Join(tr.root, kernel.SyntheticDir), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(tr.root, kernel.SyntheticDir, irqbalanceFile), []byte(syn), 0o644); err != nil {
				t.Fatal(err)
			}
			os.RemoveAll(filepath.Join(tr.root, "proc"))
			h2 := &Host{}
			readIrqbalance(kernel.New(tr.root), h2)
			if h2.Irqbalance.Running != ib.Running || h2.Irqbalance.PID != ib.PID || !h2.Irqbalance.BannedCPUs.Equal(ib.BannedCPUs) {
				t.Errorf("replayed %+v, live %+v", h2.Irqbalance, ib)
			}
		})
	}
}

func TestIrqbalanceBadValue(t *testing.T) {
	tr := irqbalanceTree(t, "IRQBALANCE_BANNED_CPULIST=3-1\x00", "IRQBALANCE_BANNED_CPULIST=2\n", "etc/default/irqbalance")
	h := &Host{}
	readIrqbalance(kernel.New(tr.root), h)
	// The broken environment value is reported, and the file's value used.
	if h.Irqbalance.BannedCPUs.String() != "2" || !devHasUnavailable(h, "irqbalance banned cpus") {
		t.Errorf("%+v %+v", h.Irqbalance, h.Unavailable)
	}
}

// TestIrqbalanceLive starts a real irqbalance in the foreground with a
// banned CPU list and checks that the live read finds its PID and the ban.
// It runs in debug/foreground mode with a long interval and is killed by
// its PID long before it would rebalance; every IRQ's affinity seen before
// is written back in Cleanup anyway.
func TestIrqbalanceLive(t *testing.T) {
	liveroot.Need(t)
	bin, err := exec.LookPath("irqbalance")
	if err != nil {
		t.Skip("irqbalance not installed")
	}
	if h := (&Host{}); true {
		readIrqbalance(kernel.New("/"), h)
		if h.Irqbalance.Running {
			t.Skipf("an irqbalance (pid %d) already runs", h.Irqbalance.PID)
		}
	}
	saved := map[string]string{}
	paths, _ := filepath.Glob("/proc/irq/*/smp_affinity_list")
	for _, p := range paths {
		if b, err := os.ReadFile(p); err == nil {
			saved[p] = strings.TrimSpace(string(b))
		}
	}
	t.Cleanup(func() {
		for p, v := range saved {
			if b, err := os.ReadFile(p); err == nil && strings.TrimSpace(string(b)) != v {
				_ = os.WriteFile(p, []byte(v), 0o644)
				t.Errorf("irqbalance changed %s from %s to %s (restored)", p, v, strings.TrimSpace(string(b)))
			}
		}
	})
	cmd := exec.Command(bin, "--foreground", "--interval=3600", "--pid=/dev/null")
	cmd.Env = []string{"IRQBALANCE_BANNED_CPULIST=1", "IRQPILOT_UNRELATED=1"}
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_, _ = cmd.Process.Wait()
	})
	// Wait until the exec has finished: comm turns into "irqbalance" early in
	// execve, the new environment becomes readable only a little later
	// (create_elf_tables), so wait for both.
	for i := 0; i < 100; i++ {
		comm, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/comm")
		env, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ")
		if strings.TrimSpace(string(comm)) == "irqbalance" && strings.Contains(string(env), "IRQBALANCE_BANNED_CPULIST=") {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	kfs := kernel.New("/")
	kfs.StartRecording()
	h := &Host{}
	readIrqbalance(kfs, h)
	if !h.Irqbalance.Running || h.Irqbalance.PID != pid || h.Irqbalance.BannedCPUs.String() != "1" {
		t.Errorf("got %+v banned %q, want pid %d banned 1", h.Irqbalance, h.Irqbalance.BannedCPUs, pid)
	}
	if syn := string(kfs.Synthetics()[irqbalanceFile]); strings.Contains(syn, "IRQPILOT_UNRELATED") {
		t.Errorf("synthetic file keeps other variables: %s", syn)
	}
}
