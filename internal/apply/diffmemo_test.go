package apply

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/irqpilot/irqpilot/internal/setting"
)

// DiffWith returns what Diff returns, pass after pass, while the kernel
// values change behind it (drift, and back); changed changes are validated
// again, so a bad change is refused even after good passes.
func TestDiffWithMemoMatchesDiff(t *testing.T) {
	fs := tree(t, baseTree)
	a := New(fs, t.TempDir())
	changes := sampleChanges()
	var m DiffMemo
	check := func(step string) {
		t.Helper()
		want, err := a.Diff(changes)
		if err != nil {
			t.Fatalf("%s: Diff: %v", step, err)
		}
		got, err := a.DiffWith(changes, &m)
		if err != nil {
			t.Fatalf("%s: DiffWith: %v", step, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%s: DiffWith\n%+v\nDiff\n%+v", step, got, want)
		}
	}
	check("first")
	check("again")
	write := func(p, v string) {
		if err := os.WriteFile(filepath.Join(fs.Root(), p), []byte(v), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("proc/irq/41/smp_affinity_list", "2\n") // drifted
	check("irq 41 drifted")
	write("proc/irq/41/smp_affinity_list", "0-3\n") // back
	check("irq 41 back")
	write("proc/irq/40/smp_affinity_list", "2\n") // now as wanted
	check("irq 40 in force")
	os.Remove(filepath.Join(fs.Root(), "sys/class/net/veth0/queues/tx-0/xps_cpus")) // skipped
	check("xps gone")
	changes[1].Value = "1"
	check("a change edited")
	changes = append(changes, setting.Change{Kind: setting.KindRPSCPUs, Target: "veth0 rx-1", Path: "sys/class/net/veth0/queues/rx-1/rps_cpus", Value: "zz"})
	if _, err := a.DiffWith(changes, &m); err == nil || !strings.Contains(err.Error(), `value "zz"`) {
		t.Errorf("a bad change after good passes: %v", err)
	}
	changes = changes[:len(changes)-1]
	check("bad change removed")
}
