package agent

import (
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/irqpilot/irqpilot/internal/host"
	"github.com/irqpilot/irqpilot/internal/kernel"
	"github.com/irqpilot/irqpilot/internal/load"
	"github.com/irqpilot/irqpilot/internal/plan"
	"github.com/irqpilot/irqpilot/internal/policy"
	"github.com/irqpilot/irqpilot/internal/setting"
	"github.com/irqpilot/irqpilot/internal/verify"
)

// Planner computes the plan to try when a finding with evidence of harm
// persists. It is pure: the host as it is and the load just measured.
type Planner func(h *host.Host, l *load.Load) (*plan.Plan, error)

// appResolver returns what the selector app (a plan selector: comm:,
// pid:, unit:, cgroup:) names now on fs — the application may have
// restarted since the last interval.
func appResolver(fs *kernel.FS, app string) (func() ([]int, error), error) {
	e, err := plan.ParseAppSelector(app)
	if err != nil {
		return nil, err
	}
	e.All = true // each process the selector names is the application
	sel := e.Processes()
	return func() ([]int, error) { return setting.SelectProcesses(fs, sel) }, nil
}

// autoPlanner is the default Planner: the auto policy with the whole
// measurement, told the devices it may steer (--device;
// default every physical NIC) and the application (--app, resolved each
// time it plans; nil resolve: none): auto may then place the application
// beside where RPS frees a CPU. An application not running plans as
// without one.
//
// base carries the scope flags the agent was given (--include-default-route,
// --machine-wide), so that an adaptation plans over the same scope as the
// plan it adapts.
func autoPlanner(base policy.Options, devices []string, app string, resolve func() ([]int, error)) Planner {
	return func(h *host.Host, l *load.Load) (*plan.Plan, error) {
		o := policy.Options{Load: policy.Measured(l), Devices: devices,
			IncludeDefaultRoute: base.IncludeDefaultRoute, MachineWide: base.MachineWide}
		if resolve != nil {
			pids, err := resolve()
			if err != nil {
				return nil, fmt.Errorf("--app %s: %w", app, err)
			}
			o.App, o.AppPIDs = app, pids
		}
		return policy.Make("auto", h, o)
	}
}

// The adaptation trigger is the planner's own evidence of harm (policy.Harm):
// the findings auto acts on, and a CPU saturated mostly by interrupt work
// while every CPU is busy. Observations record only those.

// AdaptOptions tune --adapt.
type AdaptOptions struct {
	// Persist: intervals evidence of harm must hold before acting (3).
	Persist int
	// Window: intervals over which an adaptation is verified (5).
	Window int
	// MinDwell between two changes (5m); MaxPerHour changes (4).
	MinDwell   time.Duration
	MaxPerHour int
	// MetricCommand prints one number; MetricQuery is a Prometheus instant
	// query URL (http://host:9090/api/v1/query?query=…) returning one
	// sample. Lower is better unless HigherIsBetter.
	MetricCommand  string
	MetricQuery    string
	HigherIsBetter bool
}

func (o *AdaptOptions) defaults() {
	if o.Persist <= 0 {
		o.Persist = 3
	}
	if o.Window <= 0 {
		o.Window = 5
	}
	if o.MinDwell <= 0 {
		o.MinDwell = 5 * time.Minute
	}
	if o.MaxPerHour <= 0 {
		o.MaxPerHour = 4
	}
}

// Adaptation is one plan the agent tried.
type Adaptation struct {
	Time    time.Time `json:"time"`
	Finding string    `json:"finding"`
	// Result: "verifying", "kept", "reverted", "no-change" (the planner's
	// plan was already in force, or changes nothing), "marginal" (the
	// planner's choice does not survive ±10 % of the measured load, see
	// policy.IsMarginal: nothing is changed), "refused" (the plan's predicted
	// load breaks the headroom rules, policy.Violation: not applied),
	// "not-retried" (the same plan verified worse on a load within
	// tolerance of this one: not applied), "failed".
	Result   string   `json:"result"`
	Reason   string   `json:"reason"`
	Policy   string   `json:"policy,omitempty"`
	Why      string   `json:"why,omitempty"`
	Journals []string `json:"journals,omitempty"`
	// Verdict is the verification's verdict once judged (adaptverify.go):
	// confirmed, missed, worse or inconclusive; "" while verifying or when
	// nothing was applied.
	Verdict      string        `json:"verdict,omitempty"`
	Verification *Verification `json:"verification,omitempty"`
}

type adaptState struct {
	o        AdaptOptions
	streak   map[string]int
	history  []Observation // the last Persist observations before acting
	changes  []time.Time   // adaptations applied, for the hourly budget
	last     time.Time
	cur      *Adaptation // being verified
	baseline []Observation
	window   []Observation
	journals []string
	// The current adaptation's verification (adaptverify.go): its
	// prediction, the measurement before it (beforeOK: one was made), where
	// the prediction came from, its plan's fingerprint and how many settled
	// intervals in a row were worse.
	pred     *plan.Prediction
	before   verify.Measurement
	beforeOK bool
	note     string
	planKey  string
	worse    int
	// blocked are plans that verified worse, with their load.
	blocked []blockedPlan
}

func newAdaptState(o AdaptOptions) *adaptState {
	o.defaults()
	return &adaptState{o: o, streak: map[string]int{}}
}

func (s *adaptState) reset() {
	s.streak = map[string]int{}
	s.history = nil
	s.cur = nil
	s.window, s.baseline, s.journals = nil, nil, nil
	s.endVerification()
}

// endVerification forgets the current adaptation's verification state.
func (s *adaptState) endVerification() {
	s.pred, s.before, s.beforeOK, s.note, s.planKey, s.worse = nil, verify.Measurement{}, false, "", "", 0
}

func (s *adaptState) noteJournal(id string) {
	if s.cur != nil {
		s.journals = append(s.journals, id)
	}
}

// trigger returns the evidence of harm that has persisted long enough, if
// dwell time and budget allow acting now.
func (s *adaptState) trigger(now time.Time, ob Observation) (string, string) {
	s.history = append(s.history, ob)
	if len(s.history) > s.o.Persist {
		s.history = s.history[len(s.history)-s.o.Persist:]
	}
	for id := range s.streak {
		if !ob.Findings[id] {
			delete(s.streak, id)
		}
	}
	var hit string
	for _, id := range slices.Sorted(maps.Keys(ob.Findings)) {
		if !ob.Findings[id] {
			continue
		}
		s.streak[id]++
		if s.streak[id] >= s.o.Persist && hit == "" {
			hit = id
		}
	}
	if hit == "" {
		return "", ""
	}
	if !s.last.IsZero() && now.Sub(s.last) < s.o.MinDwell {
		return "", fmt.Sprintf("%s persists but the last change was %s ago (minimum dwell %s)", hit, now.Sub(s.last).Round(time.Second), s.o.MinDwell)
	}
	s.changes = slices.DeleteFunc(s.changes, func(t time.Time) bool { return now.Sub(t) > time.Hour })
	if len(s.changes) >= s.o.MaxPerHour {
		return "", fmt.Sprintf("%s persists but %d changes were made in the last hour (budget %d)", hit, len(s.changes), s.o.MaxPerHour)
	}
	return hit, ""
}
