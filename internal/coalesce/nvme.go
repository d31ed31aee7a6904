package coalesce

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"regexp"
	"sort"

	"github.com/irqpilot/irqpilot/internal/kernel"
)

// NVMe admin command constants (NVM Express Base Specification: Set
// Features, opcode 09h; feature 08h Interrupt Coalescing). The Linux
// passthrough ioctl itself is kernel.NVMeAdmin.
const (
	NVMeOpSetFeatures      = 0x09
	NVMeFeatIntCoalescing  = 0x08
	NVMeAdminCmdSize       = kernel.NVMeAdminCmdSize // sizeof(struct nvme_passthru_cmd)
	NVMeAggTimeUnitNs      = 100_000
	nvmeDefaultTimeoutMs   = 0 // driver default
	nvmeMaxAggTime100us    = 255
	nvmeMaxAggThreshold0Bs = 255
)

// NVMeIoctlAdminCmd is NVME_IOCTL_ADMIN_CMD (issued by kernel.NVMeAdmin).
const NVMeIoctlAdminCmd = kernel.NVMeIoctlAdminCmd

// NVMeCoalescing is the value of feature 08h.
type NVMeCoalescing struct {
	// Threshold is the aggregation threshold in completions, 0-based as
	// on the wire (0 = one entry: an interrupt per completion).
	Threshold uint8 `json:"aggregation_threshold"`
	// Time is the aggregation time in 100 µs units (0 = no delay).
	Time uint8 `json:"aggregation_time_100us"`
}

// Off reports whether the setting means no coalescing.
func (c NVMeCoalescing) Off() bool { return c.Threshold == 0 || c.Time == 0 }

// CDW11 is command dword 11 of Set Features 08h: bits 7:0 threshold,
// bits 15:8 time.
func (c NVMeCoalescing) CDW11() uint32 { return uint32(c.Threshold) | uint32(c.Time)<<8 }

func (c NVMeCoalescing) String() string {
	if c.Off() {
		return "off"
	}
	return fmt.Sprintf("threshold %d completions, time %d µs", int(c.Threshold)+1, int(c.Time)*100)
}

// NVMeAdminCmd mirrors struct nvme_admin_cmd (= struct nvme_passthru_cmd).
type NVMeAdminCmd struct {
	Opcode      uint8
	Flags       uint8
	Rsvd1       uint16
	NSID        uint32
	CDW2, CDW3  uint32
	Metadata    uint64
	Addr        uint64
	MetadataLen uint32
	DataLen     uint32
	CDW10       uint32
	CDW11       uint32
	CDW12       uint32
	CDW13       uint32
	CDW14       uint32
	CDW15       uint32
	TimeoutMs   uint32
	Result      uint32
}

// SetCoalescingCmd builds Set Features 08h (not saved across resets: SV=0).
func SetCoalescingCmd(c NVMeCoalescing) NVMeAdminCmd {
	return NVMeAdminCmd{Opcode: NVMeOpSetFeatures, CDW10: NVMeFeatIntCoalescing, CDW11: c.CDW11(), TimeoutMs: nvmeDefaultTimeoutMs}
}

// Marshal lays the command out exactly as the kernel's struct (little
// endian, the only byte order Linux NVMe hosts use for this struct on x86
// and arm64; natural alignment, 72 bytes).
func (c NVMeAdminCmd) Marshal() [NVMeAdminCmdSize]byte {
	var b [NVMeAdminCmdSize]byte
	le := binary.LittleEndian
	b[0] = c.Opcode
	b[1] = c.Flags
	le.PutUint16(b[2:], c.Rsvd1)
	le.PutUint32(b[4:], c.NSID)
	le.PutUint32(b[8:], c.CDW2)
	le.PutUint32(b[12:], c.CDW3)
	le.PutUint64(b[16:], c.Metadata)
	le.PutUint64(b[24:], c.Addr)
	le.PutUint32(b[32:], c.MetadataLen)
	le.PutUint32(b[36:], c.DataLen)
	le.PutUint32(b[40:], c.CDW10)
	le.PutUint32(b[44:], c.CDW11)
	le.PutUint32(b[48:], c.CDW12)
	le.PutUint32(b[52:], c.CDW13)
	le.PutUint32(b[56:], c.CDW14)
	le.PutUint32(b[60:], c.CDW15)
	le.PutUint32(b[64:], c.TimeoutMs)
	le.PutUint32(b[68:], c.Result)
	return b
}

// ErrNoNVMe says the machine has no NVMe controllers.
var ErrNoNVMe = errors.New("no NVMe controllers found under /sys/class/nvme")

// NVMeSample is one epoch's reading of one controller: commands in flight
// summed over its namespaces (/sys/block/nvmeXnY/inflight) and completed
// I/Os so far (/sys/block/nvmeXnY/stat fields 1 and 5).
type NVMeSample struct {
	Controller string   `json:"controller"`
	Namespaces []string `json:"namespaces"`
	InFlight   int      `json:"inflight"`
	Completed  uint64   `json:"completed"`
}

var nsName = regexp.MustCompile(`^(nvme\d+)n\d+$`)

