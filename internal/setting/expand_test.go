package setting

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/irqpilot/irqpilot/internal/cpuset"
	"github.com/irqpilot/irqpilot/internal/kernel"
)

func TestExpand(t *testing.T) {
	fs := tree(t, map[string]string{
		"proc/100/comm":            "memcached\n",
		"proc/100/stat":            statLine(100, "memcached", 7000),
		"proc/101/stat":            statLine(101, "memcached", 7001),
		"proc/100/task/100/stat":   "",
		"proc/100/task/101/stat":   "",
		"proc/200/comm":            "sshd\n",
		"etc/sysconfig/irqbalance": "IRQBALANCE_ARGS=\n",
	})
	irq38 := IRQAffinity(38, "irq 38", cpuset.Of(0, 1), "spread")
	irq38.Old, irq38.Status, irq38.Line = "0-3", StatusPending, 3
	irq39 := IRQAffinity(39, "irq 39", cpuset.Of(0), "")
	irq39.Status, irq39.Note = StatusSkipped, "kernel-managed"
	rps := RPSFlowCnt("eth0", 0, 4096, "rfs")
	rps.Old, rps.Status = "0", StatusPending
	memcached := Change{Kind: KindApp, Target: "memcached", App: &AppSelector{Comm: "memcached"}, Value: "2-3", Reason: "app", Line: 5}
	postgres := Change{Kind: KindApp, Target: "postgres", App: &AppSelector{Comm: "postgres"}, Value: "1", Line: 7}
	ban := Change{Kind: KindIrqbalance, Target: "irqbalance", Value: "banned_cpus=1-3", Reason: "isolate", Line: 9}

	changes, skipped, err := Expand(fs, []Change{irq38, memcached, postgres, irq39, rps, ban})
	if err != nil {
		t.Fatal(err)
	}
	wantIRQ, wantRPS := irq38, rps
	wantIRQ.Old, wantIRQ.Status = "", ""
	wantRPS.Old, wantRPS.Status = "", ""
	// Derived changes keep their plan entry's line, so errors can name it.
	t100 := ThreadAffinity(100, 7000, "memcached pid 100 thread 100", cpuset.Of(2, 3), "app")
	t101 := ThreadAffinity(101, 7001, "memcached pid 100 thread 101", cpuset.Of(2, 3), "app")
	t100.Line, t101.Line = 5, 5
	want := []Change{
		{Kind: KindIrqbalanceBan, Target: "irqbalance banned CPUs", Path: "etc/sysconfig/irqbalance", Value: "1-3", Reason: "isolate", Line: 9},
		wantIRQ,
		t100,
		t101,
		wantRPS,
	}
	if d := cmp.Diff(want, changes); d != "" {
		t.Errorf("changes (-want +got):\n%s", d)
	}
	noMatch := postgres
	noMatch.Kind, noMatch.Status, noMatch.Note = KindThreadAffinity, StatusSkipped, "no running process matches postgres"
	if wantSkipped := []Change{noMatch, irq39}; !cmp.Equal(skipped, wantSkipped) {
		t.Errorf("skipped:\n%s\nwant:\n%s", dump(skipped), dump(wantSkipped))
	}
	for i := range changes {
		if err := Check(&changes[i]); err != nil {
			t.Errorf("expanded change %d refused: %v", i, err)
		}
	}
}

