// Package metrics exports the agent's view of interrupt placement to
// Prometheus, node_exporter style: one collector per kernel source, each
// listed in the collectors table and reading its source at scrape time
// through kernel.FS, plus the agent's own counters and the process
// collector. Labels are kept to low cardinality: per CPU, per device queue
// IRQ, per finding id, per setting kind and device.
package metrics

import (
	"errors"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	names "github.com/irqpilot/irqpilot/internal/agent/metricnames"
	"github.com/irqpilot/irqpilot/internal/host"
	"github.com/irqpilot/irqpilot/internal/kernel"
)

// Source is what the collectors read: the machine, and the agent's current
// host model (which IRQ serves which device queue).
type Source struct {
	FS *kernel.FS
	// Host returns the latest host model (nil: not read yet).
	Host func() *host.Host
}

// collector is one source of metrics, read at scrape time.
type collector interface {
	Update(ch chan<- prometheus.Metric) error
}

// collectors is the table of kernel sources, by name (the "collector" label
// of irqpilot_scrape_collector_success).
var sources = []struct {
	name string
	new  func(*Source) collector
}{
	{"cpu", newCPUCollector},
	{"node", newNodeCollector},
	{"interrupts", newInterruptsCollector},
	{"softnet", newSoftnetCollector},
}

// Names lists the kernel collectors.
func Names() []string {
	out := make([]string, len(sources))
	for i, c := range sources {
		out[i] = c.name
	}
	return out
}

var (
	scrapeSuccess = prometheus.NewDesc(names.ScrapeSuccess,
		"Whether a collector succeeded (1) or failed (0) on this scrape.", []string{"collector"}, nil)
	scrapeDuration = prometheus.NewDesc(names.ScrapeDuration,
		"How long a collector took on this scrape.", []string{"collector"}, nil)
)

// exporter runs every kernel collector on each scrape.
type exporter struct {
	names []string
	cs    []collector
}

func (e *exporter) Describe(ch chan<- *prometheus.Desc) {
	ch <- scrapeSuccess
	ch <- scrapeDuration
}

func (e *exporter) Collect(ch chan<- prometheus.Metric) {
	var wg sync.WaitGroup
	for i := range e.cs {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			t := time.Now()
			err := e.cs[i].Update(ch)
			ok := 1.0
			if err != nil {
				ok = 0
			}
			ch <- prometheus.MustNewConstMetric(scrapeDuration, prometheus.GaugeValue, time.Since(t).Seconds(), e.names[i])
			ch <- prometheus.MustNewConstMetric(scrapeSuccess, prometheus.GaugeValue, ok, e.names[i])
		}(i)
	}
	wg.Wait()
}

// Agent holds the counters and gauges the agent updates.
type Agent struct {
	// DriftRepairs is irqpilot_drift_repairs_total{setting,device}.
	DriftRepairs *prometheus.CounterVec
	// Applied is irqpilot_settings_applied_total{setting,device}: settings
	// written because they were new (start, reload, a device that appeared).
	Applied             *prometheus.CounterVec
	AdaptationsApplied  prometheus.Counter
	AdaptationsReverted prometheus.Counter
	// Adaptations is irqpilot_adaptations_total{verdict}: adaptations
	// judged, by the verdict of their prediction (confirmed, missed,
	// worse, inconclusive; every verdict always present).
	Adaptations *prometheus.CounterVec
	// PredictionError is irqpilot_prediction_error_percent{figure}: the
	// last judged adaptation's mean absolute error over the CPUs, in
	// points of a CPU, of busy time (figure="busy") and interrupt time
	// (figure="irq"). Absent until an adaptation was judged on measured
	// CPUs.
	PredictionError *prometheus.GaugeVec
	// FindingActive is irqpilot_finding_active{id}: 1 while doctor's
	// finding id holds.
	FindingActive *prometheus.GaugeVec
	Enforced      prometheus.Gauge
	Frozen        prometheus.Gauge
	Waiting       prometheus.Gauge
	Passes        prometheus.Counter
	PassErrors    prometheus.Counter
	// Reloads is irqpilot_plan_reloads_total{result="applied"|"rejected"};
	// ReloadRejected is 1 while the last reload was rejected (the plan in
	// force is the one before it).
	Reloads        *prometheus.CounterVec
	ReloadRejected prometheus.Gauge
}

// Verdicts are the values of irqpilot_adaptations_total's verdict label
// (package verify's verdicts; this package does not import it).
var Verdicts = []string{"confirmed", "missed", "worse", "inconclusive"}

