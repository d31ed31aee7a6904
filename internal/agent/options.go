package agent

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
)

// maxIfName is the longest network interface name (IFNAMSIZ - 1).
const maxIfName = 15

// check refuses options that make no sense instead of quietly replacing
// them with defaults: a negative count or duration, an empty or impossible
// interface name, a metric query that is not an http(s) URL (the agent
// runs as root; a file:// URL would read local files on its behalf).
// Zero still means "the default" here; the command line, whose flags have
// non-zero defaults, refuses zero too.
func (o *Options) check() error {
	var errs []error
	neg := func(name string, v int64) {
		if v < 0 {
			errs = append(errs, fmt.Errorf("%s %d: must not be negative", name, v))
		}
	}
	neg("--keep-journals", int64(o.KeepJournals))
	neg("--pingpong-limit", int64(o.PingPongLimit))
	neg("--adapt-persist", int64(o.AdaptOptions.Persist))
	neg("--adapt-window", int64(o.AdaptOptions.Window))
	neg("--adapt-budget", int64(o.AdaptOptions.MaxPerHour))
	if o.PingPongWindow < 0 {
		errs = append(errs, fmt.Errorf("--pingpong-window %s: must not be negative", o.PingPongWindow))
	}
	if o.AdaptOptions.MinDwell < 0 {
		errs = append(errs, fmt.Errorf("--adapt-dwell %s: must not be negative", o.AdaptOptions.MinDwell))
	}
	for _, d := range o.Devices {
		if err := CheckDeviceName(d); err != nil {
			errs = append(errs, err)
		}
	}
	if q := o.AdaptOptions.MetricQuery; q != "" {
		if err := CheckMetricQuery(q); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// CheckDeviceName refuses a --device that cannot name a network interface.
func CheckDeviceName(d string) error {
	switch {
	case d == "":
		return errors.New(`--device "": an empty interface name`)
	case len(d) > maxIfName:
		return fmt.Errorf("--device %q: longer than %d characters, the kernel's limit for an interface name", d, maxIfName)
	case d == "." || d == ".." || strings.ContainsAny(d, "/: \t\n"):
		return fmt.Errorf("--device %q: not an interface name", d)
	}
	return nil
}

// CheckMetricQuery refuses a --adapt-metric-query that is not an http or
// https URL with a host.
func CheckMetricQuery(q string) error {
	u, err := url.Parse(q)
	if err != nil {
		return fmt.Errorf("--adapt-metric-query: %w", err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("--adapt-metric-query %q: give a Prometheus http:// or https:// URL (…/api/v1/query?query=…)", q)
	}
	if _, _, err := promInstantQuery(q); err != nil {
		return fmt.Errorf("--adapt-metric-query: %w", err)
	}
	// Only the expression is sent (the query is evaluated when asked), so
	// a parameter such as time= or timeout= would be dropped silently.
	for k := range u.Query() {
		if k != "query" {
			return fmt.Errorf("--adapt-metric-query %q: parameter %q is not supported: only query= is sent, evaluated at the time of asking", q, k)
		}
	}
	return nil
}
