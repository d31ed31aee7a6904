// Package sim is a deterministic discrete-event simulation of a virtual
// machine's virtual disk: a workload submits I/Os (closed loop with CIF
// outstanding, or open loop at a rate, optionally bursty), a device serves
// them with a service-time distribution on a number of parallel channels, a
// coalescing policy decides which completions raise a virtual interrupt, and
// one vCPU pays a cost per delivered interrupt (plus an optional IPI) and per
// completion processed. The same seed gives the same output.
//
// Every parameter and where its default comes from is documented in
// docs/coalescing.md.
package sim

import (
	"container/heap"
	"fmt"
	"math"
	"math/rand/v2"
	"sort"

	"github.com/irqpilot/irqpilot/internal/coalesce"
)

// Device is a service-time model: each I/O takes MinNs plus an exponential
// with mean ExpMeanNs, on one of Parallel independent channels (FIFO queue
// when all are busy).
type Device struct {
	Name      string `json:"name"`
	Parallel  int    `json:"parallel"`
	MinNs     int64  `json:"min_ns"`
	ExpMeanNs int64  `json:"exp_mean_ns"`
}

// Presets for the device.
var (
	// SSD: a flash device behind a hypervisor's storage stack: 100 µs floor
	// plus exponential 100 µs (mean 200 µs), 64 channels.
	SSD = Device{Name: "ssd", Parallel: 64, MinNs: 100_000, ExpMeanNs: 100_000}
	// Array: a disk array: 1 ms floor plus exponential 4 ms (mean 5 ms,
	// 15k rpm seek + rotation), 16 spindles.
	Array = Device{Name: "array", Parallel: 16, MinNs: 1_000_000, ExpMeanNs: 4_000_000}
)

// Preset returns a device preset by name.
func Preset(name string) (Device, error) {
	switch name {
	case "ssd":
		return SSD, nil
	case "array":
		return Array, nil
	}
	return Device{}, fmt.Errorf("sim: unknown device preset %q (want ssd or array)", name)
}

// Config is one simulation run.
type Config struct {
	Seed   uint64
	Device Device
	// CIF > 0: closed loop keeping CIF I/Os outstanding; the next I/O is
	// submitted when the vCPU has processed a completion.
	CIF int
	// OpenRate > 0 (and CIF 0): open loop, Poisson arrivals at this many
	// I/Os per second on average.
	OpenRate float64
	// Bursty: open-loop arrivals come in on/off bursts (on 1 ms, off 3 ms
	// on average, rate ×4 while on), same mean rate.
	Bursty bool
	// IntrCostNs is the vCPU time per delivered virtual interrupt.
	IntrCostNs int64
	// ComplCostNs is the vCPU time per completion processed (guest I/O
	// completion plus issuing the next I/O).
	ComplCostNs int64
	// IPICostNs > 0 models the completion arriving on another physical CPU:
	// waking an idle vCPU costs an IPI of this much vCPU time.
	IPICostNs int64
	// IPIThresholdNs > 0 coalesces IPIs: none is sent when the vCPU was
	// interrupted less than this long ago; the vCPU then finds the work when
	// the threshold has passed since its last interruption.
	IPIThresholdNs int64
	// EpochNs is the period of Epoch calls (vIC's trickle measurement).
	EpochNs int64
	// Warmup completions are processed before measuring; Completions are
	// measured.
	Warmup      int
	Completions int
}

// DefaultConfig is the default run (docs/coalescing.md explains each value).
func DefaultConfig() Config {
	return Config{
		Seed:        1,
		Device:      SSD,
		CIF:         16,
		IntrCostNs:  8_000,
		ComplCostNs: 12_000,
		EpochNs:     10_000_000,
		Warmup:      2_000,
		Completions: 20_000,
	}
}

