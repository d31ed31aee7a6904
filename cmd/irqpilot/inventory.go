package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/irqpilot/irqpilot/internal/apply"
	"github.com/irqpilot/irqpilot/internal/cpuset"
	"github.com/irqpilot/irqpilot/internal/host"
	"github.com/irqpilot/irqpilot/internal/kernel"
)

var inventoryCmd = &cobra.Command{
	Use:   "inventory",
	Short: "Show CPUs, NICs, block devices and every IRQ with where it may and does run",
	Long: `inventory reads the machine (or --root DIR, or --snapshot FILE) and prints
its interrupt topology: CPUs by NUMA node, package and core with their SMT
siblings; each NIC with its queues, their IRQs, where each IRQ is allowed to
run (smp_affinity_list), where it actually lands (effective_affinity_list and
counts) and the RPS/XPS steering of each queue; block devices with their
hardware queues; the other IRQs by class; irqbalance; and what could not be
read. Nothing is written: whether the kernel manages an IRQ comes from
debugfs (/sys/kernel/debug/irq/irqs) or apply's record, else it is unknown;
--probe-managed finds out by writing each IRQ's current affinity back.

--json prints the full model (per-CPU counts included) with stable field
names, documented in the README.`,
	Args: cobra.NoArgs,
	RunE: func(cmd *cobra.Command, args []string) error {
		fs, cleanup, err := openFS()
		if err != nil {
			return err
		}
		defer cleanup()
		h, err := readHost(fs)
		if err != nil {
			return err
		}
		out := cmd.OutOrStdout()
		if global.json {
			return writeJSON(out, h)
		}
		writeInventory(out, h, sourceName())
		return nil
	},
}

func init() {
	addProbeManagedFlag(inventoryCmd)
	rootCmd.AddCommand(inventoryCmd)
}

// probeManaged is --probe-managed (inventory, plan, doctor, capture).
var probeManaged bool

func addProbeManagedFlag(c *cobra.Command) {
	c.Flags().BoolVar(&probeManaged, "probe-managed", false,
		"write each IRQ's current affinity back to /proc/irq/N/smp_affinity_list to find kernel-managed IRQs (root; "+
			"default: write nothing, read debugfs and apply's record in "+apply.DefaultStateDir+", else managed is unknown)")
}

// readHost builds the model for the read-only commands: it writes nothing
// unless --probe-managed was given.
func readHost(fs *kernel.FS) (*host.Host, error) {
	return readHostWith(fs, probeManaged, apply.DefaultStateDir)
}

// readHostWith builds the model. With probe, on the live machine as root,
// kernel-managed IRQs are found by writing each IRQ's own affinity back (the
// kernel refuses the write for managed ones), under the machine-wide write
// lock. Otherwise the managed state comes, without writing, from debugfs,
// from apply's record in stateDir or from a capture, or is unknown.
func readHostWith(fs *kernel.FS, probe bool, stateDir string) (*host.Host, error) {
	return host.Read(fs, host.Options{ProbeManaged: probe && fs.IsLive() && os.Geteuid() == 0, StateDir: stateDir})
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func sourceName() string {
	switch {
	case global.snapshot != "":
		return "snapshot " + global.snapshot
	case global.root != "" && global.root != "/":
		return "root " + global.root
	}
	return "live"
}

// width is the text width long lists are wrapped to.
const width = 100

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

	textNodes, textOnline = h.Topology.Nodes, h.Topology.Online
	writeCPUs(w, h)
	shown := map[int]bool{}
	writeNICs(w, h, shown)
	writeBlock(w, h, shown)
	writeOtherIRQs(w, h, shown)
	writeSteering(w, h)
	writeUnavailable(w, h)
}

// textNodes and textOnline let setStr name long sets by what they are.
var (
	textNodes  []host.Node
	textOnline cpuset.Set
)

// maxSetWidth is the longest cpulist printed as is; longer ones are named
// ("all", "node 1") or summarised ("1-111 step 2", "0,2,4,6,… (50 cpus)").
const maxSetWidth = 32

