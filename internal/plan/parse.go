package plan

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"gopkg.in/yaml.v3"

	"github.com/irqpilot/irqpilot/internal/cpuset"
	"github.com/irqpilot/irqpilot/internal/setting"
)

// A plan is untrusted input (anyone may hand one to apply or the agent),
// so what it may cost to read is bounded, well above what a real plan
// needs: the plan auto makes for the largest real host at hand (pcp, 1152
// CPUs, 1 056 IRQs) holds about 2 000 entries in some 300 KB.
const (
	// MaxPlanBytes bounds a plan file. With maxPlanSeparators, the most a
	// plan can cost to parse is about 250 MB of allocation (a million
	// one-byte scalars; TestParseUnderAddressSpaceLimit).
	MaxPlanBytes = 4 << 20
	// MaxPlanEntries bounds the entries of a plan's lists together (irqs,
	// rx_queues, tx_queues, apps, coalesce, napi, notes): 8 per CPU at
	// NR_CPUS' maximum of 8192.
	MaxPlanEntries = 1 << 16
	// maxPlanSeparators bounds the YAML nodes a plan can make before
	// yaml.v3 builds them: every node after the first follows a newline or
	// one of the indicators , [ { : - ?, so counting those bounds the nodes.
	// 4 MiB of "a," would otherwise be 2 million nodes (some 500 MB of
	// allocation); a real plan has about 10 per entry.
	maxPlanSeparators = 1 << 20
)

// LoadFile reads and checks a plan file (YAML or JSON).
func LoadFile(file string) (*Plan, error) {
	data, err := ReadFile(file)
	if err != nil {
		return nil, err
	}
	return Parse(file, data)
}

// ReadFile reads a plan file, refusing anything but a regular file (a FIFO
// would block for ever, a device such as /dev/zero never ends) and a file
// larger than MaxPlanBytes. The file is opened O_NONBLOCK, so that opening
// a FIFO does not wait for a writer, and checked with fstat before one byte
// is read.
func ReadFile(file string) ([]byte, error) {
	fh, err := os.OpenFile(file, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	defer fh.Close()
	fi, err := fh.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("plan %s is %s, not a regular file; refused (write the plan to a file first)", file, fileKind(fi.Mode()))
	}
	if fi.Size() > MaxPlanBytes {
		return nil, fmt.Errorf("plan %s is %d bytes, over the limit of %d (real plans are a few hundred KB)", file, fi.Size(), MaxPlanBytes)
	}
	data, err := io.ReadAll(io.LimitReader(fh, MaxPlanBytes+1))
	if err != nil {
		return nil, fmt.Errorf("plan %s: %w", file, err)
	}
	if len(data) > MaxPlanBytes {
		return nil, fmt.Errorf("plan %s grew past the limit of %d bytes while being read; refused", file, MaxPlanBytes)
	}
	return data, nil
}

func fileKind(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&fs.ModeNamedPipe != 0:
		return "a FIFO"
	case m&fs.ModeCharDevice != 0:
		return "a character device"
	case m&fs.ModeDevice != 0:
		return "a block device"
	case m&fs.ModeSocket != 0:
		return "a socket"
	}
	return "not a regular file"
}