// Result is one run's outcome. JSON names are the documented interface.
type Result struct {
	Policy           string  `json:"policy"`
	CIF              int     `json:"cif"`
	IOPS             float64 `json:"iops"`
	CPUUtil          float64 `json:"cpu_util"`
	IOPSPerCPU       float64 `json:"iops_per_cpu"`
	InterruptsPerSec float64 `json:"interrupts_per_sec"`
	LatencyP50Us     float64 `json:"latency_p50_us"`
	LatencyP99Us     float64 `json:"latency_p99_us"`

	// Extra measurements for tests and people (not in JSON).
	Submitted     int64   `json:"-"`
	Completed     int64   `json:"-"` // completions processed by the vCPU, whole run
	Interrupts    int64   `json:"-"` // interrupts delivered in the window
	MeanLatencyUs float64 `json:"-"`
	MeanInFlight  float64 `json:"-"` // time-averaged I/Os outstanding (submitted, not processed)
	DurationNs    int64   `json:"-"` // measured window
	IPIs          int64   `json:"-"`
}

type evKind uint8

const (
	evDevDone evKind = iota
	evProcessed
	evCPUDone
	evTimer
	evEpoch
	evArrival
	evIPICheck
	evBurstToggle
)

type event struct {
	t    int64
	seq  uint64
	kind evKind
	id   int32
	gen  uint64
}

type evHeap []event

func (h evHeap) Len() int { return len(h) }
func (h evHeap) Less(i, j int) bool {
	if h[i].t != h[j].t {
		return h[i].t < h[j].t
	}
	return h[i].seq < h[j].seq
}
func (h evHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *evHeap) Push(x any)   { *h = append(*h, x.(event)) }
func (h *evHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	*h = old[:len(old)-1]
	return e
}

type state struct {
	cfg Config
	pol coalesce.Policy
	rng *rand.Rand
	ev  evHeap
	seq uint64
	now int64

	submitT  []int64 // per I/O id
	devBusy  int
	devQueue []int32
	devCIF   int
	held     []int32 // completions posted, interrupt not yet delivered
	jobs     [][]int32
	cpuBusy  bool
	jobStart int64
	jobCost  int64
	busyDone int64

	timerGen uint64
	timerAt  int64
	timerOn  bool

	lastIntr    int64
	intrEver    bool
	ipiWaiting  bool
	burstOn     bool
	outstanding int64

	processed int64
	measuring bool
	draining  bool
	t0        int64
	t1        int64
	busy1     int64
	busy0     int64
	area      float64
	areaT     int64
	lat       []int64
	intrs     int64
	ipis      int64
}

func (s *state) push(t int64, k evKind, id int32, gen uint64) {
	s.seq++
	heap.Push(&s.ev, event{t: t, seq: s.seq, kind: k, id: id, gen: gen})
}

func (s *state) cumBusy(t int64) int64 {
	b := s.busyDone
	if s.cpuBusy {
		d := t - s.jobStart
		if d > s.jobCost {
			d = s.jobCost
		}
		b += d
	}
	return b
}

func (s *state) serviceTime() int64 {
	d := s.cfg.Device
	return d.MinNs + int64(s.rng.ExpFloat64()*float64(d.ExpMeanNs))
}

func (s *state) advanceArea(t int64) {
	if s.measuring {
		s.area += float64(s.outstanding) * float64(t-s.areaT)
	}
	s.areaT = t
}

func (s *state) submit() {
	id := int32(len(s.submitT))
	s.submitT = append(s.submitT, s.now)
	s.advanceArea(s.now)
	s.outstanding++
	s.devCIF++
	if s.devBusy < s.cfg.Device.Parallel {
		s.devBusy++
		s.push(s.now+s.serviceTime(), evDevDone, id, 0)
	} else {
		s.devQueue = append(s.devQueue, id)
	}
}

