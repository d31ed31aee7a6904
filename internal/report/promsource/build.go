package promsource

// Turning the queried series into report runs: per node, per CPU and per
// device queue, one load per step of the range.

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/common/model"

	"github.com/irqpilot/irqpilot/internal/host"
	"github.com/irqpilot/irqpilot/internal/load"
)

// newCPUAcc is one CPU's rates at one point (seconds per second), NaN
// (missing) until read. The guest modes stay 0: User and Nice include them.
func newCPUAcc() *load.CPUTime {
	n := math.NaN()
	return &load.CPUTime{User: n, Nice: n, System: n, Idle: n, IOWait: n, Steal: n, IRQ: n, SoftIRQ: n}
}

type queueAcc struct {
	device string
	queue  *int
}

type nodeAcc struct {
	cpus   []map[int]*load.CPUTime // [point][cpu]
	irqs   []map[int]float64       // [point][irq] rate
	queues map[int]queueAcc
}

// builder lays samples on the grid, per instance.
type builder struct {
	res   *Result
	n     int
	nodes map[string]*nodeAcc
}

func newBuilder(res *Result) *builder {
	return &builder{res: res, n: int(res.End.Sub(res.Start)/res.Step) + 1, nodes: map[string]*nodeAcc{}}
}

func (b *builder) node(m model.Metric) *nodeAcc {
	inst := string(m[model.InstanceLabel])
	a := b.nodes[inst]
	if a == nil {
		a = &nodeAcc{cpus: make([]map[int]*load.CPUTime, b.n), irqs: make([]map[int]float64, b.n), queues: map[int]queueAcc{}}
		b.nodes[inst] = a
	}
	return a
}

// add feeds every point of m that falls on the grid to fn.
func (b *builder) add(m model.Matrix, fn func(model.Metric, int, float64)) {
	for _, s := range m {
		for _, p := range s.Values {
			t := p.Timestamp.Time()
			off := t.Sub(b.res.Start)
			if off < 0 || off%b.res.Step != 0 {
				continue
			}
			i := int(off / b.res.Step)
			v := float64(p.Value)
			if i >= b.n || math.IsNaN(v) || math.IsInf(v, 0) {
				continue
			}
			fn(s.Metric, i, v)
		}
	}
}

func (b *builder) addCPU(m model.Metric, i int, set func(*load.CPUTime)) {
	cpu, err := strconv.Atoi(string(m["cpu"]))
	if err != nil || cpu < 0 {
		return
	}
	a := b.node(m)
	if a.cpus[i] == nil {
		a.cpus[i] = map[int]*load.CPUTime{}
	}
	c := a.cpus[i][cpu]
	if c == nil {
		c = newCPUAcc()
		a.cpus[i][cpu] = c
	}
	set(c)
}

func (b *builder) addMode(m model.Metric, i int, v float64) {
	b.addCPU(m, i, func(c *load.CPUTime) {
		mode := map[model.LabelValue]*float64{"user": &c.User, "nice": &c.Nice, "system": &c.System,
			"idle": &c.Idle, "iowait": &c.IOWait, "steal": &c.Steal}
		if p := mode[m["mode"]]; p != nil {
			*p = v
		}
	})
}

func (b *builder) addQueue(m model.Metric, i int, v float64) {
	irq, err := strconv.Atoi(string(m["irq"]))
	if err != nil || irq < 0 {
		return
	}
	a := b.node(m)
	if a.irqs[i] == nil {
		a.irqs[i] = map[int]float64{}
	}
	a.irqs[i][irq] = v
	if _, ok := a.queues[irq]; !ok {
		q := queueAcc{device: string(m["device"])}
		if n, err := strconv.Atoi(string(m["queue"])); err == nil {
			q.queue = &n
		}
		a.queues[irq] = q
	}
}

// cpuLoad turns one CPU's rates into percentages of its time with
// load.CPUTime.Percent, as load.Rates does from /proc/stat. ok is false
// when a mode is missing.
func cpuLoad(id int, c *load.CPUTime) (load.CPULoad, bool) {
	for _, v := range []float64{c.User, c.Nice, c.System, c.Idle, c.IOWait, c.Steal, c.IRQ, c.SoftIRQ} {
		if math.IsNaN(v) {
			return load.CPULoad{}, false
		}
	}
	l := load.CPULoad{ID: id}
	var ok bool
	l.CPUTime, ok = c.Percent()
	l.NoTicks = !ok // as load.Rates: no tick counted, no percentages
	return l, true
}

// nodeList is the nodes with CPU data at some point of the grid (report.RunOf
// accepts each), ordered by name.
func (b *builder) nodeList(names map[string]string, source string) ([]Node, error) {
	insts := make([]string, 0, len(b.nodes))
	for inst := range b.nodes {
		insts = append(insts, inst)
	}
	name := func(inst string) string {
		if n := names[inst]; n != "" {
			return n
		}
		return inst
	}
	sort.Slice(insts, func(i, j int) bool { return name(insts[i]) < name(insts[j]) })
	var out []Node
	var skipped []string
	for _, inst := range insts {
		a := b.nodes[inst]
		loads := make([]*load.Load, b.n)
		for i := range loads {
			end := b.res.Start.Add(time.Duration(i) * b.res.Step)
			l := &load.Load{Start: end.Add(-b.res.Step), End: end, Interval: b.res.Step, CostSource: load.CostCounts}
			ids := make([]int, 0, len(a.cpus[i]))
			for id := range a.cpus[i] {
				ids = append(ids, id)
			}
			slices.Sort(ids)
			for _, id := range ids {
				if c, ok := cpuLoad(id, a.cpus[i][id]); ok {
					l.CPUs = append(l.CPUs, c)
				}
			}
			irqs := make([]int, 0, len(a.irqs[i]))
			for n := range a.irqs[i] {
				irqs = append(irqs, n)
			}
			slices.Sort(irqs)
			for _, n := range irqs {
				l.IRQs = append(l.IRQs, load.IRQRate{IRQ: n, Name: strconv.Itoa(n), Rate: a.irqs[i][n]})
			}
			loads[i] = l
		}
		inv := &host.Host{Hostname: name(inst)}
		irqNums := make([]int, 0, len(a.queues))
		for n := range a.queues {
			irqNums = append(irqNums, n)
		}
		slices.Sort(irqNums)
		for _, n := range irqNums {
			inv.IRQs = append(inv.IRQs, host.IRQ{Number: n, Device: a.queues[n].device, Queue: a.queues[n].queue})
		}
		if !hasCPUs(loads) {
			skipped = append(skipped, inst)
			continue
		}
		out = append(out, Node{Name: name(inst), Source: source, Loads: loads, Inv: inv})
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("prometheus %s: no node has every CPU mode (%s with mode user…steal, %s, %s) at the same points; targets seen: %s",
			source, MetricCPUModes, MetricIRQ, MetricSoftIRQ, strings.Join(skipped, ", "))
	}
	return out, nil
}

// hasCPUs: some load has a CPU's data.
func hasCPUs(loads []*load.Load) bool {
	for _, l := range loads {
		if len(l.CPUs) > 0 {
			return true
		}
	}
	return false
}
