package plan

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"reflect"
	"regexp"
	"strings"
	"sync"

	"gopkg.in/yaml.v3"

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