// ReadNVMe reads every NVMe controller's in-flight and completion counters.
func ReadNVMe(fs *kernel.FS) ([]NVMeSample, error) {
	ctrls, err := fs.NVMeControllers()
	if err != nil {
		if os.IsNotExist(err) {
			return nil, ErrNoNVMe
		}
		return nil, fmt.Errorf("/sys/class/nvme: %w", err)
	}
	if len(ctrls) == 0 {
		return nil, ErrNoNVMe
	}
	byCtrl := map[string]*NVMeSample{}
	for _, c := range ctrls {
		byCtrl[c] = &NVMeSample{Controller: c, Namespaces: []string{}}
	}
	blocks, err := fs.BlockDevices()
	if err != nil {
		return nil, fmt.Errorf("/sys/block: %w", err)
	}
	for _, b := range blocks {
		m := nsName.FindStringSubmatch(b)
		if m == nil {
			continue
		}
		s := byCtrl[m[1]]
		if s == nil {
			continue
		}
		reads, writes, err := fs.BlockInFlight(b)
		if err != nil {
			return nil, err
		}
		s.InFlight += reads + writes
		st, err := fs.BlockStat(b)
		if err != nil {
			return nil, err
		}
		s.Completed += st.ReadIOs + st.WriteIOs
		s.Namespaces = append(s.Namespaces, b)
	}
	out := make([]NVMeSample, 0, len(byCtrl))
	for _, s := range byCtrl {
		out = append(out, *s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Controller < out[j].Controller })
	return out, nil
}

// NVMeControllerConfig configures the NVMe vIC controller.
type NVMeControllerConfig struct {
	Table        []Entry // nil: DefaultTable
	CIFThreshold int     // 0: 4
	TrickleIOPS  int     // 0: 2000
	// AggTime is the aggregation time in 100 µs units used whenever
	// coalescing is on (the hardware needs a time bound; 1 = 100 µs, the
	// smallest non-zero value). 0: 1.
	AggTime uint8
}

// NVMeDecision is the controller's choice for one controller in one epoch.
type NVMeDecision struct {
	Controller string         `json:"controller"`
	InFlight   int            `json:"inflight"`
	IOPS       int64          `json:"iops"`
	Setting    NVMeCoalescing `json:"setting"`
	Changed    bool           `json:"changed"`
	Reason     string         `json:"reason"`
	CDW11      uint32         `json:"cdw11"`
}

// NVMeController applies vIC's table to NVMe hardware coalescing: each
// epoch it maps a controller's commands in flight to a delivery ratio R =
// countUp/skipUp and sets the aggregation threshold to ⌊skipUp/countUp⌋
// completions per interrupt; off at low CIF or below the trickle rate. It is
// pure: samples and elapsed time come from the caller.
type NVMeController struct {
	vic     *VIC
	trickle int64
	aggTime uint8
	last    map[string]NVMeSample
	current map[string]NVMeCoalescing
}

// NewNVMeController validates cfg.
func NewNVMeController(cfg NVMeControllerConfig) (*NVMeController, error) {
	v, err := NewVIC(VICConfig{Table: cfg.Table, CIFThreshold: cfg.CIFThreshold, TrickleIOPS: cfg.TrickleIOPS})
	if err != nil {
		return nil, err
	}
	if cfg.AggTime == 0 {
		cfg.AggTime = 1
	}
	return &NVMeController{vic: v, trickle: int64(v.trickle), aggTime: cfg.AggTime, last: map[string]NVMeSample{}, current: map[string]NVMeCoalescing{}}, nil
}

// Step takes one epoch's samples (elapsedNs since the previous Step) and
// returns a decision per controller. Changed is true when the setting
// differs from what the controller last chose (or on the first epoch, when
// the device's setting is unknown), i.e. when a Set Features must be sent.
func (c *NVMeController) Step(samples []NVMeSample, elapsedNs int64) []NVMeDecision {
	out := make([]NVMeDecision, 0, len(samples))
	for _, s := range samples {
		d := NVMeDecision{Controller: s.Controller, InFlight: s.InFlight, IOPS: -1}
		prev, seen := c.last[s.Controller]
		c.last[s.Controller] = s
		if seen && elapsedNs > 0 && s.Completed >= prev.Completed {
			d.IOPS = int64(s.Completed-prev.Completed) * 1_000_000_000 / elapsedNs
		}
		switch {
		case d.IOPS < 0:
			d.Reason = "first epoch: no rate yet, coalescing off"
		case s.InFlight <= c.vic.threshold:
			d.Reason = fmt.Sprintf("cif %d ≤ threshold %d: off", s.InFlight, c.vic.threshold)
		case d.IOPS < c.trickle:
			d.Reason = fmt.Sprintf("%d IOPS below trickle %d: off", d.IOPS, c.trickle)
		default:
			r := c.vic.Ratio(s.InFlight)
			per := r.SkipUp / r.CountUp // completions per interrupt
			if per > nvmeMaxAggThreshold0Bs+1 {
				per = nvmeMaxAggThreshold0Bs + 1
			}
			if per <= 1 {
				d.Reason = fmt.Sprintf("cif %d: R %s rounds to one completion per interrupt: off", s.InFlight, r)
				break
			}
			d.Setting = NVMeCoalescing{Threshold: uint8(per - 1), Time: c.aggTime}
			d.Reason = fmt.Sprintf("cif %d: R %s → %d completions per interrupt", s.InFlight, r, per)
		}
		cur, had := c.current[s.Controller]
		d.Changed = !had || cur != d.Setting
		c.current[s.Controller] = d.Setting
		d.CDW11 = d.Setting.CDW11()
		out = append(out, d)
	}
	return out
}
