package plan

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"

	"gopkg.in/yaml.v3"

	"github.com/irqpilot/irqpilot/internal/cpuset"
	"github.com/irqpilot/irqpilot/internal/setting"
)

// Parse decodes and checks a plan. name is used in error messages. JSON is
// read by the same parser (JSON is YAML), so errors in both carry line
// numbers.
//
// We walk the yaml.Node tree ourselves instead of yaml.Decoder.KnownFields
// so that every error names the line and the full field path
// ("irqs[2].cpus"), all problems are reported at once, duplicate keys are
// caught (yaml.v3 does not check them when building nodes), and hostile input
// (aliases, wrong node kinds) can never panic or expand. The walk is driven
// by the plan types' struct tags (see entry), so a field is named once.
func Parse(name string, data []byte) (*Plan, error) {
	l := &errList{file: name, lines: map[string]int{}}
	root := document(l, data)
	if root == nil {
		return nil, l.err()
	}
	d := &decoder{errList: l}
	p := &Plan{}
	given, ok := d.entry(root, "", reflect.ValueOf(p).Elem(), 0)
	if ok && !given["version"] && len(d.errs) == 0 {
		d.add(root.Line, "version", "missing (this irqpilot reads version %d)", Version)
	}
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

// document is the one YAML document of data, or nil after recording why
// there is none (too big, too many nodes, malformed, empty, several).
func document(l *errList, data []byte) *yaml.Node {
	fail := func(line int, format string, args ...any) *yaml.Node {
		l.add(line, "", format, args...)
		return nil
	}
	if len(data) > MaxPlanBytes {
		return fail(0, "%d bytes, over the limit of %d (real plans are a few hundred KB)", len(data), MaxPlanBytes)
	}
	if n := separators(data); n > maxPlanSeparators {
		return fail(0, "%d list items, keys or lines, over the limit of %d (real plans have about 10 per entry and a few thousand entries)", n, maxPlanSeparators)
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); errors.Is(err, io.EOF) {
		return fail(0, "empty plan (expected a mapping with version: %d)", Version)
	} else if err != nil {
		return fail(syntaxErrLine(data, err), "malformed YAML/JSON: %s", yamlErrMsg(err))
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); err == nil {
		return fail(extra.Line, "more than one YAML document; a plan is one document")
	} else if !errors.Is(err, io.EOF) {
		return fail(yamlErrLine(err), "malformed YAML/JSON: %s", yamlErrMsg(err))
	}
	if doc.Kind != yaml.DocumentNode {
		return &doc
	}
	if len(doc.Content) == 0 {
		return fail(doc.Line, "empty plan (expected a mapping with version: %d)", Version)
	}
	return doc.Content[0]
}

// decoder turns nodes into plan values, recording errors.
type decoder struct {
	*errList
	keyLine int // line of the key whose value is being decoded
	entries int // list items seen so far (MaxPlanEntries)
}

// The walk is driven by the plan types. A field's yaml tag is its key; its
// Go type says how its value is read (string, integer, true or false, CPU
// set, list, entry); a plan tag adds what the type cannot say:
//
//	plan:"queue"     the integer is in the range named queue (intRanges)
//	plan:"empty"     a CPU set where "" or null is the empty set (steering off)
//	plan:"required"  the key must be given; the entry's missing method says why
//
// An entry's Line field is the line of its list item, or of its key for an
// entry that is not in a list (irqbalance, busy_poll, rps_sock_flow_entries).

// intRange bounds an integer field; check, when set, refuses a value in
// range (the plan version).
type intRange struct {
	lo, hi int64
	check  func(v int64) string
}

// intRanges are the integer ranges plan tags name. Kernel limits
// (net/core/sysctl_net_core.c, net/core/net-sysfs.c) refuse counts above
// 2^29 with EINVAL; the setting package's caps are lower where a value the
// kernel accepts would cost gigabytes of kernel memory.
var intRanges = map[string]intRange{
	"version": {0, 1 << 31, func(v int64) string {
		if v != Version {
			return fmt.Sprintf("unsupported plan version %d (this irqpilot reads version %d)", v, Version)
		}
		return ""
	}},
	"irq":       {0, 1<<31 - 1, nil},
	"queue":     {0, 1 << 20, nil},
	"pid":       {1, 1 << 22, nil},
	"flows":     {0, maxFlowCount, nil},
	"sockflows": {0, maxSockFlowEntries, nil},
	"napi-id":   {1, 1<<32 - 1, nil},
	"defer":     {0, setting.MaxDeferHardIRQs, nil},
	"ns":        {0, setting.MaxNAPITimeoutNs, nil},
	"usecs":     {0, setting.MaxBusyPollUsecs, nil},
	"ms":        {0, 1<<31 - 1, nil},
	"cpu":       {0, 1 << 20, nil},
	"":          {0, 1<<32 - 1, nil}, // a uint32 without a plan tag (any other integer needs one)
}

// field is one key of an entry type.
type field struct {
	index           int
	rng             string
	empty, required bool
}

// entryType is what the walk knows of one entry type, from its tags.
type entryType struct {
	known    map[string]bool
	fields   map[string]field
	required []string
	line     int // index of the Line field; -1: none
}

var entryTypes sync.Map // reflect.Type → *entryType

func entryTypeOf(t reflect.Type) *entryType {
	if et, ok := entryTypes.Load(t); ok {
		return et.(*entryType)
	}
	et := &entryType{known: map[string]bool{}, fields: map[string]field{}, line: -1}
	for i := range t.NumField() {
		sf := t.Field(i)
		key, _, _ := strings.Cut(sf.Tag.Get("yaml"), ",")
		switch {
		case sf.Name == "Line":
			et.line = i
			continue
		case key == "-" || key == "" || !sf.IsExported():
			continue
		}
		f := field{index: i}
		for _, opt := range strings.Split(sf.Tag.Get("plan"), ",") {
			switch opt {
			case "":
			case "empty":
				f.empty = true
			case "required":
				f.required = true
				et.required = append(et.required, key)
			default:
				if _, ok := intRanges[opt]; !ok {
					panic("plan: unknown plan tag " + opt + " on " + t.Name() + "." + sf.Name)
				}
				f.rng = opt
			}
		}
		if k := deref(sf.Type).Kind(); f.rng == "" && (k == reflect.Int || k == reflect.Uint64) {
			panic("plan: " + t.Name() + "." + sf.Name + " needs a plan tag naming its range")
		}
		et.known[key] = true
		et.fields[key] = f
	}
	entryTypes.Store(t, et)
	return et
}

// entry decodes the mapping n into the struct v, key by key, and returns
// the keys given; false when n is not a mapping.
func (d *decoder) entry(n *yaml.Node, path string, v reflect.Value, line int) (map[string]bool, bool) {
	et := entryTypeOf(v.Type())
	if et.line >= 0 {
		v.Field(et.line).SetInt(int64(line))
	}
	given := map[string]bool{}
	ok := d.fields(n, path, et.known, func(key string, val *yaml.Node, p string) {
		given[key] = true
		f := et.fields[key]
		d.value(val, p, v.Field(f.index), f, d.keyLine)
	})
	if ok {
		for _, key := range et.required {
			if !given[key] {
				why := v.Addr().Interface().(interface{ missing(key string) string }).missing(key)
				d.add(n.Line, join(path, key), "%s", why)
			}
		}
	}
	return given, ok
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

var setType = reflect.TypeOf(cpuset.Set{})

func deref(t reflect.Type) reflect.Type {
	if t.Kind() == reflect.Pointer {
		return t.Elem()
	}
	return t
}

// value decodes n into v by v's type. line is the line an entry decoded
// here starts on.
func (d *decoder) value(n *yaml.Node, path string, v reflect.Value, f field, line int) {
	t := v.Type()
	switch {
	case t == setType:
		s, _ := d.cpuSet(n, path, f.empty)
		v.Set(reflect.ValueOf(s))
	case t.Kind() == reflect.Pointer && t.Elem() == setType:
		if s, ok := d.cpuSet(n, path, f.empty); ok {
			v.Set(reflect.ValueOf(&s))
		}
	case t.Kind() == reflect.Pointer && t.Elem().Kind() == reflect.Struct:
		e := reflect.New(t.Elem())
		d.entry(n, path, e.Elem(), line)
		v.Set(e)
	case t.Kind() == reflect.Slice:
		d.seq(n, path, func(_ int, item *yaml.Node, p string) {
			e := reflect.New(t.Elem()).Elem()
			d.value(item, p, e, field{}, item.Line)
			v.Set(reflect.Append(v, e))
		})
	case t.Kind() == reflect.Struct:
		d.entry(n, path, v, line)
	default:
		d.scalar(n, path, v, f.rng)
	}
}

// scalar decodes a string, a true or false, or an integer in the range rng
// names into v (or, when v is a pointer, into a new value v points to).
func (d *decoder) scalar(n *yaml.Node, path string, v reflect.Value, rng string) {
	t := deref(v.Type())
	var x reflect.Value
	switch t.Kind() {
	case reflect.String:
		x = reflect.ValueOf(d.str(n, path)).Convert(t)
	case reflect.Bool:
		b := d.boolp(n, path)
		if b == nil {
			return
		}
		x = reflect.ValueOf(*b)
	case reflect.Int, reflect.Uint32, reflect.Uint64:
		r := intRanges[rng]
		i, ok := d.integer(n, path, r.lo, r.hi)
		if !ok {
			return
		}
		if r.check != nil {
			if why := r.check(int64(i)); why != "" {
				d.add(n.Line, path, "%s", why)
			}
		}
		x = reflect.ValueOf(i).Convert(t)
	case reflect.Float64:
		f, ok := d.float(n, path)
		if !ok {
			return
		}
		x = reflect.ValueOf(f)
	default:
		panic("plan: no decoder for " + t.String())
	}
	if v.Kind() == reflect.Pointer {
		p := reflect.New(t)
		p.Elem().Set(x)
		x = p
	}
	v.Set(x)
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
	return strings.Join(slices.Sorted(maps.Keys(known)), ", ")
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

// integer reads a decimal integer in [lo, hi].
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

// float decodes a finite number (a prediction's percentages); the range is
// the entry's check.
func (d *decoder) float(n *yaml.Node, field string) (float64, bool) {
	if !d.kind(n, field, yaml.ScalarNode, "a number") {
		return 0, false
	}
	v, err := strconv.ParseFloat(n.Value, 64)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
		d.add(n.Line, field, "%q is not a number", n.Value)
		return 0, false
	}
	return v, true
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

// cpuSet is cpus, or with empty cpusAllowEmpty.
func (d *decoder) cpuSet(n *yaml.Node, path string, empty bool) (cpuset.Set, bool) {
	if empty {
		return d.cpusAllowEmpty(n, path)
	}
	return d.cpus(n, path)
}

// cpusAllowEmpty is cpus where an empty string or null means the empty set
// (steering off).
func (d *decoder) cpusAllowEmpty(n *yaml.Node, field string) (cpuset.Set, bool) {
	if n.Kind == yaml.ScalarNode && (n.Tag == "!!null" || n.Value == "") {
		return cpuset.Set{}, true
	}
	return d.cpus(n, field)
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

// versionLine is a version key at the start of a line, in YAML or JSON.
var versionLine = regexp.MustCompile(`(?m)^\s*[{,]?\s*["']?version["']?\s*:`)

// LooksLikePlan reports whether data is meant as a plan: a mapping with a
// version key at its top, or, when it is not even YAML, a line that begins
// with one. A file that does not (a password file behind a link, a key)
// is refused by its caller without quoting it: Parse's errors quote the
// values they refuse.
func LooksLikePlan(data []byte) bool {
	if len(data) > MaxPlanBytes || separators(data) > maxPlanSeparators {
		return versionLine.Match(data) // over Parse's limits: not decoded
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return versionLine.Match(data)
	}
	root := &doc
	if root.Kind == yaml.DocumentNode && len(root.Content) > 0 {
		root = root.Content[0]
	}
	if root.Kind != yaml.MappingNode {
		return false
	}
	for i := 0; i+1 < len(root.Content); i += 2 {
		if root.Content[i].Value == "version" {
			return true
		}
	}
	return false
}
