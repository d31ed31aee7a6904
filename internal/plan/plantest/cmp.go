package plantest

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

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

// File is what RoundTrip needs of a plan: package plan's writers.
type File interface {
	MarshalFile() ([]byte, error)
	MarshalJSONFile() ([]byte, error)
}

// RoundTrip writes p as YAML and as JSON, reads each back with parse
// (plan.Parse) and fails the test unless both read back p (IgnoreWhere).
// It returns the plan read from the YAML.
func RoundTrip[P File](t testing.TB, what string, p P, parse func(file string, data []byte) (P, error)) P {
	t.Helper()
	var fromYAML P
	for _, f := range []struct {
		file  string
		write func() ([]byte, error)
	}{{"p.json", p.MarshalJSONFile}, {"p.yaml", p.MarshalFile}} {
		data, err := f.write()
		if err != nil {
			t.Fatalf("%s: write %s: %v", what, f.file, err)
		}
		q, err := parse(f.file, data)
		if err != nil {
			t.Fatalf("%s: read %s back: %v\n%s", what, f.file, err, data)
		}
		if d := cmp.Diff(p, q, IgnoreWhere); d != "" {
			t.Errorf("%s: %s round trip differs (-written +read):\n%s", what, f.file, d)
		}
		fromYAML = q
	}
	return fromYAML
}
