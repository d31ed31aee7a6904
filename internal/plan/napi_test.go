package plan

import (
	"errors"
	"strings"
	"testing"

	"github.com/irqpilot/irqpilot/internal/host"
	"github.com/irqpilot/irqpilot/internal/plan/plantest"
	"github.com/irqpilot/irqpilot/internal/setting"
)

const napiPlan = `version: 1
napi:
  - device: ens10f0
    defer_hard_irqs: 2
    gro_flush_timeout: 200000
    threaded: true
    reason: device-wide deferral
  - device: ens10f0
    id: 8193
    threaded: true
    defer_hard_irqs: 100
    gro_flush_timeout: 50000
    irq_suspend_timeout: 20000000
    cpus: 3
    reason: suspended while the app busy-polls
  - {device: ens10f0, id: 8194, cpus: [2], reason: beside the consumer}
busy_poll: {busy_read: 50, busy_poll: 50, reason: busy-poll for opted-in sockets}
`

func TestParseNAPI(t *testing.T) {
	p, err := Parse("p.yaml", []byte(napiPlan))
	if err != nil {
		t.Fatal(err)
	}
	if len(p.NAPI) != 3 || p.BusyPoll == nil {
		t.Fatalf("%+v", p)
	}
	e := p.NAPI[1]
	if e.Device != "ens10f0" || *e.ID != 8193 || !*e.Threaded || *e.DeferHardIRQs != 100 || *e.GROFlushTimeout != 50000 ||
		*e.IRQSuspendTimeout != 20000000 || e.CPUs.String() != "3" || e.Line != 8 {
		t.Errorf("napi[1] %+v", e)
	}
	if p.NAPI[0].ID != nil || p.NAPI[2].CPUs.String() != "2" || *p.BusyPoll.BusyRead != 50 || *p.BusyPoll.BusyPoll != 50 || p.BusyPoll.Line != 17 {
		t.Errorf("%+v %+v", p.NAPI, p.BusyPoll)
	}
	// Round trip through the file format.
	plantest.RoundTrip(t, "napi plan", p, Parse)
}

func TestParseNAPIErrors(t *testing.T) {
	for _, tc := range []struct{ plan, want string }{
		{"napi:\n  - {device: eth0, defer_hard_irqs: -1, reason: r}", "p.yaml:3: napi[0].defer_hard_irqs: -1 is negative"},
		{"napi:\n  - {device: eth0, defer_hard_irqs: 2000000, reason: r}", "napi[0].defer_hard_irqs: 2000000 exceeds the maximum 1048576"},
		{"napi:\n  - {device: eth0, gro_flush_timeout: 1000000000, reason: r}", "napi[0].gro_flush_timeout: 1000000000 exceeds the maximum 100000000"},
		{"napi:\n  - {device: eth0, id: 5, irq_suspend_timeout: -5, reason: r}", "napi[0].irq_suspend_timeout: -5 is negative"},
		{"napi:\n  - {device: eth0, irq_suspend_timeout: 20000000, reason: r}", "napi[0].irq_suspend_timeout: per NAPI instance only"},
		{"napi:\n  - {device: eth0, threaded: yes, reason: r}", `napi[0].threaded: "yes" is not true or false`},
		{"napi:\n  - {device: eth0, id: 0, threaded: true, reason: r}", "napi[0].id: 0 is below the minimum 1"},
		{"napi:\n  - {device: eth0, id: 4294967296, threaded: true, reason: r}", "napi[0].id: 4294967296 exceeds the maximum"},
		{"napi:\n  - {device: eth0, reason: r}", "napi[0]: nothing to set"},
		{"napi:\n  - {threaded: true, reason: r}", "napi[0].device: missing"},
		{"napi:\n  - {device: eth0, threaded: true}", "napi[0].reason: missing"},
		{"napi:\n  - {device: eth0, coalesce: 5, reason: r}", `napi[0].coalesce: unknown field "coalesce"`},
		{"napi:\n  - {device: eth0, cpus: \"\", reason: r}", "napi[0].cpus"},
		{"napi:\n  - {device: eth0, id: 3, threaded: true, reason: r}\n  - {device: eth0, id: 3, cpus: 1, reason: r}", "napi[1]: duplicate: eth0 napi 3 is already set by the entry at line 3"},
		{"busy_poll: {busy_read: 200000, reason: r}", "busy_poll.busy_read: 200000 exceeds the maximum 100000"},
		{"busy_poll: {busy_poll: -1, reason: r}", "busy_poll.busy_poll: -1 is negative"},
		{"busy_poll: {reason: r}", "busy_poll: nothing to set"},
	} {
		_, err := Parse("p.yaml", []byte("version: 1\n"+tc.plan+"\n"))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s:\n got %v\nwant %q", tc.plan, err, tc.want)
		}
	}
}

