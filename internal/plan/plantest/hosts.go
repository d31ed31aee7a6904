package plantest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/irqpilot/irqpilot/internal/cpuset"
	"github.com/irqpilot/irqpilot/internal/host"
	"github.com/irqpilot/irqpilot/internal/hostgen"
	"github.com/irqpilot/irqpilot/internal/kernel"
)

// Fixtures is the shared captured kernel files, from a package directory
// two levels below the module (internal/plan, internal/policy).
const Fixtures = "../../../shared/fixtures/"

// ReadSnapshot reads a host from a shared fixture (a .tgz snapshot or a
// directory tree).
func ReadSnapshot(t testing.TB, name string) *host.Host {
	t.Helper()
	var h *host.Host
	if strings.HasSuffix(name, "gz") {
		_, h = OpenSnapshot(t, Fixtures+name)
	} else {
		var err error
		if h, err = host.Read(kernel.New(Fixtures+name), host.Options{}); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	if len(h.CPUs) == 0 || len(h.IRQs) == 0 {
		t.Fatalf("%s: host has %d CPUs and %d IRQs; the readers returned nothing", name, len(h.CPUs), len(h.IRQs))
	}
	return h
}

// OpenSnapshot opens the snapshot file at path for the length of the test
// and reads its host.
func OpenSnapshot(t testing.TB, path string) (*kernel.FS, *host.Host) {
	t.Helper()
	fs, done, err := kernel.OpenSnapshot(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(done)
	h, err := host.Read(fs, host.Options{})
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return fs, h
}

// GenHost writes a hostgen tree for spec and reads it back.
func GenHost(t testing.TB, spec hostgen.Spec, interrupts []byte) *host.Host {
	t.Helper()
	dir, cleanup, err := hostgen.ScratchDir()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cleanup)
	L, err := hostgen.Build(spec)
	if err != nil {
		t.Fatal(err)
	}
	if err := L.Write(dir); err != nil {
		t.Fatal(err)
	}
	if interrupts != nil {
		if err := os.WriteFile(filepath.Join(dir, "proc/interrupts"), interrupts, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	h, err := host.Read(kernel.New(dir), host.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// WithNAPI is the node_exporter capture (ens10f0, 8 queues) with NAPI facts
// as a 6.18 kernel reports them: 8193 threaded (pid 4321 on CPUs 0-7),
// 8194 not.
func WithNAPI(t testing.TB) *host.Host {
	t.Helper()
	h := ReadSnapshot(t, "node_exporter")
	f, tr := false, true
	z32, z64 := uint32(0), uint64(0)
	pid, irq := 4321, 40
	all := cpuset.Of(0, 1, 2, 3, 4, 5, 6, 7)
	h.NAPI = []host.NAPI{
		{ID: 8193, Device: "ens10f0", IRQ: &irq, PID: &pid, CPUs: &all, PIDStart: 777, Threaded: &tr, DeferHardIRQs: &z32, GROFlushTimeout: &z64, IRQSuspendTimeout: &z64},
		{ID: 8194, Device: "ens10f0", Threaded: &f, DeferHardIRQs: &z32, GROFlushTimeout: &z64, IRQSuspendTimeout: &z64},
	}
	h.Unavailable = nil
	return h
}