func (s *state) deliver() {
	batch := s.held
	s.held = nil
	if s.measuring {
		s.intrs++
	}
	s.jobs = append(s.jobs, batch)
	if s.cpuBusy {
		return // the vCPU finds it when its current work ends
	}
	if s.cfg.IPICostNs > 0 && s.cfg.IPIThresholdNs > 0 && s.intrEver && s.now-s.lastIntr < s.cfg.IPIThresholdNs {
		// IPI coalesced: the vCPU checks when the threshold has passed.
		if !s.ipiWaiting {
			s.ipiWaiting = true
			s.push(s.lastIntr+s.cfg.IPIThresholdNs, evIPICheck, 0, 0)
		}
		return
	}
	s.startJob(s.cfg.IPICostNs > 0)
}

func (s *state) startJob(ipi bool) {
	if s.cpuBusy || len(s.jobs) == 0 {
		return
	}
	batch := s.jobs[0]
	s.jobs = s.jobs[1:]
	cost := s.cfg.IntrCostNs
	if ipi {
		cost += s.cfg.IPICostNs
		if s.measuring {
			s.ipis++
		}
	}
	s.lastIntr, s.intrEver = s.now, true
	t := s.now + cost
	for _, id := range batch {
		t += s.cfg.ComplCostNs
		s.push(t, evProcessed, id, 0)
	}
	cost = t - s.now
	s.cpuBusy, s.jobStart, s.jobCost = true, s.now, cost
	s.push(t, evCPUDone, 0, 0)
}

func (s *state) syncTimer() {
	at, ok := s.pol.Deadline()
	if !ok {
		s.timerOn = false
		return
	}
	if s.timerOn && s.timerAt == at {
		return
	}
	s.timerGen++
	s.timerOn, s.timerAt = true, at
	if at < s.now {
		at = s.now
	}
	s.push(at, evTimer, 0, s.timerGen)
}

func (s *state) nextArrival() int64 {
	rate := s.cfg.OpenRate
	if s.cfg.Bursty {
		rate *= 4
	}
	return s.now + int64(s.rng.ExpFloat64()*1e9/rate) + 1
}