// Parse decodes and checks a plan. name is used in error messages. JSON is
// read by the same parser (JSON is YAML), so errors in both carry line
// numbers.
//
// We walk the yaml.Node tree ourselves instead of yaml.Decoder.KnownFields
// so that every error names the line and the full field path
// ("irqs[2].cpus"), all problems are reported at once, duplicate keys are
// caught (yaml.v3 does not check them when building nodes), and hostile input
// (aliases, wrong node kinds) can never panic or expand.
func Parse(name string, data []byte) (*Plan, error) {
	l := &errList{file: name, lines: map[string]int{}}
	if len(data) > MaxPlanBytes {
		l.add(0, "", "%d bytes, over the limit of %d (real plans are a few hundred KB)", len(data), MaxPlanBytes)
		return nil, l.err()
	}
	if n := separators(data); n > maxPlanSeparators {
		l.add(0, "", "%d list items, keys or lines, over the limit of %d (real plans have about 10 per entry and a few thousand entries)", n, maxPlanSeparators)
		return nil, l.err()
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			l.add(0, "", "empty plan (expected a mapping with version: %d)", Version)
		} else {
			l.add(syntaxErrLine(data, err), "", "malformed YAML/JSON: %s", yamlErrMsg(err))
		}
		return nil, l.err()
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); err == nil {
		l.add(extra.Line, "", "more than one YAML document; a plan is one document")
		return nil, l.err()
	} else if !errors.Is(err, io.EOF) {
		l.add(yamlErrLine(err), "", "malformed YAML/JSON: %s", yamlErrMsg(err))
		return nil, l.err()
	}
	root := &doc
	if root.Kind == yaml.DocumentNode {
		if len(root.Content) == 0 {
			l.add(root.Line, "", "empty plan (expected a mapping with version: %d)", Version)
			return nil, l.err()
		}
		root = root.Content[0]
	}
	d := &decoder{errList: l}
	p := d.plan(root)
	p.File = name
	p.fieldLines = l.lines
	if len(l.errs) == 0 {
		check(p, l)
	}
	if err := l.err(); err != nil {
		return nil, err
	}
	return p, nil
}

// separators counts the bytes that can start a new YAML node (see
// maxPlanSeparators).
func separators(data []byte) int {
	n := 0
	for _, c := range data {
		switch c {
		case '\n', ',', '[', '{', ':', '-', '?':
			n++
		}
	}
	return n
}

var (
	yamlLineRE   = regexp.MustCompile(`line (\d+)`)
	yamlLineLead = regexp.MustCompile(`^line \d+: `)
)

func yamlErrLine(err error) int {
	if m := yamlLineRE.FindStringSubmatch(err.Error()); m != nil {
		n, _ := strconv.Atoi(m[1])
		return n
	}
	return 0
}

// syntaxErrLine is the line of a parse error: yaml.v3's "line N", or for a
// JSON document (which yaml.v3 often reports without a line) the line of
// encoding/json's syntax error offset.
func syntaxErrLine(data []byte, err error) int {
	if n := yamlErrLine(err); n > 0 {
		return problemLine(data, err, n)
	}
	if t := bytes.TrimSpace(data); len(t) > 0 && (t[0] == '{' || t[0] == '[') {
		var v any
		var se *json.SyntaxError
		if jerr := json.Unmarshal(data, &v); errors.As(jerr, &se) {
			return 1 + bytes.Count(data[:min(int(se.Offset), len(data))], []byte("\n"))
		}
	}
	return 0
}

// problemLine: yaml.v3 reports a syntax error at the line where the
// enclosing construct began (its context mark: line 1 for a stray line in
// the top-level mapping) rather than where the problem is, and does not
// expose the problem's position. The problem's line is the first line
// whose prefix of the document already fails with the same message; it is
// at or after the context line. Only when a prefix reproduces the message
// is that line used, else the reported one.
func problemLine(data []byte, err error, reported int) int {
	msg := yamlErrMsg(err)
	lines := bytes.SplitAfter(data, []byte("\n"))
	end := 0
	for i, ln := range lines {
		end += len(ln)
		if i+1 < reported {
			continue
		}
		var n yaml.Node
		perr := yaml.Unmarshal(data[:end], &n)
		if perr != nil && yamlErrMsg(perr) == msg {
			return i + 1
		}
	}
	return reported
}

func yamlErrMsg(err error) string {
	s := strings.TrimPrefix(err.Error(), "yaml: ")
	return strings.TrimSpace(yamlLineLead.ReplaceAllString(s, ""))
}

