package plantest

import "github.com/google/go-cmp/cmp"

// IgnoreWhere compares plans by content: where an entry was read from (an
// entry's Line, the plan's File, the lines of its fields) is not part of
// it. By field name, so that this package need not import plan (whose own
// tests use it).
var IgnoreWhere = cmp.FilterPath(func(p cmp.Path) bool {
	sf, ok := p.Last().(cmp.StructField)
	if !ok {
		return false
	}
	switch sf.Name() {
	case "Line", "File", "fieldLines":
		return true
	}
	return false
}, cmp.Ignore())
