package metrics

import (
	"fmt"
	"net/http/httptest"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"

	names "github.com/irqpilot/irqpilot/internal/agent/metricnames"
	"github.com/irqpilot/irqpilot/internal/cpuset"
	"github.com/irqpilot/irqpilot/internal/host"
	"github.com/irqpilot/irqpilot/internal/hostgen"
	"github.com/irqpilot/irqpilot/internal/kernel"
	"github.com/irqpilot/irqpilot/internal/livetest"
)

// The metrics of a 256-CPU host pass client_golang's lint and promtool and
// stay low-cardinality: per CPU, per device IRQ, per finding.
func TestMetricsPromtoolClean(t *testing.T) {
	root, h := livetest.GenHost(t, hostgen.DefaultSpec())
	fs := kernel.New(root)
	reg, m, err := New(&Source{FS: fs, Host: func() *host.Host { return h }})
	if err != nil {
		t.Fatal(err)
	}
	m.DriftRepairs.WithLabelValues("rps-cpus", "eth0").Inc()
	m.FindingActive.WithLabelValues("interrupt-bound-cpu").Set(1)
	m.Adaptations.WithLabelValues("worse").Inc()
	m.PredictionError.WithLabelValues("busy").Set(28.9)
	m.PredictionError.WithLabelValues("irq").Set(21.6)
	// One scrape, looked at by client_golang's testutil.
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	scrape := prometheus.GathererFunc(func() ([]*dto.MetricFamily, error) { return mfs, nil })
	if problems, err := testutil.GatherAndLint(scrape); err != nil || len(problems) > 0 {
		t.Errorf("lint: %v %+v", err, problems)
	}
	devIRQs := 0
	for _, q := range h.IRQs {
		if q.Device != "" {
			devIRQs++
		}
	}
	series := func(name string) int {
		t.Helper()
		n, err := testutil.GatherAndCount(scrape, name)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	for name, want := range map[string]int{
		names.CPUIRQSeconds: 250, names.CPUSoftIRQSeconds: 250, names.CPUSeconds: 6 * 250,
		names.NodeInfo:       1,
		names.SoftnetDropped: 250, names.SoftnetTimesSqueezed: 250,
		names.IRQInfo: devIRQs, names.DriftRepairs: 1, names.FindingActive: 1,
		names.Adaptations: len(Verdicts), names.PredictionError: 2,
		names.Namespace + "_process_cpu_seconds_total": 1, names.ScrapeSuccess: len(Names()),
	} {
		if n := series(name); n != want {
			t.Errorf("%s: %d series, want %d", name, n, want)
		}
	}
	if q := series(names.QueueInterrupts); q == 0 || q > devIRQs {
		t.Errorf("%s: %d series (device IRQs %d)", names.QueueInterrupts, q, devIRQs)
	}
	// Every collector succeeded, and the node is named by its host name.
	if h.Hostname == "" {
		t.Fatal("the tree's host has no name")
	}
	want := fmt.Sprintf("# HELP %[1]s The node's host name (/proc/sys/kernel/hostname). Always 1.\n# TYPE %[1]s gauge\n%[1]s{nodename=%[2]q} 1\n",
		names.NodeInfo, h.Hostname)
	want += fmt.Sprintf("# HELP %[1]s Whether a collector succeeded (1) or failed (0) on this scrape.\n# TYPE %[1]s gauge\n", names.ScrapeSuccess)
	for _, c := range Names() {
		want += fmt.Sprintf("%s{collector=%q} 1\n", names.ScrapeSuccess, c)
	}
	if err := testutil.GatherAndCompare(scrape, strings.NewReader(want), names.NodeInfo, names.ScrapeSuccess); err != nil {
		t.Error(err)
	}
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Skip("promtool not installed (Debian package prometheus; make deps)")
	}
	rec := httptest.NewRecorder()
	Handler(reg).ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	cmd := exec.Command(promtool, "check", "metrics")
	cmd.Stdin = rec.Body
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("promtool check metrics: %v\n%s", err, out)
	}
}

// The one metric label holding a CPU set, irqpilot_irq_info's cpus, is a
// cpulist (smp_affinity_list as read), never a mask.
func TestMetricsCPUsLabelIsCPUList(t *testing.T) {
	root, h := livetest.GenHost(t, hostgen.Spec{CPUs: 40, Packages: 1, Nodes: 1, ThreadsPerCore: 2, Offline: hostgen.NoOffline,
		NICs: []hostgen.NICSpec{{Name: "eth0", Driver: "ice", Slot: 3, Queues: 4}}, NVMeQueues: -1})
	fs := kernel.New(root)
	reg, _, err := New(&Source{FS: fs, Host: func() *host.Host { return h }})
	if err != nil {
		t.Fatal(err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, mf := range mfs {
		if mf.GetName() != names.IRQInfo {
			continue
		}
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			irq, _ := strconv.Atoi(labels["irq"])
			q := h.IRQ(irq)
			got, err := cpuset.Parse(labels["cpus"])
			if err != nil || q == nil || q.Affinity == nil || !got.Equal(*q.Affinity) || labels["cpus"] != q.Affinity.String() {
				t.Errorf("irq_info %v: cpus is not irq's affinity as a cpulist (%v)", labels, err)
			}
			n++
		}
	}
	if n == 0 {
		t.Fatal("no " + names.IRQInfo + " series")
	}
}

// Every verdict of irqpilot_adaptations_total is present from the start, at
// 0; irqpilot_prediction_error_percent is absent until an adaptation was
// judged (a 0 would claim a perfect prediction), then one series per figure.
func TestAdaptationVerdictMetrics(t *testing.T) {
	root, h := livetest.GenHost(t, hostgen.Spec{CPUs: 2, Packages: 1, Nodes: 1, ThreadsPerCore: 1, Offline: hostgen.NoOffline,
		NICs: []hostgen.NICSpec{}, NVMeQueues: -1, Hostname: "two"})
	reg, m, err := New(&Source{FS: kernel.New(root), Host: func() *host.Host { return h }})
	if err != nil {
		t.Fatal(err)
	}
	want := "# HELP " + names.Adaptations + " Adaptations judged against their prediction, by verdict: confirmed, missed, worse or inconclusive.\n# TYPE " + names.Adaptations + " counter\n"
	for _, v := range []string{"confirmed", "inconclusive", "missed", "worse"} {
		want += names.Adaptations + `{verdict="` + v + `"} 0` + "\n"
	}
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), names.Adaptations); err != nil {
		t.Error(err)
	}
	if n, err := testutil.GatherAndCount(reg, names.PredictionError); err != nil || n != 0 {
		t.Errorf("%s: %d series before any adaptation (%v), want none", names.PredictionError, n, err)
	}
	m.Adaptations.WithLabelValues("worse").Inc()
	m.PredictionError.WithLabelValues("busy").Set(28.9)
	m.PredictionError.WithLabelValues("irq").Set(21.6)
	if v := testutil.ToFloat64(m.Adaptations.WithLabelValues("worse")); v != 1 {
		t.Errorf("worse = %v, want 1", v)
	}
	want = "# HELP " + names.PredictionError + " The last judged adaptation's mean absolute prediction error over the CPUs, in points of a CPU, of busy or interrupt time.\n# TYPE " + names.PredictionError + " gauge\n" +
		names.PredictionError + `{figure="busy"} 28.9` + "\n" + names.PredictionError + `{figure="irq"} 21.6` + "\n"
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), names.PredictionError); err != nil {
		t.Error(err)
	}
}
