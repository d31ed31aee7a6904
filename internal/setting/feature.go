package setting

import (
	"encoding/json"
	"fmt"

	"github.com/irqpilot/irqpilot/internal/host"
	"github.com/irqpilot/irqpilot/internal/kernel"
)

// feature is one probe of the running kernel: a kind of setting says which
// features it needs (in its own file), and a plan that asks for a setting
// the probe found missing is cut down by `plan` and refused by `apply`.
// Probes look for the kernel's files through kernel.FS (the live machine, a
// capture or a test tree) or use what the netdev family said; a version
// number is never consulted.
type feature struct {
	name string
	// probe is shown to people: what was looked for.
	probe string
	// glob matches the feature's files; evidence matches the objects they
	// would belong to. Evidence without the files means the kernel lacks
	// the feature; no evidence means nothing here can tell.
	glob, evidence string
	// napiSet: the feature is the netdev family's napi-set operation
	// (Host.NAPISet, probed with the generic-netlink controller).
	napiSet bool
	// initialNetNS: the files exist in the initial network namespace only
	// (net.core sysctls the kernel registers for init_net), so inside any
	// other one their absence says nothing of the kernel.
	initialNetNS bool
}

// test probes f. whole says a missing file is a missing feature (the live
// machine, a whole test tree); elsewhere, as in a third-party fixture that
// holds a few files, absence tells nothing.
func (f *feature) test(fs *kernel.FS, h *host.Host, whole bool) *bool {
	yes, no := true, false
	if f.napiSet {
		return h.NAPISet
	}
	if m, _ := fs.GlobSettingFiles(f.glob); len(m) > 0 {
		return &yes
	}
	if m, _ := fs.GlobSettingFiles(f.evidence); whole && len(m) > 0 {
		return &no
	}
	return nil
}

// featured is a Handler whose settings need kernel features.
type featured interface {
	// features lists every feature the kind may need or report on.
	features() []*feature
	// needs is the feature c needs (nil: none).
	needs(c *Change) *feature
}

// ProbeFeatures probes every feature the registered kinds need, in kind
// order, each with the kinds that need it. On the live machine the answers
// are kept for a capture (kernel.FeaturesFile), which replays them; a
// capture without them (an older irqpilot's) knows only the features whose
// files it holds.
func ProbeFeatures(fs *kernel.FS, h *host.Host) []host.Feature {
	var recorded map[string]*bool
	whole := fs.IsLive()
	if !whole {
		if b, err := fs.ReadSynthetic(kernel.FeaturesFile); err == nil {
			if json.Unmarshal(b, &recorded) != nil {
				recorded = nil
			}
		}
		whole = fs.Exists(kernel.SyntheticDir + "/" + kernel.WholeTreeFile)
	}
	var out []host.Feature
	at := map[string]int{}
	// Probing inside a network namespace other than the initial one (as
	// the capture says when replaying one).
	elsewhere := false
	if fs.IsLive() {
		if ns, err := fs.CurrentNetNS(); err == nil {
			elsewhere = !ns.Initial
		}
		if elsewhere {
			fs.SaveSynthetic(kernel.FeaturesNetNSFile, []byte("1\n"))
		}
	} else if _, err := fs.ReadSynthetic(kernel.FeaturesNetNSFile); err == nil {
		elsewhere = true
	}
	for _, k := range Kinds() {
		fk, ok := registry[k].(featured)
		if !ok {
			continue
		}
		for _, f := range fk.features() {
			i, seen := at[f.name]
			if !seen {
				i = len(out)
				at[f.name] = i
				sup, ok := recorded[f.name]
				if !ok || f.napiSet {
					sup = f.test(fs, h, whole)
				}
				out = append(out, host.Feature{Name: f.name, Probe: f.probe, Supported: sup, NetNS: f.initialNetNS && elsewhere})
			}
			if needed(fk, f) {
				out[i].Kinds = append(out[i].Kinds, string(k))
			}
		}
	}
	if fs.IsLive() {
		rec := map[string]*bool{}
		for _, f := range out {
			rec[f.Name] = f.Supported
		}
		if b, err := json.Marshal(rec); err == nil {
			fs.SaveSynthetic(kernel.FeaturesFile, b)
		}
	}
	return out
}

// needed says whether kind k needs f (rather than only reporting on it).
func needed(fk featured, f *feature) bool {
	for _, n := range neededBy(fk) {
		if n == f {
			return true
		}
	}
	return false
}

// neededBy lists what a kind's changes can need: the features a sample
// change of each of its shapes needs.
func neededBy(fk featured) []*feature {
	if s, ok := fk.(interface{ needed() []*feature }); ok {
		return s.needed()
	}
	return fk.features()
}

func init() { host.FeatureProbe = ProbeFeatures }

// Unsupported says whether c needs a feature the probes of h found missing,
// and which. A host that was not probed (built by hand) supports all.
func Unsupported(h *host.Host, c *Change) (host.Feature, bool) {
	h2, err := Lookup(c.Kind)
	if err != nil {
		return host.Feature{}, false
	}
	fk, ok := h2.(featured)
	if !ok {
		return host.Feature{}, false
	}
	f := fk.needs(c)
	if f == nil {
		return host.Feature{}, false
	}
	for _, hf := range h.Features {
		if hf.Name == f.name {
			return hf, hf.Missing()
		}
	}
	return host.Feature{}, false
}

// MissingText is the one line that says a feature is missing.
func MissingText(f host.Feature) string {
	why := ""
	if f.NetNS {
		why = ": the kernel keeps it in the initial namespace only"
	}
	return fmt.Sprintf("%s has no %s (%s not found%s)", f.Where(), f.Name, f.Probe, why)
}

// fileKind needs its feature, if it names one.
func (k fileKind) features() []*feature {
	if k.feat == nil {
		return nil
	}
	return []*feature{k.feat}
}
func (k fileKind) needs(*Change) *feature { return k.feat }
