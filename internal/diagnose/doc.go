// Package diagnose explains what a measured load shows: pure rules over a
// host model (package host) and a measurement (package load) that return
// findings — an id, a severity, the CPUs, device, IRQs and processes
// involved, the evidence numbers and why it matters — and the one notion
// of headroom (spare CPU time) every judge uses.
//
// A finding says what is wrong, never what to type: the remedy for one is
// a plan made by package policy (policy.Remedy), predicted by its cost
// model, and commands are rendered from that plan by the command line.
package diagnose
