// Package policy decides: it makes plans (package plan's data) for a host
// from the policies distilled from the seed documents (dedicated-core,
// per-queue, colocate, rps-spread; efficiency and latency for interrupt
// mitigation) and from measured evidence (auto: the cost model in
// model.go, model_rps.go and model_predict.go predicts each candidate's
// per-CPU load, the judge rejects what
// would move work onto a CPU without headroom, and a choice that a 10 %
// disturbance of the measurement overturns is not made).
//
// Harm is the one definition of evidence of harm: auto plans only from it
// and the agent's --adapt triggers only on it. Violation is auto's rules
// applied to any plan, so the agent can refuse one a planner gives it.
//
// Everything here is pure: a policy reads the host model, the options and
// the measured load it is given, and nothing else. Package plan knows
// nothing of this package: it reads, checks and resolves plans, whoever
// made them; this package imports plan.
package policy
