// Package metricnames names the metrics the irqpilot agent exports, once:
// the agent's metrics package registers them under these names and readers
// of the agents' data (irqpilot report --prometheus) query them by these
// names. It depends on nothing of irqpilot, so any package may import it.
package metricnames

import "github.com/prometheus/client_golang/prometheus"

// Namespace prefixes every metric.
const Namespace = "irqpilot"

func fq(name string) string { return prometheus.BuildFQName(Namespace, "", name) }

// Full names (prometheus.BuildFQName) of the metrics the agent's kernel
// collectors read at scrape time, and of the agent's own counters and gauges.
var (
	ScrapeSuccess  = fq("scrape_collector_success")
	ScrapeDuration = fq("scrape_collector_duration_seconds")

	// CPU seconds per CPU from /proc/stat: hardirq, softirq, and the
	// other modes under a mode label.
	CPUIRQSeconds     = fq("cpu_irq_seconds_total")
	CPUSoftIRQSeconds = fq("cpu_softirq_seconds_total")
	CPUSeconds        = fq("cpu_seconds_total")

	NodeInfo        = fq("node_info")
	QueueInterrupts = fq("queue_interrupts_total")
	IRQInfo         = fq("irq_info")

	SoftnetProcessed     = fq("softnet_processed_total")
	SoftnetDropped       = fq("softnet_dropped_total")
	SoftnetTimesSqueezed = fq("softnet_times_squeezed_total")

	// The agent's own counters and gauges.
	DriftRepairs        = fq("drift_repairs_total")
	SettingsApplied     = fq("settings_applied_total")
	AdaptationsApplied  = fq("adaptations_applied_total")
	AdaptationsReverted = fq("adaptations_reverted_total")
	// Adaptations counts the adaptations judged, by the verdict of their
	// prediction (label verdict); PredictionError is the last judged
	// adaptation's mean absolute error, per CPU, in points of a CPU
	// (label figure: busy or irq).
	Adaptations     = fq("adaptations_total")
	PredictionError = fq("prediction_error_percent")
	FindingActive   = fq("finding_active")
	Enforced        = fq("enforced_settings")
	Frozen          = fq("frozen_settings")
	Waiting         = fq("waiting_entries")
	Passes          = fq("enforcement_passes_total")
	PassErrors      = fq("enforcement_pass_errors_total")
	Reloads         = fq("plan_reloads_total")
	ReloadRejected  = fq("plan_reload_rejected")
)