func TestExpandIrqbalanceFirst(t *testing.T) {
	fs := tree(t, nil)
	irq := IRQAffinity(38, "irq 38", cpuset.Of(1), "")
	stop := Change{Kind: KindIrqbalance, Target: "irqbalance", Value: "stopped", Reason: "r", Old: "running", Status: StatusPending}
	changes, skipped, err := Expand(fs, []Change{irq, irq, stop})
	if err != nil {
		t.Fatal(err)
	}
	if len(changes) != 3 || len(skipped) != 0 {
		t.Fatalf("Expand = %s / %s", dump(changes), dump(skipped))
	}
	if want := (Change{Kind: KindIrqbalance, Target: "irqbalance", Value: "stopped", Reason: "r"}); !cmp.Equal(changes[0], want) {
		t.Errorf("first change = %+v, want the daemon stopped first", changes[0])
	}
	if c := IrqbalanceBan(fs, cpuset.Of(1), ""); c.Path != debianConf {
		t.Errorf("ban path without a file = %q", c.Path)
	}

	// irqbalance left alone is reported, not written.
	leave := Change{Kind: KindIrqbalance, Target: "irqbalance", Value: "running", Status: StatusSkipped, Note: "left alone"}
	changes, skipped, err = Expand(fs, []Change{irq, leave})
	if err != nil {
		t.Fatal(err)
	}
	if len(changes) != 1 || changes[0].Kind != KindIRQAffinity || len(skipped) != 1 || skipped[0].Note != "left alone" {
		t.Errorf("Expand with irqbalance skipped = %s / %s", dump(changes), dump(skipped))
	}
}

func TestExpandPIDLive(t *testing.T) {
	live := kernel.New("/")
	pid := child(t)
	start, err := live.TaskStart(pid)
	if err != nil {
		t.Skipf("cannot read the child's start time: %v", err)
	}
	a := Change{Kind: KindApp, Target: fmt.Sprintf("pid %d", pid), App: &AppSelector{PID: pid}, Value: "0", Reason: "r"}
	changes, skipped, err := Expand(live, []Change{a})
	if err != nil {
		t.Fatal(err)
	}
	want := []Change{ThreadAffinity(pid, start, fmt.Sprintf("sleep pid %d thread %d", pid, pid), cpuset.Of(0), "r")}
	if !cmp.Equal(changes, want) || len(skipped) != 0 {
		t.Errorf("Expand(pid %d) = %s / %s; want %s", pid, dump(changes), dump(skipped), dump(want))
	}
	if start == 0 {
		t.Error("the thread's start time is 0: revert could not tell a reused id")
	}
}

func TestExpandNothingMatches(t *testing.T) {
	fs := tree(t, map[string]string{"proc/1/comm": "init\n"})
	a := Change{Kind: KindApp, Target: "pid 4242", App: &AppSelector{PID: 4242}, Value: "0", Line: 2}
	changes, skipped, err := Expand(fs, []Change{a})
	if err != nil {
		t.Fatal(err)
	}
	if len(changes) != 0 || len(skipped) != 1 {
		t.Fatalf("Expand = %s / %s; want one skipped entry", dump(changes), dump(skipped))
	}
	s := skipped[0]
	if s.Kind != KindThreadAffinity || s.Status != StatusSkipped || !strings.Contains(s.Note, "pid 4242") || s.Line != 2 {
		t.Errorf("skipped entry = %+v", s)
	}
}

func TestExpandErrors(t *testing.T) {
	fs := tree(t, map[string]string{"proc/1/comm": "init\n"})
	for _, tc := range []struct {
		c    Change
		want string
	}{
		{Change{Kind: "smp-affinity", Target: "irq 1", Value: "0", Line: 3}, "plan line 3: irq 1"},
		{Change{Kind: KindApp, Target: "x", App: &AppSelector{}, Value: "0", Line: 4}, "plan line 4: app x"},
		{Change{Kind: KindApp, Target: "init", App: &AppSelector{Comm: "init"}, Value: "zero", Line: 5}, "plan line 5: app init"},
		{Change{Kind: KindIrqbalance, Target: "irqbalance", Value: "banned_cpus=x", Line: 6}, "plan line 6: irqbalance"},
	} {
		if _, _, err := Expand(fs, []Change{tc.c}); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Expand(%s) error = %v, want %q", show(tc.c), err, tc.want)
		}
	}
}

func dump(cs []Change) string {
	var b strings.Builder
	for _, c := range cs {
		fmt.Fprintf(&b, "  %s tid %d start %d path %q value %q old %q status %q note %q reason %q\n",
			c.Kind, c.TID, c.TIDStart, c.Path, c.Value, c.Old, c.Status, c.Note, c.Reason)
	}
	return b.String()
}
