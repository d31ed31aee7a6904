package plan

import (
	"errors"
	"testing"
)

// An error on line 2 is reported on line 2: a key given again, and a YAML
// syntax error that yaml.v3 reports at the line its enclosing mapping
// began.
func TestParseErrorLine(t *testing.T) {
	for _, c := range []struct {
		doc  string
		line int
	}{
		{"version: 1\nversion: 1\n", 2},
		{"version: 1\n: x\n", 2},
		{"version: 1\n- x\n", 2},
		{"version: 1\nirqs: {a: 1\n", 2},
		{"version: 1\nbogus: 3\n", 2},
		{"version: 1\nirqs:\n- irq: 1\n cpus: 2\n", 4},
		{"version: 1\nrx_queues:\n  - device: va0\n    rps_cpus: \"zz\"\n    reason: x\n", 4},
	} {
		_, err := Parse("p.yaml", []byte(c.doc))
		var el Errors
		if !errors.As(err, &el) || len(el) == 0 {
			t.Errorf("%q: error %v, want plan Errors", c.doc, err)
			continue
		}
		if el[0].Line != c.line {
			t.Errorf("%q: %v: line %d, want %d", c.doc, err, el[0].Line, c.line)
		}
	}
}
