package host

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strconv"

	"github.com/irqpilot/irqpilot/internal/kernel"
	"github.com/safchain/ethtool"
)

// ethtoolFile is the synthetic file in a capture that holds what the
// ethtool ioctls said, so a snapshot reproduces the live inventory.
const ethtoolFile = "ethtool.json"

// EthtoolFacts is what the ethtool ioctls report for one interface. An
// error string is kept instead of a value when the driver refused
// (e.g. "operation not supported").
type EthtoolFacts struct {
	Driver        string    `json:"driver,omitempty"`
	Channels      *Channels `json:"channels,omitempty"`
	ChannelsError string    `json:"channels_error,omitempty"`
	Coalesce      *Coalesce `json:"coalesce,omitempty"`
	CoalesceError string    `json:"coalesce_error,omitempty"`
}

// QueryEthtool asks the kernel, through SIOCETHTOOL ioctls
// (kernel.Ethtool), for the driver, channels and coalescing of each named
// interface. The ioctls act on the network namespace of the calling thread
// at the time of the call (the socket is created here), so a caller reading
// another namespace must lock its OS thread and enter that namespace first.
func QueryEthtool(names []string) (map[string]EthtoolFacts, error) {
	et, err := kernel.OpenEthtool()
	if err != nil {
		return nil, err
	}
	defer et.Close()
	out := make(map[string]EthtoolFacts, len(names))
	for _, n := range names {
		var f EthtoolFacts
		if d, err := et.Driver(n); err == nil {
			f.Driver = d
		}
		if c, err := et.Channels(n); err == nil {
			f.Channels = &Channels{
				MaxRx: c.MaxRx, MaxTx: c.MaxTx, MaxOther: c.MaxOther, MaxCombined: c.MaxCombined,
				Rx: c.RxCount, Tx: c.TxCount, Other: c.OtherCount, Combined: c.CombinedCount,
			}
		} else {
			f.ChannelsError = err.Error()
		}
		if k, err := et.Coalesce(n); err == nil {
			f.Coalesce = &Coalesce{
				RxUsecs: k.RxCoalesceUsecs, RxFrames: k.RxMaxCoalescedFrames,
				TxUsecs: k.TxCoalesceUsecs, TxFrames: k.TxMaxCoalescedFrames,
				AdaptiveRx: k.UseAdaptiveRxCoalesce != 0, AdaptiveTx: k.UseAdaptiveTxCoalesce != 0,
				RxUsecsIRQ: k.RxCoalesceUsecsIrq, RxFramesIRQ: k.RxMaxCoalescedFramesIrq,
				TxUsecsIRQ: k.TxCoalesceUsecsIrq, TxFramesIRQ: k.TxMaxCoalescedFramesIrq,
				RateSampleInt: k.RateSampleInterval,
			}
		} else {
			f.CoalesceError = err.Error()
		}
		out[n] = f
	}
	return out, nil
}

var reKindWord = regexp.MustCompile(`^[a-z][a-z0-9_]*$`)

// readEthtool fills NIC.Channels and NIC.Coalesce: from the ioctls on the
// live machine (saved for a capture), from the capture's ethtool.json
// otherwise. For virtual devices it also takes the driver name ("veth",
// "ifb") as Driver and, where sysfs named no kind, as Kind.
func readEthtool(kfs *kernel.FS, h *Host) {
	if len(h.NICs) == 0 {
		return
	}
	var facts map[string]EthtoolFacts
	if kfs.IsLive() {
		names := make([]string, len(h.NICs))
		for i := range h.NICs {
			names[i] = h.NICs[i].Name
		}
		var err error
		facts, err = QueryEthtool(names)
		if err != nil {
			h.unavailable("nic channels and coalescing", "ethtool socket", err)
			return
		}
		if b, err := json.Marshal(facts); err == nil {
			kfs.SaveSynthetic(ethtoolFile, b)
		}
	} else {
		b, err := kfs.ReadSynthetic(ethtoolFile)
		if err != nil {
			h.unavailable("nic channels and coalescing", "/"+kernel.SyntheticDir+"/"+ethtoolFile,
				fmt.Errorf("not captured (ethtool settings are read with ioctls on the live machine): %w", err))
			return
		}
		if err := json.Unmarshal(b, &facts); err != nil {
			h.unavailable("nic channels and coalescing", "/"+kernel.SyntheticDir+"/"+ethtoolFile, err)
			return
		}
	}
	applyEthtool(h, facts)
}