// New returns a registry with every collector and the agent's metrics.
func New(src *Source) (*prometheus.Registry, *Agent, error) {
	reg := prometheus.NewRegistry()
	ex := &exporter{}
	for _, c := range sources {
		ex.names = append(ex.names, c.name)
		ex.cs = append(ex.cs, c.new(src))
	}
	a := &Agent{
		DriftRepairs: prometheus.NewCounterVec(prometheus.CounterOpts{Name: names.DriftRepairs,
			Help: "Settings the agent found changed behind its back and restored."}, []string{"setting", "device"}),
		Applied: prometheus.NewCounterVec(prometheus.CounterOpts{Name: names.SettingsApplied,
			Help: "Settings written because the plan (start, reload, adaptation) or a device that appeared needed them."}, []string{"setting", "device"}),
		AdaptationsApplied: prometheus.NewCounter(prometheus.CounterOpts{Name: names.AdaptationsApplied,
			Help: "Plans the agent computed from evidence of harm and applied (--adapt)."}),
		AdaptationsReverted: prometheus.NewCounter(prometheus.CounterOpts{Name: names.AdaptationsReverted,
			Help: "Adaptations reverted because verification found them no better."}),
		Adaptations: prometheus.NewCounterVec(prometheus.CounterOpts{Name: names.Adaptations,
			Help: "Adaptations judged against their prediction, by verdict: confirmed, missed, worse or inconclusive."}, []string{"verdict"}),
		PredictionError: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: names.PredictionError,
			Help: "The last judged adaptation's mean absolute prediction error over the CPUs, in points of a CPU, of busy or interrupt time."}, []string{"figure"}),
		FindingActive: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: names.FindingActive,
			Help: "1 while the finding (irqpilot doctor's id) holds, else 0."}, []string{"id"}),
		Enforced: prometheus.NewGauge(prometheus.GaugeOpts{Name: names.Enforced,
			Help: "Settings the agent currently enforces."}),
		Frozen: prometheus.NewGauge(prometheus.GaugeOpts{Name: names.Frozen,
			Help: "Settings no longer enforced because something changed them back and forth too often, or parked because their write kept failing (see irqpilot status)."}),
		Waiting: prometheus.NewGauge(prometheus.GaugeOpts{Name: names.Waiting,
			Help: "Plan entries waiting for a device to appear or a CPU to come online."}),
		Passes: prometheus.NewCounter(prometheus.CounterOpts{Name: names.Passes,
			Help: "Enforcement passes run."}),
		PassErrors: prometheus.NewCounter(prometheus.CounterOpts{Name: names.PassErrors,
			Help: "Enforcement passes that failed (the log says why)."}),
		Reloads: prometheus.NewCounterVec(prometheus.CounterOpts{Name: names.Reloads,
			Help: "Plan reloads (SIGHUP) by result: applied, or rejected with the previous plan kept."}, []string{"result"}),
		ReloadRejected: prometheus.NewGauge(prometheus.GaugeOpts{Name: names.ReloadRejected,
			Help: "1 while the last plan reload was rejected and the previous plan is still enforced (irqpilot status says why), else 0."}),
	}
	for _, r := range []string{"applied", "rejected"} {
		a.Reloads.WithLabelValues(r)
	}
	for _, v := range Verdicts {
		a.Adaptations.WithLabelValues(v)
	}
	for _, c := range []prometheus.Collector{ex, a.DriftRepairs, a.Applied, a.AdaptationsApplied, a.AdaptationsReverted,
		a.Adaptations, a.PredictionError,
		a.FindingActive, a.Enforced, a.Frozen, a.Waiting, a.Passes, a.PassErrors, a.Reloads, a.ReloadRejected,
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{Namespace: names.Namespace})} {
		if err := reg.Register(c); err != nil {
			return nil, nil, err
		}
	}
	return reg, a, nil
}

// Handler serves the registry in the Prometheus text format.
func Handler(reg *prometheus.Registry) http.Handler {
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})
}

// cpu: per-CPU hardirq and softirq seconds from /proc/stat, and the other
// modes (user, nice, system, idle, iowait, steal) under one name with a mode
// label, so that per-core utilisation can be charted from Prometheus
// (irqpilot report --prometheus).
type cpuCollector struct {
	src             *Source
	irq, soft, mode *prometheus.Desc
}

func newCPUCollector(src *Source) collector {
	return &cpuCollector{src: src,
		irq: prometheus.NewDesc(names.CPUIRQSeconds,
			"Seconds the CPU spent in hardirq context (/proc/stat).", []string{"cpu"}, nil),
		soft: prometheus.NewDesc(names.CPUSoftIRQSeconds,
			"Seconds the CPU spent in softirq context (/proc/stat).", []string{"cpu"}, nil),
		mode: prometheus.NewDesc(names.CPUSeconds,
			"Seconds the CPU spent in each mode other than irq and softirq (/proc/stat; user includes guest).", []string{"cpu", "mode"}, nil),
	}
}