// MarshalFile encodes the plan as a YAML file, with a header comment.
func (p *Plan) MarshalFile() ([]byte, error) {
	var b bytes.Buffer
	b.WriteString("# irqpilot plan — review, then: irqpilot apply FILE\n")
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(p); err != nil {
		return nil, err
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// MarshalJSONFile encodes the plan as indented JSON.
func (p *Plan) MarshalJSONFile() ([]byte, error) {
	b, err := json.MarshalIndent(p, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// decoder turns nodes into plan values, recording errors.
type decoder struct {
	*errList
	keyLine int // line of the key whose value is being decoded
	entries int // list items seen so far (MaxPlanEntries)
}

// fields iterates a mapping node's key/value pairs, reporting unknown and
// repeated keys. It returns false (after an error) when n is not a mapping.
func (d *decoder) fields(n *yaml.Node, field string, known map[string]bool, fn func(key string, v *yaml.Node, path string)) bool {
	if !d.kind(n, field, yaml.MappingNode, "a mapping") {
		return false
	}
	seen := map[string]int{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.Kind != yaml.ScalarNode {
			d.add(k.Line, field, "keys must be plain names")
			continue
		}
		key := k.Value
		p := key
		if field != "" {
			p = field + "." + key
		}
		if !known[key] {
			d.add(k.Line, p, "unknown field %q (known: %s)", key, knownList(known))
			continue
		}
		if first, dup := seen[key]; dup {
			d.addAt(k.Line, p, "given twice (first at line %d)", first)
			continue
		}
		seen[key] = k.Line
		d.keyLine = k.Line
		if d.lines != nil {
			d.lines[p] = k.Line
		}
		if v.Kind == yaml.AliasNode {
			d.add(v.Line, p, "YAML aliases are not supported in plans")
			continue
		}
		fn(key, v, p)
	}
	return true
}

func knownList(known map[string]bool) string {
	keys := make([]string, 0, len(known))
	for k := range known {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return strings.Join(keys, ", ")
}

func (d *decoder) kind(n *yaml.Node, field string, k yaml.Kind, what string) bool {
	if n.Kind == yaml.AliasNode {
		d.add(n.Line, field, "YAML aliases are not supported in plans")
		return false
	}
	if n.Kind != k {
		d.add(n.Line, field, "expected %s, found %s", what, nodeDesc(n))
		return false
	}
	return true
}

func nodeDesc(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		if n.Tag == "!!null" {
			return "nothing (null)"
		}
		return fmt.Sprintf("%q", n.Value)
	}
	return "something else"
}

func (d *decoder) str(n *yaml.Node, field string) string {
	if !d.kind(n, field, yaml.ScalarNode, "a string") {
		return ""
	}
	if n.Tag == "!!null" {
		return ""
	}
	return n.Value
}

// int reads a decimal integer in [lo, hi].
func (d *decoder) integer(n *yaml.Node, field string, lo, hi int64) (int, bool) {
	if !d.kind(n, field, yaml.ScalarNode, "an integer") {
		return 0, false
	}
	v, err := strconv.ParseInt(n.Value, 10, 64)
	if err != nil {
		d.add(n.Line, field, "%q is not an integer", n.Value)
		return 0, false
	}
	if v < lo {
		if lo == 0 {
			d.add(n.Line, field, "%d is negative", v)
		} else {
			d.add(n.Line, field, "%d is below the minimum %d", v, lo)
		}
		return 0, false
	}
	if v > hi {
		d.add(n.Line, field, "%d exceeds the maximum %d", v, hi)
		return 0, false
	}
	return int(v), true
}

func (d *decoder) uint32p(n *yaml.Node, field string) *uint32 {
	v, ok := d.integer(n, field, 0, 1<<32-1)
	if !ok {
		return nil
	}
	u := uint32(v)
	return &u
}

func (d *decoder) boolp(n *yaml.Node, field string) *bool {
	if !d.kind(n, field, yaml.ScalarNode, "true or false") {
		return nil
	}
	switch n.Value {
	case "true":
		return ptr(true)
	case "false":
		return ptr(false)
	}
	d.add(n.Line, field, "%q is not true or false", n.Value)
	return nil
}

// cpus reads a cpulist ("0-3,8"), or a list of CPU numbers ([0, 2]).
func (d *decoder) cpus(n *yaml.Node, field string) (cpuset.Set, bool) {
	var text string
	switch n.Kind {
	case yaml.ScalarNode:
		if n.Tag == "!!null" {
			d.add(n.Line, field, "expected a cpulist such as \"0-3,8\", found nothing")
			return cpuset.Set{}, false
		}
		text = n.Value
	case yaml.SequenceNode:
		parts := make([]string, 0, len(n.Content))
		for _, c := range n.Content {
			if c.Kind != yaml.ScalarNode {
				d.add(c.Line, field, "expected CPU numbers, found %s", nodeDesc(c))
				return cpuset.Set{}, false
			}
			parts = append(parts, c.Value)
		}
		text = strings.Join(parts, ",")
	default:
		d.kind(n, field, yaml.ScalarNode, "a cpulist such as \"0-3,8\"")
		return cpuset.Set{}, false
	}
	if len(text) > setting.MaxCPUListLen {
		d.add(n.Line, field, "CPU list of %d bytes is longer than the %d any real host needs", len(text), setting.MaxCPUListLen)
		return cpuset.Set{}, false
	}
	// A hex mask is accepted with an explicit 0x prefix ("0xff" = 0-7), as
	// seed scripts write them; a bare "10" is always the cpulist CPU 10.
	if t := strings.TrimSpace(text); strings.HasPrefix(t, "0x") || strings.HasPrefix(t, "0X") {
		s, err := cpuset.ParseMask(t)
		if err != nil {
			d.add(n.Line, field, "bad CPU mask: %v", err)
			return cpuset.Set{}, false
		}
		return s, true
	}
	s, err := cpuset.Parse(text)
	if err != nil {
		d.add(n.Line, field, "bad cpulist: %v", err)
		return cpuset.Set{}, false
	}
	return s, true
}

func (d *decoder) seq(n *yaml.Node, field string, fn func(i int, item *yaml.Node, path string)) {
	if !d.kind(n, field, yaml.SequenceNode, "a list") {
		return
	}
	if d.entries += len(n.Content); d.entries > MaxPlanEntries {
		d.add(n.Line, field, "%d list entries in all, over the limit of %d (real plans have a few thousand)", d.entries, MaxPlanEntries)
		return
	}
	for i, item := range n.Content {
		fn(i, item, fmt.Sprintf("%s[%d]", field, i))
	}
}

func set(keys ...string) map[string]bool {
	m := make(map[string]bool, len(keys))
	for _, k := range keys {
		m[k] = true
	}
	return m
}

var (
	topFields = set("version", "policy", "host", "why", "notes", "app_cpus", "irqs", "rx_queues",
		"tx_queues", "rps_sock_flow_entries", "apps", "irqbalance", "coalesce", "napi", "busy_poll")
	irqFields      = set("irq", "device", "queue", "action", "cpus", "reason")
	rxFields       = set("device", "queue", "rps_cpus", "rps_flow_cnt", "reason")
	txFields       = set("device", "queue", "xps_cpus", "reason")
	sockFields     = set("value", "reason")
	appFields      = set("pid", "comm", "unit", "cgroup", "all", "cpus", "reason")
	balanceFields  = set("mode", "banned_cpus", "reason")
	coalesceFields = set("device", "rx_usecs", "rx_frames", "tx_usecs", "tx_frames", "adaptive_rx", "adaptive_tx", "reason")
)

// Kernel limits (net/core/sysctl_net_core.c, net/core/net-sysfs.c): counts
// above 2^29 are refused with EINVAL.
// maxFlowCount and maxSockFlowEntries bound the flow tables (see
// setting.MaxFlowCnt): a value the kernel accepts but that would cost
// gigabytes of kernel memory is a plan error, not a setting.
const (
	maxFlowCount       = setting.MaxFlowCnt
	maxSockFlowEntries = setting.MaxSockFlowEntries
)

func (d *decoder) plan(n *yaml.Node) *Plan {
	p := &Plan{}
	versionLine := 0
	ok := d.fields(n, "", topFields, func(key string, v *yaml.Node, f string) {
		switch key {
		case "version":
			versionLine = v.Line
			if x, ok := d.integer(v, f, 0, 1<<31); ok {
				p.Version = x
				if x != Version {
					d.add(v.Line, f, "unsupported plan version %d (this irqpilot reads version %d)", x, Version)
				}
			}
		case "policy":
			p.Policy = d.str(v, f)
		case "host":
			p.Host = d.str(v, f)
		case "why":
			p.Why = d.str(v, f)
		case "notes":
			d.seq(v, f, func(_ int, item *yaml.Node, f string) { p.Notes = append(p.Notes, d.str(item, f)) })
		case "app_cpus":
			if s, ok := d.cpus(v, f); ok {
				p.AppCPUs = &s
			}
		case "irqs":
			d.seq(v, f, func(_ int, item *yaml.Node, f string) { p.IRQs = append(p.IRQs, d.irq(item, f)) })
		case "rx_queues":
			d.seq(v, f, func(_ int, item *yaml.Node, f string) { p.RxQueues = append(p.RxQueues, d.rx(item, f)) })
		case "tx_queues":
			d.seq(v, f, func(_ int, item *yaml.Node, f string) { p.TxQueues = append(p.TxQueues, d.tx(item, f)) })
		case "rps_sock_flow_entries":
			e := &SockFlowEntry{Line: d.keyLine}
			d.fields(v, f, sockFields, func(key string, v *yaml.Node, f string) {
				switch key {
				case "value":
					e.Value, _ = d.integer(v, f, 0, maxSockFlowEntries)
				case "reason":
					e.Reason = d.str(v, f)
				}
			})
			p.RPSSockFlowEntries = e
		case "apps":
			d.seq(v, f, func(_ int, item *yaml.Node, f string) { p.Apps = append(p.Apps, d.app(item, f)) })
		case "irqbalance":
			e := &IrqbalanceEntry{Line: d.keyLine}
			d.fields(v, f, balanceFields, func(key string, v *yaml.Node, f string) {
				switch key {
				case "mode":
					e.Mode = IrqbalanceMode(d.str(v, f))
				case "banned_cpus":
					if s, ok := d.cpus(v, f); ok {
						e.BannedCPUs = &s
					}
				case "reason":
					e.Reason = d.str(v, f)
				}
			})
			p.Irqbalance = e
		case "coalesce":
			d.seq(v, f, func(_ int, item *yaml.Node, f string) { p.Coalesce = append(p.Coalesce, d.coalesce(item, f)) })
		case "napi":
			d.seq(v, f, func(_ int, item *yaml.Node, f string) { p.NAPI = append(p.NAPI, d.napi(item, f)) })
		case "busy_poll":
			p.BusyPoll = d.busyPoll(v, f)
		}
	})
	if ok && versionLine == 0 && len(d.errs) == 0 {
		d.add(n.Line, "version", "missing (this irqpilot reads version %d)", Version)
	}
	return p
}

func (d *decoder) irq(n *yaml.Node, field string) IRQEntry {
	e := IRQEntry{Line: n.Line}
	d.fields(n, field, irqFields, func(key string, v *yaml.Node, f string) {
		switch key {
		case "irq":
			if x, ok := d.integer(v, f, 0, 1<<31-1); ok {
				e.IRQ = &x
			}
		case "device":
			e.Device = d.str(v, f)
		case "queue":
			if x, ok := d.integer(v, f, 0, 1<<20); ok {
				e.Queue = &x
			}
		case "action":
			e.Action = d.str(v, f)
		case "cpus":
			e.CPUs, _ = d.cpus(v, f)
		case "reason":
			e.Reason = d.str(v, f)
		}
	})
	return e
}

func (d *decoder) rx(n *yaml.Node, field string) RxQueueEntry {
	e := RxQueueEntry{Line: n.Line}
	d.fields(n, field, rxFields, func(key string, v *yaml.Node, f string) {
		switch key {
		case "device":
			e.Device = d.str(v, f)
		case "queue":
			if x, ok := d.integer(v, f, 0, 1<<20); ok {
				e.Queue = &x
			}
		case "rps_cpus":
			if s, ok := d.cpusAllowEmpty(v, f); ok {
				e.RPSCPUs = &s
			}
		case "rps_flow_cnt":
			if x, ok := d.integer(v, f, 0, maxFlowCount); ok {
				e.RPSFlowCnt = &x
			}
		case "reason":
			e.Reason = d.str(v, f)
		}
	})
	return e
}

// cpusAllowEmpty is cpus where an empty string or null means the empty set
// (steering off).
func (d *decoder) cpusAllowEmpty(n *yaml.Node, field string) (cpuset.Set, bool) {
	if n.Kind == yaml.ScalarNode && (n.Tag == "!!null" || n.Value == "") {
		return cpuset.Set{}, true
	}
	return d.cpus(n, field)
}

func (d *decoder) tx(n *yaml.Node, field string) TxQueueEntry {
	e := TxQueueEntry{Line: n.Line}
	hasXPS := false
	d.fields(n, field, txFields, func(key string, v *yaml.Node, f string) {
		switch key {
		case "device":
			e.Device = d.str(v, f)
		case "queue":
			if x, ok := d.integer(v, f, 0, 1<<20); ok {
				e.Queue = &x
			}
		case "xps_cpus":
			hasXPS = true
			e.XPSCPUs, _ = d.cpusAllowEmpty(v, f)
		case "reason":
			e.Reason = d.str(v, f)
		}
	})
	if n.Kind == yaml.MappingNode && !hasXPS {
		d.add(n.Line, field+".xps_cpus", "missing (a tx queue entry sets xps_cpus; \"\" turns XPS off)")
	}
	return e
}

func (d *decoder) app(n *yaml.Node, field string) AppEntry {
	e := AppEntry{Line: n.Line}
	d.fields(n, field, appFields, func(key string, v *yaml.Node, f string) {
		switch key {
		case "pid":
			e.PID, _ = d.integer(v, f, 1, 1<<22)
		case "comm":
			e.Comm = d.str(v, f)
		case "unit":
			e.Unit = d.str(v, f)
		case "cgroup":
			e.Cgroup = d.str(v, f)
		case "all":
			if b := d.boolp(v, f); b != nil {
				e.All = *b
			}
		case "cpus":
			e.CPUs, _ = d.cpus(v, f)
		case "reason":
			e.Reason = d.str(v, f)
		}
	})
	return e
}

func (d *decoder) coalesce(n *yaml.Node, field string) CoalesceEntry {
	e := CoalesceEntry{Line: n.Line}
	d.fields(n, field, coalesceFields, func(key string, v *yaml.Node, f string) {
		switch key {
		case "device":
			e.Device = d.str(v, f)
		case "rx_usecs":
			e.RxUsecs = d.uint32p(v, f)
		case "rx_frames":
			e.RxFrames = d.uint32p(v, f)
		case "tx_usecs":
			e.TxUsecs = d.uint32p(v, f)
		case "tx_frames":
			e.TxFrames = d.uint32p(v, f)
		case "adaptive_rx":
			e.AdaptiveRx = d.boolp(v, f)
		case "adaptive_tx":
			e.AdaptiveTx = d.boolp(v, f)
		case "reason":
			e.Reason = d.str(v, f)
		}
	})
	return e
}

// Check validates a plan built in Go (a policy's output, a plan edited in
// code) with the same static rules Load applies: one selector per entry,
// reasons, valid counts, no duplicates.
func Check(p *Plan) error {
	l := &errList{file: p.File, lines: p.fieldLines}
	check(p, l)
	return l.err()
}

// check applies the static rules that need no host.
func check(p *Plan, l *errList) {
	if p.Version != Version {
		l.add(0, "version", "unsupported plan version %d (this irqpilot reads version %d)", p.Version, Version)
	}
	reason := func(line int, field, r string) {
		switch {
		case strings.TrimSpace(r) == "":
			l.add(line, field+".reason", "missing (every entry says why, in one line)")
		case strings.ContainsAny(r, "\n\r"):
			l.add(line, field+".reason", "must be one line")
		}
	}

	// IRQ entries: one selector, non-empty CPUs, no two entries for the same selector.
	seenIRQ := map[string]int{}
	for i, e := range p.IRQs {
		f := fmt.Sprintf("irqs[%d]", i)
		reason(e.Line, f, e.Reason)
		n := 0
		var key string
		if e.IRQ != nil {
			n++
			key = "irq " + itoa(*e.IRQ)
		}
		if e.Device != "" || e.Queue != nil {
			n++
			switch {
			case e.Device == "":
				l.add(e.Line, f+".device", "missing (queue selects a device's queue: give device too)")
			case e.Queue == nil:
				l.add(e.Line, f+".queue", "missing (device selects by queue: give queue too, or use action: \"%s*\")", e.Device)
			default:
				key = fmt.Sprintf("device %s queue %d", e.Device, *e.Queue)
			}
		}
		if e.Action != "" {
			n++
			key = "action " + e.Action
			if _, err := path.Match(e.Action, ""); err != nil {
				l.add(e.Line, f+".action", "bad pattern %q: %v", e.Action, err)
			}
		}
		switch {
		case n == 0:
			l.add(e.Line, f, "no selector (give one of irq, device+queue, action)")
		case n > 1:
			l.add(e.Line, f, "more than one selector (give only one of irq, device+queue, action)")
		}
		if e.CPUs.IsEmpty() {
			l.add(e.Line, f+".cpus", "missing or empty (an IRQ needs at least one CPU)")
		}
		if n == 1 && key != "" {
			if first, dup := seenIRQ[key]; dup {
				l.add(e.Line, f, "duplicate: %s is already set by the entry at %s", key, where(first))
			} else {
				seenIRQ[key] = e.Line
			}
		}
	}

	type qkey struct {
		dev   string
		queue int // -1: all queues
	}
	qname := func(dir string, k qkey) string {
		if k.queue < 0 {
			return fmt.Sprintf("every %s queue of %s", dir, k.dev)
		}
		return fmt.Sprintf("%s %s-%d", k.dev, dir, k.queue)
	}

	// Duplicates are found by map, in time linear in the entries: an entry
	// for every queue of a device (queue: -1 here) overlaps each entry for
	// one of its queues. The error names the earliest entry it overlaps.
	type qset struct {
		all   int         // index+1 of the first every-queue entry; 0: none
		any   int         // index+1 of the first entry of any queue
		queue map[int]int // queue → index+1 of its first entry
	}
	type qattr map[string]*qset // device → entries setting one attribute
	earliest := func(ids ...int) int {
		m := 0
		for _, id := range ids {
			if id > 0 && (m == 0 || id < m) {
				m = id
			}
		}
		return m
	}
	// seen returns the earliest entry that k overlaps (index+1, 0: none)
	// and records entry id for k.
	seen := func(a qattr, k qkey, id int) int {
		q := a[k.dev]
		if q == nil {
			q = &qset{queue: map[int]int{}}
			a[k.dev] = q
		}
		var hit int
		if k.queue < 0 {
			hit = q.any
		} else {
			hit = earliest(q.all, q.queue[k.queue])
		}
		if q.any == 0 {
			q.any = id
		}
		if k.queue < 0 {
			if q.all == 0 {
				q.all = id
			}
		} else if q.queue[k.queue] == 0 {
			q.queue[k.queue] = id
		}
		return hit
	}

	rxCPUs, rxCnt := qattr{}, qattr{}
	for i, e := range p.RxQueues {
		f := fmt.Sprintf("rx_queues[%d]", i)
		reason(e.Line, f, e.Reason)
		if e.Device == "" {
			l.add(e.Line, f+".device", "missing")
			continue
		}
		if e.RPSCPUs == nil && e.RPSFlowCnt == nil {
			l.add(e.Line, f, "nothing to set (give rps_cpus and/or rps_flow_cnt)")
		}
		if e.RPSFlowCnt != nil && !powerOfTwoOrZero(*e.RPSFlowCnt) {
			l.add(e.Line, f+".rps_flow_cnt", "%d is not a power of two (the kernel rounds it up to %d and reports that; write %d)",
				*e.RPSFlowCnt, ceilPow2(*e.RPSFlowCnt), ceilPow2(*e.RPSFlowCnt))
		}
		k := qkey{e.Device, -1}
		if e.Queue != nil {
			k.queue = *e.Queue
		}
		var hits []int
		if e.RPSCPUs != nil {
			hits = append(hits, seen(rxCPUs, k, i+1))
		}
		if e.RPSFlowCnt != nil {
			hits = append(hits, seen(rxCnt, k, i+1))
		}
		if o := earliest(hits...); o > 0 {
			l.add(e.Line, f, "duplicate: %s is already set by the entry at %s", qname("rx", k), where(p.RxQueues[o-1].Line))
		}
	}

	txCPUs := qattr{}
	for i, e := range p.TxQueues {
		f := fmt.Sprintf("tx_queues[%d]", i)
		reason(e.Line, f, e.Reason)
		if e.Device == "" {
			l.add(e.Line, f+".device", "missing")
			continue
		}
		k := qkey{e.Device, -1}
		if e.Queue != nil {
			k.queue = *e.Queue
		}
		if o := seen(txCPUs, k, i+1); o > 0 {
			l.add(e.Line, f, "duplicate: %s is already set by the entry at %s", qname("tx", k), where(p.TxQueues[o-1].Line))
		}
	}

	if e := p.RPSSockFlowEntries; e != nil {
		reason(e.Line, "rps_sock_flow_entries", e.Reason)
		if e.Value < 0 || e.Value > maxSockFlowEntries {
			l.add(e.Line, "rps_sock_flow_entries.value", "%d is outside 0..%d", e.Value, maxSockFlowEntries)
		} else if !powerOfTwoOrZero(e.Value) {
			l.add(e.Line, "rps_sock_flow_entries.value", "%d is not a power of two (the kernel rounds it up to %d and reports that; write %d)",
				e.Value, ceilPow2(e.Value), ceilPow2(e.Value))
		}
	}

	seenApp := map[string]int{}
	for i, e := range p.Apps {
		f := fmt.Sprintf("apps[%d]", i)
		reason(e.Line, f, e.Reason)
		n := 0
		for _, set := range []bool{e.PID != 0, e.Comm != "", e.Unit != "", e.Cgroup != ""} {
			if set {
				n++
			}
		}
		switch {
		case n == 0:
			l.add(e.Line, f, "no selector (give one of pid, comm, unit, cgroup)")
		case n > 1:
			l.add(e.Line, f, "more than one selector (give only one of pid, comm, unit, cgroup)")
		default:
			if e.PID < 0 {
				l.add(e.Line, f+".pid", "%d is negative", e.PID)
			}
			k := e.Selector()
			if first, dup := seenApp[k]; dup {
				l.add(e.Line, f, "duplicate: %s is already placed by the entry at %s", k, where(first))
			} else {
				seenApp[k] = e.Line
			}
		}
		if e.CPUs.IsEmpty() {
			l.add(e.Line, f+".cpus", "missing or empty")
		}
	}

	if e := p.Irqbalance; e != nil {
		reason(e.Line, "irqbalance", e.Reason)
		switch e.Mode {
		case IrqbalanceLeave, IrqbalanceStop:
			if e.BannedCPUs != nil {
				l.add(e.Line, "irqbalance.banned_cpus", "only meaningful with mode: ban")
			}
		case IrqbalanceBan:
			if e.BannedCPUs == nil || e.BannedCPUs.IsEmpty() {
				l.add(e.Line, "irqbalance.banned_cpus", "missing (mode ban needs the CPUs to keep IRQs off)")
			}
		case "":
			l.add(e.Line, "irqbalance.mode", "missing (one of leave, ban, stop)")
		default:
			l.add(e.Line, "irqbalance.mode", "%q is not one of leave, ban, stop", e.Mode)
		}
	}

	seenCo := map[string]int{}
	for i, e := range p.Coalesce {
		f := fmt.Sprintf("coalesce[%d]", i)
		reason(e.Line, f, e.Reason)
		if e.Device == "" {
			l.add(e.Line, f+".device", "missing")
			continue
		}
		if e.RxUsecs == nil && e.RxFrames == nil && e.TxUsecs == nil && e.TxFrames == nil && e.AdaptiveRx == nil && e.AdaptiveTx == nil {
			l.add(e.Line, f, "nothing to set (give rx_usecs, rx_frames, tx_usecs, tx_frames, adaptive_rx or adaptive_tx)")
		}
		if first, dup := seenCo[e.Device]; dup {
			l.add(e.Line, f, "duplicate: coalescing of %s is already set by the entry at %s", e.Device, where(first))
		} else {
			seenCo[e.Device] = e.Line
		}
	}
	checkNAPI(p, l, reason)
}

func where(line int) string {
	if line <= 0 {
		return "an earlier entry"
	}
	return "line " + itoa(line)
}

func powerOfTwoOrZero(n int) bool { return n >= 0 && n&(n-1) == 0 }

func ceilPow2(n int) int {
	p := 1
	for p < n {
		p <<= 1
	}
	return p
}
