package plan

import (
	"maps"
	"reflect"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/irqpilot/irqpilot/internal/cpuset"
)

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
