package plan_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/irqpilot/irqpilot/internal/apply"
	"github.com/irqpilot/irqpilot/internal/host"
	"github.com/irqpilot/irqpilot/internal/hostgen"
	"github.com/irqpilot/irqpilot/internal/kernel"
	"github.com/irqpilot/irqpilot/internal/livetest"
	"github.com/irqpilot/irqpilot/internal/plan"
)

// olderKernel generates a small whole tree whose kernel lacks the named
// files (hostgen.Spec.Lacks) and reads its host.
func olderKernel(t *testing.T, lacks ...string) (string, *kernel.FS, *host.Host) {
	t.Helper()
	dir, h := livetest.GenHost(t, hostgen.Spec{CPUs: 4, Packages: 1, Nodes: 1, ThreadsPerCore: 1, Offline: hostgen.NoOffline, NVMeQueues: -1,
		NICs: []hostgen.NICSpec{{Name: "eth0", Driver: "ice", Slot: 1, Queues: 2}}, Lacks: lacks})
	return dir, kernel.New(dir), h
}

// Each feature a kernel can lack, the plan that asks for it, the field the
// refusal names and the file the feature's probe looks for.
var lackCases = []struct {
	lacks, yaml, field, feature, file string
}{
	{"threaded", "napi:\n  - {device: eth0, threaded: true, reason: r}\n", "napi[0].threaded", "threaded NAPI", "sys/class/net/eth0/threaded"},
	{"napi_defer_hard_irqs", "napi:\n  - {device: eth0, defer_hard_irqs: 2, reason: r}\n", "napi[0].defer_hard_irqs", "NAPI IRQ deferral", "sys/class/net/eth0/napi_defer_hard_irqs"},
	{"gro_flush_timeout", "napi:\n  - {device: eth0, gro_flush_timeout: 20000, reason: r}\n", "napi[0].gro_flush_timeout", "GRO flush timeout", "sys/class/net/eth0/gro_flush_timeout"},
	{"rps_cpus", "rx_queues:\n  - {device: eth0, rps_cpus: 1, reason: r}\n", "rx_queues[0].rps_cpus", "RPS", "sys/class/net/eth0/queues/rx-0/rps_cpus"},
	{"rps_flow_cnt", "rx_queues:\n  - {device: eth0, rps_flow_cnt: 256, reason: r}\n", "rx_queues[0].rps_flow_cnt", "RFS flow tables", "sys/class/net/eth0/queues/rx-0/rps_flow_cnt"},
	{"xps_cpus", "tx_queues:\n  - {device: eth0, xps_cpus: 1, reason: r}\n", "tx_queues[0].xps_cpus", "XPS", "sys/class/net/eth0/queues/tx-0/xps_cpus"},
	{"rps_sock_flow_entries", "rps_sock_flow_entries: {value: 4096, reason: r}\n", "rps_sock_flow_entries", "RFS socket flow table", "proc/sys/net/core/rps_sock_flow_entries"},
	{"busy_read", "busy_poll: {busy_read: 50, reason: r}\n", "busy_poll.busy_read", "busy polling of reads", "proc/sys/net/core/busy_read"},
	{"busy_poll", "busy_poll: {busy_poll: 50, reason: r}\n", "busy_poll.busy_poll", "busy polling of poll and epoll", "proc/sys/net/core/busy_poll"},
}

// On a kernel without a feature, apply refuses a plan that asks for it,
// naming the file, line and field and the feature, and writes nothing;
// the kernel that has it takes the same plan.
func TestApplyRefusesWhatTheKernelLacks(t *testing.T) {
	for _, c := range lackCases {
		t.Run(c.lacks, func(t *testing.T) {
			src := "version: 1\n" + c.yaml
			p, err := plan.Parse("older.yaml", []byte(src))
			if err != nil {
				t.Fatal(err)
			}
			dir, fs, h := olderKernel(t, c.lacks)
			if f := missing(h, c.feature); f == nil {
				t.Fatalf("the probe did not find %q missing: %+v", c.feature, h.Features)
			}
			before := snapshotFiles(t, dir)
			_, err = apply.New(fs, t.TempDir()).Converge(h, p, apply.ConvergeOptions{})
			if err == nil {
				t.Fatal("apply took a plan the kernel cannot do")
			}
			line := "2" // a one-line entry; a list's first item is on line 3
			if strings.HasSuffix(strings.SplitN(c.yaml, "\n", 2)[0], ":") {
				line = "3"
			}
			want := "older.yaml:" + line + ": " + c.field + ": this kernel has no " + c.feature
			if !strings.Contains(err.Error(), want) {
				t.Fatalf("error %q does not say %q", err, want)
			}
			if after := snapshotFiles(t, dir); after != before {
				t.Fatal("a refused plan wrote to the tree")
			}

			// The same plan on a kernel with the feature resolves.
			_, _, full := olderKernel(t)
			if f := missing(full, c.feature); f != nil {
				t.Fatalf("a whole kernel lacks %q", c.feature)
			}
			if _, err := plan.Resolve(p, full); err != nil {
				t.Fatalf("the kernel with %s refused the plan: %v", c.feature, err)
			}
			if _, err := os.Stat(filepath.Join(dir, c.file)); err == nil {
				t.Fatalf("%s is in a tree that should lack it", c.file)
			}
		})
	}
}

