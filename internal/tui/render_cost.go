package tui

import (
	"fmt"
)

// costWord is the title's word for a cost source.
func costWord(src string) string {
	if src == "bpf" {
		return "measured"
	}
	return "estimated"
}

// ms formats CPU seconds per second as milliseconds per second.
func ms(v float64) string {
	v *= 1000
	if v > 0 && v < 0.05 {
		return "<0.1"
	}
	return human(v)
}

// costVectors are the softirq columns of the cost table; the rest are "other".
var costVectors = []string{"NET_RX", "NET_TX", "BLOCK", "TIMER", "SCHED", "RCU"}

type styledText struct {
	text  string
	style Style
}

// costTable is the interrupt time of each CPU by source, in ms/s: hardirq,
// the main softirq vectors and the other vectors together.
func costTable(f *Frame, cpus []CPU) []styledText {
	if len(cpus) == 0 {
		return nil
	}
	var out []styledText
	hd := fmt.Sprintf("%4s %6s", "CPU", "hard")
	for _, v := range costVectors {
		hd += fmt.Sprintf(" %6s", v)
	}
	hd += fmt.Sprintf(" %6s  ms/s %s", "other", CostText(f.CostSource))
	out = append(out, styledText{hd, StyleHeader})
	for i := range cpus {
		c := &cpus[i]
		s := fmt.Sprintf("%4d %6s", c.ID, ms(c.HardirqTime))
		other := 0.0
		for name, v := range c.SoftirqTime {
			other += v
			for _, k := range costVectors {
				if k == name {
					other -= v
				}
			}
		}
		for _, v := range costVectors {
			s += fmt.Sprintf(" %6s", ms(c.SoftirqTime[v]))
		}
		s += fmt.Sprintf(" %6s", ms(other))
		out = append(out, styledText{s, StyleNormal})
	}
	return out
}

// CostText says what a cost source means: "measured with eBPF" or
// "estimated from counts".
func CostText(src string) string {
	if src == "bpf" {
		return "measured with eBPF"
	}
	return "estimated from counts"
}
