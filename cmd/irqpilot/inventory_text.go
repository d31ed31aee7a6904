// The text form of inventory: the host line, CPU sets, irqbalance and RFS,
// what could not be read, and the small formatters the sections share.

package main

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/irqpilot/irqpilot/internal/cpuset"
	"github.com/irqpilot/irqpilot/internal/host"
)

// width is the text width long lists are wrapped to.
const width = 100

// inventoryText renders one host model for people. setStr names CPU sets by
// what they are (all online CPUs, a node), so it keeps the host's nodes and
// online set; shown collects the IRQs already listed under a device.
type inventoryText struct {
	w      io.Writer
	h      *host.Host
	nodes  []host.Node
	online cpuset.Set
	shown  map[int]bool
}

// writeInventory prints the model for people. Per-CPU counts appear only as
// totals and the busiest CPU; long CPU lists are cpulists.
func writeInventory(w io.Writer, h *host.Host, source string) {
	name := h.Hostname
	if name == "" {
		name = "(unknown host)"
	}
	fmt.Fprintf(w, "%s", name)
	if h.Kernel != "" {
		fmt.Fprintf(w, "  kernel %s", h.Kernel)
	}
	fmt.Fprintf(w, "  (%s)\n\n", source)

	t := &inventoryText{w: w, h: h, nodes: h.Topology.Nodes, online: h.Topology.Online, shown: map[int]bool{}}
	t.writeCPUs()
	t.writeNICs()
	t.writeBlock()
	t.writeOtherIRQs()
	t.writeByName()
	t.writeSteering()
	t.writeFeatures()
	t.writeUnavailable()
}

// writeFeatures says what this kernel cannot do, from the probes, and
// apart what this network namespace cannot (files the kernel keeps in the
// initial namespace only): a plan made here leaves those settings out,
// apply refuses them.
func (t *inventoryText) writeFeatures() {
	var kernel, netns []host.Feature
	for _, f := range t.h.MissingFeatures() {
		if f.NetNS {
			netns = append(netns, f)
		} else {
			kernel = append(kernel, f)
		}
	}
	if len(kernel) > 0 {
		fmt.Fprintf(t.w, "Kernel cannot: %d\n", len(kernel))
		for _, f := range kernel {
			fmt.Fprintf(t.w, "  %s: %s not found\n", f.Name, f.Probe)
		}
	}
	if len(netns) > 0 {
		fmt.Fprintf(t.w, "Network namespace cannot: %d\n", len(netns))
		for _, f := range netns {
			fmt.Fprintf(t.w, "  %s: %s not found in this network namespace (initial namespace only)\n", f.Name, f.Probe)
		}
	}
}

// maxSetWidth is the longest cpulist printed as is; longer ones are named
// ("all", "node 1") or summarised ("1-111 step 2", "0,2,4,6,… (50 cpus)").
const maxSetWidth = 32

func (t *inventoryText) setStr(s cpuset.Set) string { return t.setStrNamed(s, true) }

func (t *inventoryText) setStrNamed(s cpuset.Set, named bool) string {
	if s.IsEmpty() {
		return "none"
	}
	str := s.String()
	if len(str) <= maxSetWidth {
		return str
	}
	n := s.Len()
	if !named {
		// fall through to the shape of the list
	} else if !t.online.IsEmpty() && s.Equal(t.online) {
		return fmt.Sprintf("all (%d cpus)", n)
	}
	for _, nd := range t.nodes {
		if named && s.Equal(nd.CPUs) {
			return fmt.Sprintf("node %d (%d cpus)", nd.ID, n)
		}
	}
	cpus := s.CPUs()
	if step := cpus[1] - cpus[0]; n > 2 && step > 1 {
		regular := true
		for i := 2; i < n && regular; i++ {
			regular = cpus[i]-cpus[i-1] == step
		}
		if regular {
			return fmt.Sprintf("%d-%d step %d (%d cpus)", cpus[0], cpus[n-1], step, n)
		}
	}
	cut := strings.LastIndex(str[:maxSetWidth-8], ",")
	if cut <= 0 {
		cut = maxSetWidth - 8
	}
	return fmt.Sprintf("%s,… (%d cpus)", str[:cut], n)
}

func (t *inventoryText) optSet(s *cpuset.Set) string {
	if s == nil {
		return "?"
	}
	return t.setStr(*s)
}

func steerStr(s *cpuset.Set) string {
	if s == nil {
		return "n/a"
	}
	if s.IsEmpty() {
		return "off"
	}
	return s.String()
}

func optInt(p *int) string {
	if p == nil {
		return "n/a"
	}
	return strconv.Itoa(*p)
}