func TestResolveNAPI(t *testing.T) {
	h := plantest.WithNAPI(t)
	p, err := Parse("p.yaml", []byte(napiPlan))
	if err != nil {
		t.Fatal(err)
	}
	got, err := Resolve(p, h)
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, c := range got {
		if err := setting.Check(&c); err != nil && c.Status != setting.StatusSkipped {
			t.Errorf("%s: %v", c.Target, err)
		}
		id := ""
		if c.NAPI != nil {
			id = itoa(int(*c.NAPI))
		}
		lines = append(lines, strings.Join([]string{string(c.Kind), c.Device, id, itoa(c.TID), c.Value, c.Old, string(c.Status)}, " "))
	}
	want := []string{
		"dev-threaded ens10f0  0 1  ",
		"dev-defer-hard-irqs ens10f0  0 2  ",
		"dev-gro-flush-timeout ens10f0  0 200000  ",
		"napi-threaded ens10f0 8193 0 1 1 ",
		"napi-defer-hard-irqs ens10f0 8193 0 100 0 ",
		"napi-gro-flush-timeout ens10f0 8193 0 50000 0 ",
		"napi-irq-suspend-timeout ens10f0 8193 0 20000000 0 ",
		"thread-affinity ens10f0  4321 3 0-7 ",
		"thread-affinity ens10f0  0 2  skipped",
		"sysctl   0 50  ",
		"sysctl   0 50  ",
	}
	if strings.Join(lines, "\n") != strings.Join(want, "\n") {
		t.Errorf("resolved:\n%s\nwant:\n%s", strings.Join(lines, "\n"), strings.Join(want, "\n"))
	}
	if c := got[7]; c.TIDStart != 777 || c.Line != 8 {
		t.Errorf("thread change %+v", c)
	}
	if c := got[8]; !strings.Contains(c.Note, "not threaded") || !strings.Contains(c.Note, "apply the plan again") {
		t.Errorf("unthreaded placement note %q", c.Note)
	}
	// An id the host does not have: file:line:field.
	bad := "version: 1\nnapi:\n  - {device: ens10f0, id: 9, threaded: true, reason: r}\n"
	p, _ = Parse("p.yaml", []byte(bad))
	if _, err := Resolve(p, h); err == nil || !strings.Contains(err.Error(), "p.yaml:3: napi[0].id: ens10f0 has no NAPI instance 9 (it has: 8193, 8194") {
		t.Errorf("unknown id: %v", err)
	}
	bad = "version: 1\nnapi:\n  - {device: eth9, threaded: true, reason: r}\n"
	p, _ = Parse("p.yaml", []byte(bad))
	if _, err := Resolve(p, h); err == nil || !strings.Contains(err.Error(), "napi[0].device: network interface eth9 not found") {
		t.Errorf("unknown device: %v", err)
	}
	bad = "version: 1\nnapi:\n  - {device: ens10f0, id: 8193, cpus: 99, reason: r}\n"
	p, _ = Parse("p.yaml", []byte(bad))
	if _, err := Resolve(p, h); err == nil || !strings.Contains(err.Error(), "napi[0].cpus: CPU 99 does not exist") {
		t.Errorf("absent CPU: %v", err)
	}
}

// A captured older host (no NAPI facts): every per-NAPI setting comes back
// skipped as unsupported, the plan still resolves.
func TestResolveNAPIOlderCapture(t *testing.T) {
	h := plantest.ReadSnapshot(t, "node_exporter")
	p, err := Parse("p.yaml", []byte(napiPlan))
	if err != nil {
		t.Fatal(err)
	}
	got, err := Resolve(p, h)
	if err != nil {
		t.Fatalf("an older host aborted the plan: %v", err)
	}
	perNAPI := 0
	for _, c := range got {
		if c.NAPI != nil || c.Kind == setting.KindThreadAffinity {
			perNAPI++
			if c.Status != setting.StatusSkipped || !strings.HasPrefix(c.Note, "unsupported") {
				t.Errorf("%s: %s %q, want skipped as unsupported", c.Target, c.Status, c.Note)
			}
		}
	}
	if perNAPI != 6 {
		t.Errorf("%d per-NAPI changes, want 6 (4 values of 8193, 2 placements)", perNAPI)
	}
}

func TestScopeNAPI(t *testing.T) {
	h := plantest.WithNAPI(t)
	parse := func() Plan {
		p, err := Parse("p.yaml", []byte(strings.Replace(napiPlan, "busy_poll:", "  - {device: lo, threaded: true, reason: r}\nbusy_poll:", 1)))
		if err != nil {
			t.Fatal(err)
		}
		return *p
	}
	q := parse()
	ScopeToDevices(&q, h, []string{"ens10f0"}, false)
	if len(q.NAPI) != 3 || q.BusyPoll != nil || !strings.Contains(strings.Join(q.Notes, " "), "busy_read/busy_poll (machine-wide") {
		t.Errorf("scoped: %d napi, busy %v, notes %q", len(q.NAPI), q.BusyPoll, q.Notes)
	}
	q = parse()
	ScopeToDevices(&q, h, []string{"lo"}, true)
	if len(q.NAPI) != 1 || q.BusyPoll == nil {
		t.Errorf("scoped to lo, machine-wide: %d napi, busy %v", len(q.NAPI), q.BusyPoll)
	}
	q = parse()
	if missing := DropMissingDevices(&q, &host.Host{NICs: []host.NIC{{Name: "lo"}}}); len(missing) != 1 || len(q.NAPI) != 1 {
		t.Errorf("boot: missing %v, napi %d", missing, len(q.NAPI))
	}
}

// Plans built in Go get the decoder's range checks.
func TestCheckNAPIInGo(t *testing.T) {
	big := uint64(setting.MaxNAPITimeoutNs + 1)
	neg := -1
	p := &Plan{Version: 1, NAPI: []NAPIEntry{{Device: "eth0", GROFlushTimeout: &big, Reason: "r"}},
		BusyPoll: &BusyPollEntry{BusyRead: &neg, Reason: "r"}}
	err := Check(p)
	var errs Errors
	if !errors.As(err, &errs) || len(errs) != 2 {
		t.Fatalf("%v", err)
	}
	if !strings.Contains(err.Error(), "napi[0].gro_flush_timeout") || !strings.Contains(err.Error(), "busy_poll.busy_read") {
		t.Errorf("%v", err)
	}
}