func applyEthtool(h *Host, facts map[string]EthtoolFacts) {
	for i := range h.NICs {
		n := &h.NICs[i]
		f, ok := facts[n.Name]
		if !ok {
			h.unavailable("nic "+n.Name+" channels and coalescing", "ethtool "+n.Name, errors.New("not captured"))
			continue
		}
		if n.Virtual {
			if n.Driver == "" {
				n.Driver = f.Driver
			}
			if n.Kind == "" && reKindWord.MatchString(f.Driver) {
				n.Kind = f.Driver
			}
		}
		n.Channels, n.Coalesce = f.Channels, f.Coalesce
		if f.Channels == nil {
			h.unavailable("nic "+n.Name+" channels", "ethtool -l "+n.Name, errors.New(orUnknown(f.ChannelsError)))
		}
		if f.Coalesce == nil {
			h.unavailable("nic "+n.Name+" coalesce", "ethtool -c "+n.Name, errors.New(orUnknown(f.CoalesceError)))
		}
	}
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown error"
	}
	return s
}

// CoalesceKeys are the coalescing fields a plan can set, in the order
// ethtool -c prints them.
var CoalesceKeys = []string{"rx_usecs", "rx_frames", "tx_usecs", "tx_frames", "adaptive_rx", "adaptive_tx"}

// SetCoalesceFields changes the named fields of k (a struct as
// ETHTOOL_GCOALESCE filled it) and nothing else. rx_usecs, rx_frames,
// tx_usecs and tx_frames take a decimal number (0 to 2^32-1); adaptive_rx
// and adaptive_tx take on or off. An unknown key or a value of the wrong form
// is an error naming the key, and then k is left unchanged.
func SetCoalesceFields(k *ethtool.Coalesce, fields map[string]string) error {
	out := *k
	for key, v := range fields {
		var dst *uint32
		onoff := false
		switch key {
		case "rx_usecs":
			dst = &out.RxCoalesceUsecs
		case "rx_frames":
			dst = &out.RxMaxCoalescedFrames
		case "tx_usecs":
			dst = &out.TxCoalesceUsecs
		case "tx_frames":
			dst = &out.TxMaxCoalescedFrames
		case "adaptive_rx":
			dst, onoff = &out.UseAdaptiveRxCoalesce, true
		case "adaptive_tx":
			dst, onoff = &out.UseAdaptiveTxCoalesce, true
		default:
			return fmt.Errorf("coalescing field %q is not known (rx_usecs, rx_frames, tx_usecs, tx_frames, adaptive_rx, adaptive_tx)", key)
		}
		if onoff {
			switch v {
			case "on":
				*dst = 1
			case "off":
				*dst = 0
			default:
				return fmt.Errorf("coalescing %s=%q: want on or off", key, v)
			}
			continue
		}
		n, err := strconv.ParseUint(v, 10, 32)
		if err != nil || strconv.FormatUint(n, 10) != v {
			return fmt.Errorf("coalescing %s=%q: want a decimal number 0-4294967295", key, v)
		}
		*dst = uint32(n)
	}
	*k = out
	return nil
}

// SetCoalesce changes the named coalescing fields of interface name
// (ethtool -C): it reads the driver's current settings with
// ETHTOOL_GCOALESCE, changes only the given fields (SetCoalesceFields), and
// writes them back with ETHTOOL_SCOALESCE, so fields the plan does not name
// keep their value. The fields are checked before anything is read or
// written. It acts in the calling thread's network namespace.
func SetCoalesce(name string, fields map[string]string) error {
	if err := SetCoalesceFields(&ethtool.Coalesce{}, fields); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	et, err := kernel.OpenEthtool()
	if err != nil {
		return err
	}
	defer et.Close()
	k, err := et.Coalesce(name)
	if err != nil {
		return fmt.Errorf("ethtool -c %s: %w", name, err)
	}
	if err := SetCoalesceFields(k, fields); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	if err := et.SetCoalesce(name, k); err != nil {
		return fmt.Errorf("ethtool -C %s: %w", name, err)
	}
	return nil
}