// Run simulates cfg with policy p.
func Run(cfg Config, p coalesce.Policy) (Result, error) {
	if cfg.Device.Parallel < 1 || cfg.Device.MinNs < 0 || cfg.Device.ExpMeanNs < 0 {
		return Result{}, fmt.Errorf("sim: device %q: need parallel ≥ 1 and non-negative service times", cfg.Device.Name)
	}
	if (cfg.CIF > 0) == (cfg.OpenRate > 0) {
		return Result{}, fmt.Errorf("sim: set exactly one of cif (closed loop) and open rate (open loop)")
	}
	if cfg.Completions < 1 || cfg.Warmup < 0 || cfg.IntrCostNs < 0 || cfg.ComplCostNs < 0 || cfg.IPICostNs < 0 || cfg.IPIThresholdNs < 0 || cfg.EpochNs <= 0 {
		return Result{}, fmt.Errorf("sim: completions must be ≥ 1, epoch > 0 and costs non-negative")
	}
	s := &state{cfg: cfg, pol: p, rng: rand.New(rand.NewPCG(cfg.Seed, cfg.Seed^0x9e3779b97f4a7c15))}
	total := int64(cfg.Warmup + cfg.Completions)
	s.lat = make([]int64, 0, cfg.Completions)
	if cfg.Warmup == 0 {
		s.measuring = true
	}
	if cfg.CIF > 0 {
		for i := 0; i < cfg.CIF; i++ {
			s.submit()
		}
	} else {
		s.burstOn = true
		s.push(s.nextArrival(), evArrival, 0, 0)
		if cfg.Bursty {
			s.push(int64(s.rng.ExpFloat64()*1e6)+1, evBurstToggle, 0, 0)
		}
	}
	ep, _ := p.(coalesce.Epocher)
	s.push(cfg.EpochNs, evEpoch, 0, 0)
	const maxEvents = 1 << 28
	for n := 0; !(s.draining && s.outstanding == 0); n++ {
		if len(s.ev) == 0 || n > maxEvents {
			return Result{}, fmt.Errorf("sim: %s stalled after %d of %d completions (held %d, pending %d)", p.Name(), s.processed, total, len(s.held), p.Pending())
		}
		e := heap.Pop(&s.ev).(event)
		s.now = e.t
		switch e.kind {
		case evDevDone:
			s.devCIF--
			if len(s.devQueue) > 0 {
				id := s.devQueue[0]
				s.devQueue = s.devQueue[1:]
				s.push(s.now+s.serviceTime(), evDevDone, id, 0)
			} else {
				s.devBusy--
			}
			s.held = append(s.held, e.id)
			if p.Complete(s.now, s.devCIF) {
				s.deliver()
			}
			s.syncTimer()
		case evTimer:
			if e.gen != s.timerGen || !s.timerOn {
				continue
			}
			s.timerOn = false
			if p.Expire(s.now) {
				s.deliver()
			}
			s.syncTimer()
		case evProcessed:
			s.advanceArea(s.now)
			s.outstanding--
			s.processed++
			if s.measuring {
				s.lat = append(s.lat, s.now-s.submitT[e.id])
			}
			if s.processed == int64(cfg.Warmup) && !s.measuring {
				s.measuring = true
				s.t0, s.busy0, s.areaT = s.now, s.cumBusy(s.now), s.now
			}
			if s.processed == total {
				// End of the measured window; drain what is in flight
				// without new submissions, so completions = submissions.
				s.measuring, s.draining = false, true
				s.t1, s.busy1 = s.now, s.cumBusy(s.now)
			}
			if cfg.CIF > 0 && !s.draining {
				s.submit()
			}
		case evCPUDone:
			s.busyDone += s.jobCost
			s.cpuBusy = false
			s.startJob(false) // busy vCPU: no IPI needed for queued work
		case evIPICheck:
			s.ipiWaiting = false
			s.startJob(false)
		case evEpoch:
			if s.draining && s.outstanding == 0 {
				continue
			}
			if ep != nil {
				ep.Epoch()
			}
			s.push(s.now+cfg.EpochNs, evEpoch, 0, 0)
		case evArrival:
			if s.draining {
				continue
			}
			if s.burstOn {
				s.submit()
			}
			s.push(s.nextArrival(), evArrival, 0, 0)
		case evBurstToggle:
			if s.draining {
				continue
			}
			s.burstOn = !s.burstOn
			mean := 3e6
			if s.burstOn {
				mean = 1e6
			}
			s.push(s.now+int64(s.rng.ExpFloat64()*mean)+1, evBurstToggle, 0, 0)
		}
	}
	dur := s.t1 - s.t0
	busy := s.busy1 - s.busy0
	r := Result{Policy: p.Name(), CIF: cfg.CIF, Submitted: int64(len(s.submitT)), Completed: s.processed, Interrupts: s.intrs, DurationNs: dur, IPIs: s.ipis}
	if dur > 0 {
		secs := float64(dur) / 1e9
		r.IOPS = float64(len(s.lat)) / secs
		r.CPUUtil = float64(busy) / float64(dur)
		r.InterruptsPerSec = float64(s.intrs) / secs
		r.MeanInFlight = s.area / float64(dur)
	}
	if r.CPUUtil > 0 {
		r.IOPSPerCPU = r.IOPS / r.CPUUtil
	}
	if len(s.lat) > 0 {
		sort.Slice(s.lat, func(i, j int) bool { return s.lat[i] < s.lat[j] })
		var sum float64
		for _, l := range s.lat {
			sum += float64(l)
		}
		r.MeanLatencyUs = sum / float64(len(s.lat)) / 1e3
		r.LatencyP50Us = float64(pct(s.lat, 50)) / 1e3
		r.LatencyP99Us = float64(pct(s.lat, 99)) / 1e3
	}
	if cfg.CIF == 0 {
		r.CIF = int(math.Round(r.MeanInFlight))
	}
	return r, nil
}

// pct is the nearest-rank percentile of sorted values.
func pct(sorted []int64, p int) int64 {
	k := (p*len(sorted) + 99) / 100
	if k < 1 {
		k = 1
	}
	return sorted[k-1]
}
