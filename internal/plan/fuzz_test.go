package plan

import (
	"os"
	"strings"
	"testing"
)

// FuzzLoad feeds arbitrary bytes to the loader: it must never panic, and a
// plan it accepts must pass the static checks, survive a YAML round trip
// and resolve against a host without panicking.
func FuzzLoad(f *testing.F) {
	for _, file := range []string{"testdata/full.yaml", "testdata/full.json"} {
		data, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	for _, s := range []string{
		"version: 1\n",
		"version: 1\nirqs:\n  - irq: 3\n    cpus: 0-1\n    reason: r\n",
		"version: 1\nirqs:\n  - &e {irq: 1, cpus: 0, reason: r}\n  - *e\n",
		"version: 1\nrx_queues:\n  - device: eth0\n    rps_cpus: 0xff\n    rps_flow_cnt: 4096\n    reason: r\n",
		"{\"version\": 1, \"apps\": [{\"pid\": 5, \"cpus\": [1, 2], \"reason\": \"r\"}]}",
		"version: 1\nirqbalance: {mode: ban, banned_cpus: 0-3:2, reason: r}\n",
		"a: [[[[[[[[[[]]]]]]]]]]",
		"version: !!binary AAAA\n",
	} {
		f.Add([]byte(s))
	}
	h := fullHost().Build()
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := Parse("fuzz.yaml", data)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "fuzz.yaml") {
				t.Fatalf("error does not name the file: %v", err)
			}
			return
		}
		if err := Check(p); err != nil {
			t.Fatalf("accepted plan fails Check: %v", err)
		}
		out, err := p.MarshalFile()
		if err != nil {
			t.Fatalf("marshal: %v", err)
		}
		if _, err := Parse("again.yaml", out); err != nil {
			t.Fatalf("re-load of marshalled plan: %v\n%s", err, out)
		}
		_, _ = Resolve(p, h)
	})
}