// A policy's plan is cut to what the kernel can do: DropUnsupported takes
// out the fields, one note per missing feature, and what is left resolves.
func TestDropUnsupportedLeavesOutWhatTheKernelLacks(t *testing.T) {
	for _, c := range lackCases {
		t.Run(c.lacks, func(t *testing.T) {
			// One setting the kernel has rides along, so the plan keeps an entry.
			p, err := plan.Parse("made.yaml", []byte("version: 1\n"+c.yaml+"irqs:\n  - {device: eth0, queue: 0, cpus: 1, reason: kept}\n"))
			if err != nil {
				t.Fatal(err)
			}
			_, _, h := olderKernel(t, c.lacks)
			notes := plan.DropUnsupported(p, h)
			if len(notes) != 1 || !strings.Contains(notes[0], c.field) || !strings.Contains(notes[0], c.feature) {
				t.Fatalf("notes %q: want one naming %s and %s", notes, c.field, c.feature)
			}
			if err := plan.Check(p); err != nil {
				t.Fatal(err)
			}
			changes, err := plan.Resolve(p, h)
			if err != nil {
				t.Fatalf("the cut plan does not resolve: %v", err)
			}
			if len(changes) == 0 || len(p.IRQs) != 1 {
				t.Fatalf("the setting the kernel has was dropped too: %d changes, %d irq entries", len(changes), len(p.IRQs))
			}
		})
	}
}

// A kernel whose netdev family has no napi-set (before 6.13) refuses
// per-instance settings by the probe of the family's operations, kept in
// the tree as the live machine's capture keeps it.
func TestNoNAPISetRefused(t *testing.T) {
	dir, _, _ := olderKernel(t)
	facts := `{"ifindex":{"eth0":2},"napis":[{"id":8193,"ifindex":2}],"queues":[],"napi_set":false}`
	if err := os.WriteFile(filepath.Join(dir, kernel.SyntheticDir, "napi.json"), []byte(facts), 0o644); err != nil {
		t.Fatal(err)
	}
	h, err := host.Read(kernel.New(dir), host.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if missing(h, "per-NAPI settings") == nil {
		t.Fatalf("napi-set not found missing: %+v", h.Features)
	}
	p, err := plan.Parse("inst.yaml", []byte("version: 1\nnapi:\n  - {device: eth0, id: 8193, defer_hard_irqs: 2,\n     irq_suspend_timeout: 20000000, reason: r}\n"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = plan.Resolve(p, h)
	for _, want := range []string{"inst.yaml:3: napi[0].defer_hard_irqs: this kernel has no per-NAPI settings", "napi[0].irq_suspend_timeout"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("error %v does not say %q", err, want)
		}
	}
	if notes := plan.DropUnsupported(p, h); len(notes) != 1 || len(p.NAPI) != 0 {
		t.Fatalf("notes %q, %d napi entries left", notes, len(p.NAPI))
	}
}

// effective_affinity_list only informs: a kernel without it still takes
// IRQ affinity, and the host says what it lacks.
func TestNoEffectiveAffinityInforms(t *testing.T) {
	_, _, h := olderKernel(t, "effective_affinity_list")
	if missing(h, "effective IRQ affinity") == nil || missing(h, "IRQ affinity") != nil {
		t.Fatalf("features: %+v", h.Features)
	}
	p, err := plan.Parse("irq.yaml", []byte("version: 1\nirqs:\n  - {device: eth0, queue: 0, cpus: 1, reason: r}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := plan.Resolve(p, h); err != nil {
		t.Fatal(err)
	}
}

func missing(h *host.Host, name string) *host.Feature {
	for _, f := range h.MissingFeatures() {
		if f.Name == name {
			return &f
		}
	}
	return nil
}

// snapshotFiles is every file's content below dir, concatenated.
func snapshotFiles(t *testing.T, dir string) string {
	t.Helper()
	var b strings.Builder
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || d.Type()&os.ModeSymlink != 0 {
			return err
		}
		data, err := os.ReadFile(p)
		b.WriteString(p + "\n")
		b.Write(data)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.String()
}