func setStr(s cpuset.Set) string { return setStrNamed(s, true) }

func setStrNamed(s cpuset.Set, named bool) string {
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
	} else if !textOnline.IsEmpty() && s.Equal(textOnline) {
		return fmt.Sprintf("all (%d cpus)", n)
	}
	for _, nd := range textNodes {
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

// coreGroup is one core of the text inventory: the online threads that
// share an SMT sibling mask, within a node and package.
type coreGroup struct {
	node, pkg int
	core      int   // core_id of its first thread, a label only (-1 unknown)
	threads   []int // ascending
}

// groupCores groups the online CPUs into cores, ordered by node, package
// and first thread. Threads belong to one core when they report the same
// sibling mask: core_id is not unique within a package on some platforms,
// so it only labels the group. CPUs whose siblings are unknown are grouped
// by core_id, and CPUs with neither stand alone.
func groupCores(cpus []host.CPU) []coreGroup {
	type key struct {
		node, pkg int
		siblings  string // the sibling mask, "" when unknown
		core      int    // core_id when siblings are unknown; -1-cpu when that is unknown too
	}
	var groups []coreGroup
	index := map[key]int{}
	for _, c := range cpus {
		if !c.Online {
			continue
		}
		k := key{node: c.Node, pkg: c.Package, siblings: c.Siblings.String()}
		if k.siblings == "" {
			k.core = c.Core
			if c.Core < 0 {
				k.core = -1 - c.ID // unknown core: one entry per CPU
			}
		}
		i, ok := index[k]
		if !ok {
			i = len(groups)
			index[k] = i
			groups = append(groups, coreGroup{node: c.Node, pkg: c.Package, core: c.Core})
		}
		groups[i].threads = append(groups[i].threads, c.ID)
	}
	for i := range groups {
		sort.Ints(groups[i].threads)
	}
	sort.SliceStable(groups, func(i, j int) bool {
		a, b := groups[i], groups[j]
		if a.node != b.node {
			return a.node < b.node
		}
		if a.pkg != b.pkg {
			return a.pkg < b.pkg
		}
		return a.threads[0] < b.threads[0]
	})
	return groups
}

func writeCPUs(w io.Writer, h *host.Host) {
	t := h.Topology
	var online, offline cpuset.Set
	for _, c := range h.CPUs {
		if c.Online {
			online = online.Add(c.ID)
		} else {
			offline = offline.Add(c.ID)
		}
	}
	if !t.Online.IsEmpty() {
		online = t.Online
	}
	if !t.Offline.IsEmpty() {
		offline = t.Offline
	}
	if len(h.CPUs) == 0 {
		fmt.Fprintf(w, "CPUs: topology unknown")
		if ids := irqCPUs(h); !ids.IsEmpty() {
			fmt.Fprintf(w, "; /proc/interrupts has columns for CPUs %s", ids)
		}
		fmt.Fprint(w, "\n\n")
		return
	}
	fmt.Fprintf(w, "CPUs: %d online (%s), offline %s, isolated %s, nohz_full %s",
		online.Len(), setStr(online), setStr(offline), setStr(t.Isolated), setStr(t.NohzFull))
	if !t.ManagedIRQIsolated.IsEmpty() {
		fmt.Fprintf(w, ", managed_irq isolated %s", t.ManagedIRQIsolated)
	}
	fmt.Fprintln(w)

	// node → package → core → threads
	cores := groupCores(h.CPUs)
	nodes := map[int]bool{}
	for _, g := range cores {
		nodes[g.node] = true
	}
	nodeCPUs := map[int]cpuset.Set{}
	for _, n := range t.Nodes {
		nodes[n.ID] = true
		nodeCPUs[n.ID] = n.CPUs
	}
	nodeIDs := make([]int, 0, len(nodes))
	for n := range nodes {
		nodeIDs = append(nodeIDs, n)
	}
	sort.Ints(nodeIDs)
	for _, n := range nodeIDs {
		var cpus cpuset.Set
		var pkgs []int
		perPkg := map[int][]string{}
		perPkgThreads := map[int]int{}
		for _, g := range cores {
			if g.node != n {
				continue
			}
			ids := g.threads
			cpus = cpus.Add(ids...)
			if _, ok := perPkg[g.pkg]; !ok {
				pkgs = append(pkgs, g.pkg)
			}
			label := "core ?"
			if g.core >= 0 {
				label = "core " + strconv.Itoa(g.core)
			}
			perPkg[g.pkg] = append(perPkg[g.pkg], label+": "+cpuset.Of(ids...).String())
			perPkgThreads[g.pkg] += len(ids)
		}
		if nc, ok := nodeCPUs[n]; ok && cpus.IsEmpty() {
			cpus = nc
		}
		nodeName := "node " + strconv.Itoa(n)
		if n < 0 {
			nodeName = "node ? (no NUMA information)"
		}
		fmt.Fprintf(w, "  %s  cpus %s\n", nodeName, setStrNamed(cpus, false))
		for _, p := range pkgs {
			pkgName := "package " + strconv.Itoa(p)
			if p < 0 {
				pkgName = "package ?"
			}
			fmt.Fprintf(w, "    %s  %d cores, %d threads\n", pkgName, len(perPkg[p]), perPkgThreads[p])
			wrap(w, "      ", perPkg[p])
		}
	}
	fmt.Fprintln(w)
}

// irqCPUs is the set of CPU ids that appear in the IRQ counts.
func irqCPUs(h *host.Host) cpuset.Set {
	var ids []int
	seen := map[int]bool{}
	for _, q := range h.IRQs {
		for c := range q.Counts {
			if !seen[c] {
				seen[c] = true
				ids = append(ids, c)
			}
		}
	}
	return cpuset.Of(ids...)
}

// wrap prints items separated by two spaces, wrapped at width.
func wrap(w io.Writer, indent string, items []string) {
	line := indent
	for _, it := range items {
		if len(line) > len(indent) && len(line)+2+len(it) > width {
			fmt.Fprintln(w, line)
			line = indent
		}
		if len(line) > len(indent) {
			line += "  "
		}
		line += it
	}
	if len(line) > len(indent) {
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

// countStr is an IRQ's total and where most of it landed: "3225 (cpu1 100%)".
func countStr(q *host.IRQ) string {
	if len(q.Counts) == 0 {
		return "?"
	}
	total := q.Total()
	if total == 0 {
		return "0"
	}
	best, bestN := -1, uint64(0)
	for c, n := range q.Counts {
		if n > bestN || (n == bestN && c < best) {
			best, bestN = c, n
		}
	}
	return fmt.Sprintf("%s (cpu%d %d%%)", humanCount(total), best, int(float64(bestN)*100/float64(total)+0.5))
}

func optSet(s *cpuset.Set) string {
	if s == nil {
		return "?"
	}
	return setStr(*s)
}

// irqCells are the placement columns of an IRQ: number, allowed, lands, count.
func irqCells(h *host.Host, n *int) []string {
	if n == nil {
		return []string{"-", "", "", ""}
	}
	q := h.IRQ(*n)
	if q == nil {
		return []string{strconv.Itoa(*n), "?", "?", "?"}
	}
	num := strconv.Itoa(q.Number)
	if q.Managed == host.ManagedYes {
		num += " (managed)"
	}
	return []string{num, optSet(q.Affinity), optSet(q.EffectiveAffinity), countStr(q)}
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

// row is one table row: a label ("rx", "tx", "rx/tx", "hctx"), a queue index
// and the other cells. Consecutive rows without an IRQ and with equal cells
// are merged into one ("rx 0-63"), which keeps virtual devices with many
// queues to one line.
type row struct {
	label string
	index int
	cells []string
}

func mergeRows(rows []row) [][]string {
	var out [][]string
	for i := 0; i < len(rows); {
		j := i + 1
		if rows[i].cells[0] == "-" {
			for j < len(rows) && rows[j].label == rows[i].label && rows[j].index == rows[j-1].index+1 &&
				strings.Join(rows[j].cells, "\x00") == strings.Join(rows[i].cells, "\x00") {
				j++
			}
		}
		idx := strconv.Itoa(rows[i].index)
		if j-i > 1 {
			idx += "-" + strconv.Itoa(rows[j-1].index)
		}
		out = append(out, append([]string{rows[i].label + " " + idx}, rows[i].cells...))
		i = j
	}
	return out
}

func table(w io.Writer, indent string, header []string, rows [][]string) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, indent+strings.Join(header, "\t"))
	for _, r := range rows {
		fmt.Fprintln(tw, indent+strings.Join(r, "\t"))
	}
	tw.Flush()
}

func writeNICs(w io.Writer, h *host.Host, shown map[int]bool) {
	fmt.Fprintf(w, "NICs: %d\n", len(h.NICs))
	for i := range h.NICs {
		n := &h.NICs[i]
		var b strings.Builder
		fmt.Fprintf(&b, "  %s  driver %s", n.Name, orUnknown(n.Driver))
		if n.Virtual {
			b.WriteString("  virtual")
			if n.Kind != "" {
				b.WriteString(" (" + n.Kind + ")")
			}
		}
		if n.BusAddr != "" {
			b.WriteString("  bus " + n.BusAddr)
		}
		if n.Lower != "" {
			b.WriteString("  on " + n.Lower)
		}
		if n.Node >= 0 {
			fmt.Fprintf(&b, "  node %d", n.Node)
		}
		if !n.LocalCPUs.IsEmpty() {
			b.WriteString("  local cpus " + n.LocalCPUs.String())
		}
		fmt.Fprintf(&b, "  %d rx / %d tx queues", len(n.RxQueues), len(n.TxQueues))
		fmt.Fprintln(w, b.String())
		if c := n.Channels; c != nil {
			fmt.Fprintf(w, "    channels: %s\n", channelsStr(c))
		}
		if c := n.Coalesce; c != nil {
			fmt.Fprintf(w, "    coalesce: rx-usecs %d rx-frames %d tx-usecs %d tx-frames %d adaptive-rx %s adaptive-tx %s\n",
				c.RxUsecs, c.RxFrames, c.TxUsecs, c.TxFrames, onOff(c.AdaptiveRx), onOff(c.AdaptiveTx))
		}
		var rows []row
		queueIRQs := map[int]bool{}
		nq := len(n.RxQueues)
		if len(n.TxQueues) > nq {
			nq = len(n.TxQueues)
		}
		for qi := 0; qi < nq; qi++ {
			var rx *host.RxQueue
			var tx *host.TxQueue
			if qi < len(n.RxQueues) {
				rx = &n.RxQueues[qi]
			}
			if qi < len(n.TxQueues) {
				tx = &n.TxQueues[qi]
			}
			if rx != nil && tx != nil && rx.IRQ != nil && tx.IRQ != nil && *rx.IRQ == *tx.IRQ {
				queueIRQs[*rx.IRQ] = true
				rows = append(rows, row{"rx/tx", qi, append(irqCells(h, rx.IRQ), steerStr(rx.RPSCPUs), optInt(rx.RPSFlowCnt), steerStr(tx.XPSCPUs))})
				continue
			}
			if rx != nil {
				if rx.IRQ != nil {
					queueIRQs[*rx.IRQ] = true
				}
				rows = append(rows, row{"rx", rx.Index, append(irqCells(h, rx.IRQ), steerStr(rx.RPSCPUs), optInt(rx.RPSFlowCnt), "")})
			}
			if tx != nil {
				if tx.IRQ != nil {
					queueIRQs[*tx.IRQ] = true
				}
				rows = append(rows, row{"tx", tx.Index, append(irqCells(h, tx.IRQ), "", "", steerStr(tx.XPSCPUs))})
			}
		}
		// rx rows first, then tx, so that merging sees consecutive indices
		sort.SliceStable(rows, func(i, j int) bool { return labelOrder(rows[i].label) < labelOrder(rows[j].label) })
		if len(rows) > 0 {
			table(w, "    ", []string{"queue", "irq", "allowed", "lands on", "count", "rps", "flows", "xps"}, mergeRows(rows))
		}
		printOtherIRQs(w, h, n.IRQs, queueIRQs, shown)
	}
	fmt.Fprintln(w)
}

func labelOrder(l string) int {
	switch l {
	case "rx/tx":
		return 0
	case "rx":
		return 1
	}
	return 2
}

func channelsStr(c *host.Channels) string {
	var parts []string
	add := func(name string, cur, max uint32) {
		if cur != 0 || max != 0 {
			parts = append(parts, fmt.Sprintf("%s %d (max %d)", name, cur, max))
		}
	}
	add("combined", c.Combined, c.MaxCombined)
	add("rx", c.Rx, c.MaxRx)
	add("tx", c.Tx, c.MaxTx)
	add("other", c.Other, c.MaxOther)
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
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

// irqLine describes one IRQ on one line.
func irqLine(q *host.IRQ) string {
	name := strings.Join(q.Actions, ",")
	if name == "" {
		name = "(no handler)"
	}
	s := fmt.Sprintf("irq %d %s  allowed %s  lands on %s  count %s", q.Number, name, optSet(q.Affinity), optSet(q.EffectiveAffinity), countStr(q))
	if q.Managed == host.ManagedYes {
		s += "  managed"
	}
	return s
}

func writeBlock(w io.Writer, h *host.Host, shown map[int]bool) {
	fmt.Fprintf(w, "Block devices with hardware queues: %d\n", len(h.Block))
	for i := range h.Block {
		d := &h.Block[i]
		var b strings.Builder
		fmt.Fprintf(&b, "  %s  driver %s", d.Name, orUnknown(d.Driver))
		if d.BusAddr != "" {
			b.WriteString("  bus " + d.BusAddr)
		}
		if d.Node >= 0 {
			fmt.Fprintf(&b, "  node %d", d.Node)
		}
		fmt.Fprintf(&b, "  %d hardware queues", len(d.Queues))
		fmt.Fprintln(w, b.String())
		var rows []row
		queueIRQs := map[int]bool{}
		for _, q := range d.Queues {
			if q.IRQ != nil {
				queueIRQs[*q.IRQ] = true
			}
			rows = append(rows, row{"hctx", q.Index, append(irqCells(h, q.IRQ), setStr(q.CPUs))})
		}
		if len(rows) > 0 {
			table(w, "    ", []string{"queue", "irq", "allowed", "lands on", "count", "submitting cpus"}, mergeRows(rows))
		}
		printOtherIRQs(w, h, d.IRQs, queueIRQs, shown)
	}
	fmt.Fprintln(w)
}

// groupName is how other IRQs are grouped: their device, else their first
// action without a trailing number ("irdma-ceq12" → "irdma-ceq"), with the
// chip so that unrelated short names ("i8042", "i915") stay apart.
func groupName(q *host.IRQ) string {
	if q.Device != "" {
		return q.Device
	}
	if len(q.Actions) > 0 {
		return strings.TrimRight(q.Actions[0], "0123456789.-_") + "\x00" + q.Chip
	}
	return "(no handler)\x00" + q.Chip
}

// maxListed is the largest group of other IRQs listed one per line.
const maxListed = 4

func writeOtherIRQs(w io.Writer, h *host.Host, shown map[int]bool) {
	byClass := map[host.Class]map[string][]*host.IRQ{}
	n := 0
	for i := range h.IRQs {
		q := &h.IRQs[i]
		if shown[q.Number] {
			continue
		}
		n++
		c := q.Class
		if c == "" {
			c = "unclassified"
		}
		if byClass[c] == nil {
			byClass[c] = map[string][]*host.IRQ{}
		}
		g := groupName(q)
		byClass[c][g] = append(byClass[c][g], q)
	}
	fmt.Fprintf(w, "Other IRQs: %d of %d\n", n, len(h.IRQs))
	classes := make([]string, 0, len(byClass))
	for c := range byClass {
		classes = append(classes, string(c))
	}
	sort.Strings(classes)
	type line struct {
		first int
		text  string
	}
	for _, c := range classes {
		var lines []line
		for _, qs := range byClass[host.Class(c)] {
			if len(qs) <= maxListed {
				for _, q := range qs {
					lines = append(lines, line{q.Number, irqLine(q)})
				}
				continue
			}
			lines = append(lines, line{qs[0].Number, groupLine(qs)})
		}
		sort.Slice(lines, func(i, j int) bool { return lines[i].first < lines[j].first })
		fmt.Fprintf(w, "  %s\n", c)
		for _, l := range lines {
			fmt.Fprintf(w, "    %s\n", l.text)
		}
	}
	fmt.Fprintln(w)
}

// groupLine summarises many IRQs of one kind on one line.
func groupLine(qs []*host.IRQ) string {
	name := qs[0].Device
	if name == "" {
		first, last := strings.Join(qs[0].Actions, ","), strings.Join(qs[len(qs)-1].Actions, ",")
		name = first + " … " + last
	}
	var nums []int
	var allowed, lands cpuset.Set
	unknownAllowed, unknownLands, managed := false, false, 0
	var total uint64
	perCPU := map[int]uint64{}
	for _, q := range qs {
		nums = append(nums, q.Number)
		if q.Affinity != nil {
			allowed = allowed.Union(*q.Affinity)
		} else {
			unknownAllowed = true
		}
		if q.EffectiveAffinity != nil {
			lands = lands.Union(*q.EffectiveAffinity)
		} else {
			unknownLands = true
		}
		if q.Managed == host.ManagedYes {
			managed++
		}
		for c, v := range q.Counts {
			perCPU[c] += v
			total += v
		}
	}
	s := fmt.Sprintf("%d IRQs %s (%s)  allowed %s  lands on %s  count %s", len(qs), cpuset.Of(nums...), name,
		unionStr(allowed, unknownAllowed), unionStr(lands, unknownLands), humanCount(total))
	if total > 0 {
		best, bestN := -1, uint64(0)
		for c, v := range perCPU {
			if v > bestN || (v == bestN && c < best) {
				best, bestN = c, v
			}
		}
		s += fmt.Sprintf(" (cpu%d %d%%)", best, int(float64(bestN)*100/float64(total)+0.5))
	}
	if managed > 0 {
		s += fmt.Sprintf("  %d managed", managed)
	}
	return s
}

func unionStr(s cpuset.Set, unknown bool) string {
	switch {
	case unknown && s.IsEmpty():
		return "?"
	case unknown:
		return s.String() + " (some ?)"
	}
	return setStr(s)
}

func writeSteering(w io.Writer, h *host.Host) {
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
	fmt.Fprintf(w, ", banned cpus %s", setStr(ib.BannedCPUs))
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

func writeUnavailable(w io.Writer, h *host.Host) {
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

// printOtherIRQs lists a device's IRQs that serve no queue (config, misc
// vectors) and marks all of its IRQs as shown.
func printOtherIRQs(w io.Writer, h *host.Host, irqs []int, queueIRQs, shown map[int]bool) {
	for _, irq := range irqs {
		shown[irq] = true
		if !queueIRQs[irq] {
			if q := h.IRQ(irq); q != nil {
				fmt.Fprintf(w, "    %s\n", irqLine(q))
			}
		}
	}
	for q := range queueIRQs {
		shown[q] = true
	}
}