// wrap prints items separated by two spaces, wrapped at width.
func wrap(w io.Writer, indent string, items []string) {
	for _, line := range fill(indent, indent, "  ", items) {
		fmt.Fprintln(w, line)
	}
}

// fill joins items with sep into lines at most width characters wide
// where the items allow: the first line starts with first, the others
// with indent. An item longer than a line has a line of its own.
func fill(first, indent, sep string, items []string) []string {
	var lines []string
	line, start := first, first
	for _, it := range items {
		if len(line) > len(start) && utf8.RuneCountInString(line)+len(sep)+utf8.RuneCountInString(it) > width {
			lines = append(lines, line)
			line, start = indent, indent
		}
		if len(line) > len(start) {
			line += sep
		}
		line += it
	}
	if len(line) > len(start) {
		lines = append(lines, line)
	}
	return lines
}

// wrapText breaks prose at its spaces into lines at most width wide, as
// wrap does lists: the first line starts with first, the others with
// indent.
func wrapText(first, indent, text string) []string {
	return fill(first, indent, " ", strings.Fields(text))
}

// writeProse writes text wrapped as wrapText does, except that a command
// in backticks is never broken: it stays whole on one line (alone on it
// when it is wider than the page), so that it can be copied as printed.
func writeProse(w io.Writer, first, indent, text string) {
	var words []string
	open := false
	for _, f := range strings.Fields(text) {
		if open {
			words[len(words)-1] += " " + f
		} else {
			words = append(words, f)
		}
		if strings.Count(f, "`")%2 == 1 {
			open = !open
		}
	}
	for _, line := range fill(first, indent, " ", words) {
		fmt.Fprintln(w, line)
	}
}

// humanCount prints counts up to 99999 exactly, larger ones as 123.4k,
// 5.6M, 7.8G.
func humanCount(n uint64) string {
	switch {
	case n < 100_000:
		return strconv.FormatUint(n, 10)
	case n < 1_000_000:
		return fmt.Sprintf("%.1fk", float64(n)/1e3)
	case n < 1_000_000_000:
		return fmt.Sprintf("%.1fM", float64(n)/1e6)
	}
	return fmt.Sprintf("%.1fG", float64(n)/1e9)
}

func onOff(b bool) string {
	if b {
		return "on"
	}
	return "off"
}

func orUnknown(s string) string {
	if s == "" {
		return "?"
	}
	return s
}

func (t *inventoryText) writeSteering() {
	w, h := t.w, t.h
	ib := h.Irqbalance
	fmt.Fprint(w, "irqbalance: ")
	if ib.Running {
		fmt.Fprint(w, "running")
		if ib.PID != 0 {
			fmt.Fprintf(w, " (pid %d)", ib.PID)
		}
	} else {
		fmt.Fprint(w, "not running")
	}
	fmt.Fprintf(w, ", banned cpus %s", t.setStr(ib.BannedCPUs))
	if ib.ConfigFile != "" {
		fmt.Fprintf(w, ", config %s", ib.ConfigFile)
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "rps_sock_flow_entries: %s\n", optInt(h.RPSSockFlowEntries))
	if len(h.Summary) > 0 {
		var names []string
		for _, s := range h.Summary {
			var t uint64
			for _, v := range s.Counts {
				t += v
			}
			names = append(names, fmt.Sprintf("%s %s", s.Name, humanCount(t)))
		}
		fmt.Fprintln(w, "per-CPU interrupt totals (per-CPU counts in --json):")
		wrap(w, "  ", names)
	}
	fmt.Fprintln(w)
}

// maxUnavailable is how many entries of one kind are listed before the
// rest is counted.
const maxUnavailable = 3

func (t *inventoryText) writeUnavailable() {
	w, h := t.w, t.h
	if len(h.Unavailable) == 0 {
		fmt.Fprintln(w, "Unavailable: nothing")
		return
	}
	fmt.Fprintf(w, "Unavailable: %d\n", len(h.Unavailable))
	byWhat := map[string][]host.Unavailable{}
	var order []string
	for _, u := range h.Unavailable {
		if _, ok := byWhat[u.What]; !ok {
			order = append(order, u.What)
		}
		byWhat[u.What] = append(byWhat[u.What], u)
	}
	for _, what := range order {
		us := byWhat[what]
		for i, u := range us {
			if i == maxUnavailable && len(us) > maxUnavailable+1 {
				fmt.Fprintf(w, "  %s: … and %d more\n", what, len(us)-maxUnavailable)
				break
			}
			line := "  " + u.What
			if u.Path != "" && !strings.Contains(u.Reason, u.Path) {
				line += " (" + u.Path + ")"
			}
			fmt.Fprintf(w, "%s: %s\n", line, u.Reason)
		}
	}
}