func (c *cpuCollector) Update(ch chan<- prometheus.Metric) error {
	st, err := c.src.FS.StatCPUs()
	if err != nil {
		return err
	}
	for _, s := range st {
		cpu := strconv.Itoa(s.CPU)
		ch <- prometheus.MustNewConstMetric(c.irq, prometheus.CounterValue, s.IRQ, cpu)
		ch <- prometheus.MustNewConstMetric(c.soft, prometheus.CounterValue, s.SoftIRQ, cpu)
		for _, m := range []struct {
			name string
			v    float64
		}{{"user", s.User}, {"nice", s.Nice}, {"system", s.System}, {"idle", s.Idle}, {"iowait", s.IOWait}, {"steal", s.Steal}} {
			ch <- prometheus.MustNewConstMetric(c.mode, prometheus.CounterValue, m.v, cpu, m.name)
		}
	}
	return nil
}

// node: the machine's host name (the UTS namespace's, as hostname(1) prints
// it), so that a dashboard or report can name a node other than by its
// scrape address.
type nodeCollector struct {
	src  *Source
	info *prometheus.Desc
}

func newNodeCollector(src *Source) collector {
	return &nodeCollector{src: src, info: prometheus.NewDesc(names.NodeInfo,
		"The node's host name (/proc/sys/kernel/hostname). Always 1.", []string{"nodename"}, nil)}
}

func (c *nodeCollector) Update(ch chan<- prometheus.Metric) error {
	name, err := c.src.FS.Hostname()
	if err != nil {
		return err
	}
	ch <- prometheus.MustNewConstMetric(c.info, prometheus.GaugeValue, 1, name)
	return nil
}

// interrupts: per device-queue IRQ counts and the IRQ → device/queue → CPUs
// info metric. IRQs that belong to no known device are left out (low
// cardinality: timers, ACPI and the like are not placement decisions).
type interruptsCollector struct {
	src         *Source
	count, info *prometheus.Desc
}

func newInterruptsCollector(src *Source) collector {
	return &interruptsCollector{src: src,
		count: prometheus.NewDesc(names.QueueInterrupts,
			"Interrupts of a device queue's IRQ, all CPUs (/proc/interrupts); rate() gives the per-queue IRQ rate.",
			[]string{"irq", "device", "queue"}, nil),
		info: prometheus.NewDesc(names.IRQInfo,
			"Where a device IRQ goes: its device, queue (\"\" if none) and affinity (smp_affinity_list). Always 1.",
			[]string{"irq", "device", "queue", "cpus"}, nil),
	}
}

func (c *interruptsCollector) Update(ch chan<- prometheus.Metric) error {
	h := c.src.Host()
	if h == nil {
		return errors.New("no host model yet")
	}
	in, err := c.src.FS.Interrupts()
	if err != nil {
		return err
	}
	for i := range in.Lines {
		l := &in.Lines[i]
		if l.IRQ < 0 {
			continue
		}
		q := h.IRQ(l.IRQ)
		if q == nil || q.Device == "" {
			continue
		}
		irq, queue := strconv.Itoa(l.IRQ), ""
		if q.Queue != nil {
			queue = strconv.Itoa(*q.Queue)
			ch <- prometheus.MustNewConstMetric(c.count, prometheus.CounterValue, float64(l.Total()), irq, q.Device, queue)
		}
		cpus, err := c.src.FS.ReadIRQAffinity(l.IRQ)
		if err != nil {
			continue
		}
		ch <- prometheus.MustNewConstMetric(c.info, prometheus.GaugeValue, 1, irq, q.Device, queue, cpus.String())
	}
	return nil
}

// softnet: per-CPU drops and time squeezes from /proc/net/softnet_stat.
type softnetCollector struct {
	src                        *Source
	processed, dropped, squeez *prometheus.Desc
}

func newSoftnetCollector(src *Source) collector {
	return &softnetCollector{src: src,
		processed: prometheus.NewDesc(names.SoftnetProcessed,
			"Packets processed by the CPU's receive softirq (/proc/net/softnet_stat).", []string{"cpu"}, nil),
		dropped: prometheus.NewDesc(names.SoftnetDropped,
			"Packets dropped because the CPU's backlog was full (/proc/net/softnet_stat).", []string{"cpu"}, nil),
		squeez: prometheus.NewDesc(names.SoftnetTimesSqueezed,
			"Receive softirq runs that ran out of budget or time with work left (/proc/net/softnet_stat).", []string{"cpu"}, nil),
	}
}

func (c *softnetCollector) Update(ch chan<- prometheus.Metric) error {
	rows, err := c.src.FS.Softnet()
	if err != nil {
		return err
	}
	for i, r := range rows {
		cpu := r.CPU
		if cpu < 0 {
			cpu = i // older kernels: row order (online CPUs); good enough for a label
		}
		l := strconv.Itoa(cpu)
		ch <- prometheus.MustNewConstMetric(c.processed, prometheus.CounterValue, float64(r.Processed), l)
		ch <- prometheus.MustNewConstMetric(c.dropped, prometheus.CounterValue, float64(r.Dropped), l)
		ch <- prometheus.MustNewConstMetric(c.squeez, prometheus.CounterValue, float64(r.TimeSqueeze), l)
	}
	return nil
}
