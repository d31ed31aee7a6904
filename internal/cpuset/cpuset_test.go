package cpuset

import (
	"encoding/json"
	"math/rand"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"testing/quick"
)

func TestParse(t *testing.T) {
	tests := []struct {
		in   string
		want []int
	}{
		{"", nil},
		{"  \n", nil},
		{"0", []int{0}},
		{"0-3", []int{0, 1, 2, 3}},
		{"0-3,8,10-11", []int{0, 1, 2, 3, 8, 10, 11}},
		{"0-3,8,10-11\n", []int{0, 1, 2, 3, 8, 10, 11}},
		{"0, 1", []int{0, 1}},             // blk-mq mq/N/cpu_list
		{"0, 2, 4, 6", []int{0, 2, 4, 6}}, // blk-mq with spread queues
		{"3,1,2,1", []int{1, 2, 3}},       // unordered and repeated
		{"5-5", []int{5}},
		{"007", []int{7}},
		{"0-15:2", []int{0, 2, 4, 6, 8, 10, 12, 14}}, // stride
		{"1-9:3", []int{1, 4, 7}},
		{"0-15:2/4", []int{0, 1, 4, 5, 8, 9, 12, 13}}, // kernel used/group pattern
		{"0-9:3/4", []int{0, 1, 2, 4, 5, 6, 8, 9}},    // last group cut by the end
		{"2-7:1/1", []int{2, 3, 4, 5, 6, 7}},
		{"1,2-7,9", []int{1, 2, 3, 4, 5, 6, 7, 9}}, // procfs isolated fixture
		{"1023,1024,8191", []int{1023, 1024, 8191}},
		{"65536", []int{MaxCPU}},
	}
	for _, tc := range tests {
		s, err := Parse(tc.in)
		if err != nil {
			t.Errorf("Parse(%q): %v", tc.in, err)
			continue
		}
		if got := s.CPUs(); !slices.Equal(got, tc.want) && !(len(got) == 0 && tc.want == nil) {
			t.Errorf("Parse(%q) = %v, want %v", tc.in, got, tc.want)
		}
	}
}

func TestParseErrors(t *testing.T) {
	for _, in := range []string{",", "0,", ",0", "0,,1", "-1", "1-", "3-1", "a", "0x3", "+1", "1-+2",
		"1-2-3", "0-15:", "0-15:0", "0-15:a", "0-15:3/2", "0-15:0/2", "0-15:1/0", "0-15:+1",
		"65537", "0-4000000000", "99999999999999999999", "1 2", "0-3:2/4/8"} {
		if s, err := Parse(in); err == nil {
			t.Errorf("Parse(%q) = %v, want an error", in, s)
		} else if !strings.Contains(err.Error(), "cpulist") {
			t.Errorf("Parse(%q) error %q does not name the cpulist", in, err)
		}
	}
}

func TestParseMask(t *testing.T) {
	tests := []struct {
		in   string
		want string // cpulist
	}{
		{"0", ""},
		{"00000000", ""},
		{"1", "0"},
		{"ff", "0-7"},
		{"0xff", "0-7"},
		{"0XfF\n", "0-7"},
		{"3", "0-1"},
		{"00000003", "0-1"},
		{"ffffffff,00000001", "0,32-63"},
		{"80000000,00000000", "63"},
		{"1,00000000,00000000", "64"},
		{"f,ffffffff", "0-35"},
		{"00000000,00000000,00000000,00000000,00000000,00000000,00000000,000000ff", "0-7"}, // 256-CPU kernel rps_cpus
		{"00000000,00000000,00000000,00000000,00000000,00000000,00000000,00000000", ""},
		{"80000000,00000000,00000000,00000000,00000000,00000000,00000000,00000001", "0,255"},
		{"aaaaaaaa", "1,3,5,7,9,11,13,15,17,19,21,23,25,27,29,31"},
	}
	for _, tc := range tests {
		s, err := ParseMask(tc.in)
		if err != nil {
			t.Errorf("ParseMask(%q): %v", tc.in, err)
			continue
		}
		if got := s.String(); got != tc.want {
			t.Errorf("ParseMask(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
	for _, in := range []string{"", "0x", ",", "ff,", ",ff", "g", "123456789", "ff,,ff", "-1", "+f", "f f",
		strings.Repeat("ffffffff,", 3000) + "f"} {
		if s, err := ParseMask(in); err == nil {
			t.Errorf("ParseMask(%.30q) = %v, want an error", in, s)
		}
	}
}

// TestParseMaskFixtures reads the node_exporter rps_cpus/xps_cpus masks of a
// 256-CPU kernel (8 groups of 32 bits).
func TestParseMaskFixtures(t *testing.T) {
	dir := "../../../shared/fixtures/node_exporter/sys/class/net/ens10f0/queues"
	files, err := filepath.Glob(filepath.Join(dir, "*", "*_cpus"))
	if err != nil || len(files) < 16 {
		t.Fatalf("fixture masks: %v (%d files)", err, len(files))
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		raw := strings.TrimSpace(string(b))
		s, err := ParseMask(raw)
		if err != nil {
			t.Errorf("%s: %v", f, err)
			continue
		}
		if got := s.Mask(256); got != raw {
			t.Errorf("%s: %q formats back as %q", f, raw, got)
		}
	}
}

func TestFormat(t *testing.T) {
	s := MustParse("0-3,8,10-11,63,64,100-102")
	if got := s.String(); got != "0-3,8,10-11,63-64,100-102" {
		t.Errorf("String = %q", got)
	}
	if got := Of(0, 1).Mask(64); got != "00000000,00000003" {
		t.Errorf("Mask(64) = %q", got)
	}
	if got := Of(0, 1).Mask(2); got != "00000003" {
		t.Errorf("Mask(2) = %q", got)
	}
	if got := (Set{}).Mask(0); got != "00000000" {
		t.Errorf("empty Mask(0) = %q", got)
	}
	if got := Of(40).Mask(8); got != "00000100,00000000" {
		t.Errorf("Mask narrower than the set = %q", got)
	}
	if got := Range(0, 255).Mask(256); got != strings.TrimSuffix(strings.Repeat("ffffffff,", 8), ",") {
		t.Errorf("Range(0,255).Mask(256) = %q", got)
	}
	if s.Len() != 12 || s.Min() != 0 || s.Max() != 102 || (Set{}).Max() != -1 || (Set{}).Min() != -1 {
		t.Errorf("Len/Min/Max = %d %d %d", s.Len(), s.Min(), s.Max())
	}
	if !s.Contains(64) || s.Contains(65) || s.Contains(-1) || s.Contains(1<<20) {
		t.Error("Contains")
	}
	if !Range(5, 2).IsEmpty() || Range(-3, 1).String() != "0-1" {
		t.Error("Range edge cases")
	}
}

func TestJSON(t *testing.T) {
	type doc struct {
		S Set  `json:"s"`
		P *Set `json:"p"`
	}
	p := MustParse("1,3-4")
	b, err := json.Marshal(doc{S: MustParse("0-3,8"), P: &p})
	if err != nil || string(b) != `{"s":"0-3,8","p":"1,3-4"}` {
		t.Fatalf("marshal: %s %v", b, err)
	}
	var d doc
	if err := json.Unmarshal(b, &d); err != nil || d.S.String() != "0-3,8" || d.P.String() != "1,3-4" {
		t.Fatalf("unmarshal: %+v %v", d, err)
	}
	if err := json.Unmarshal([]byte(`{"s":"3-1"}`), &d); err == nil {
		t.Error("bad cpulist accepted")
	}
}

func TestImmutable(t *testing.T) {
	a := Of(1, 2, 3)
	b := Of(3, 200)
	u := a.Union(b)
	_ = u.Add(7)
	_ = a.Difference(b)
	_ = a.Intersect(b)
	if a.String() != "1-3" || b.String() != "3,200" || u.String() != "1-3,200" {
		t.Errorf("operations changed their operands: %v %v %v", a, b, u)
	}
}

// randomSet draws a set with a random shape: dense runs, sparse points, or
// ids near word boundaries, up to maxID.
func randomSet(r *rand.Rand, maxID int) Set {
	var cpus []int
	switch r.Intn(4) {
	case 0: // empty or tiny
		for i := r.Intn(3); i > 0; i-- {
			cpus = append(cpus, r.Intn(maxID+1))
		}
	case 1: // runs
		for i := r.Intn(5); i >= 0; i-- {
			lo := r.Intn(maxID + 1)
			hi := min(maxID, lo+r.Intn(130))
			for c := lo; c <= hi; c++ {
				cpus = append(cpus, c)
			}
		}
	case 2: // word edges
		for i := r.Intn(8); i >= 0; i-- {
			c := (r.Intn(maxID/32+1))*32 + r.Intn(3) - 1
			if c >= 0 && c <= maxID {
				cpus = append(cpus, c)
			}
		}
	default: // random sparse
		for i := r.Intn(200); i >= 0; i-- {
			cpus = append(cpus, r.Intn(maxID+1))
		}
	}
	return Of(cpus...)
}

func TestRoundTripProperties(t *testing.T) {
	r := rand.New(rand.NewSource(20240601))
	for i := 0; i < 3000; i++ {
		maxID := []int{7, 63, 64, 255, 1151, 8191, MaxCPU}[r.Intn(7)]
		s := randomSet(r, maxID)
		back, err := Parse(s.String())
		if err != nil || !back.Equal(s) {
			t.Fatalf("Parse(String()) of %v = %v, %v", s, back, err)
		}
		nbits := r.Intn(maxID + 2)
		m := s.Mask(nbits)
		back, err = ParseMask(m)
		if err != nil || !back.Equal(s) {
			t.Fatalf("ParseMask(Mask(%d)) of %v: %q = %v, %v", nbits, s, m, back, err)
		}
		if groups := strings.Count(m, ",") + 1; groups != max(1, (max(nbits, s.Max()+1)+31)/32) {
			t.Fatalf("Mask(%d) of %v has %d groups", nbits, s, groups)
		}
		if got := Of(s.CPUs()...); !got.Equal(s) || s.Len() != len(s.CPUs()) {
			t.Fatalf("Of(CPUs()) of %v = %v", s, got)
		}
		// The blk-mq form "0, 1, 5" of the same CPUs.
		var sb strings.Builder
		for j, c := range s.CPUs() {
			if j > 0 {
				sb.WriteString(", ")
			}
			sb.WriteString(itoa(c))
		}
		if back, err := Parse(sb.String()); err != nil || !back.Equal(s) {
			t.Fatalf("Parse(%.40q) = %v, %v", sb.String(), back, err)
		}
	}
}

func itoa(n int) string {
	b, _ := json.Marshal(n)
	return string(b)
}

// genSet lets testing/quick generate sets.
type genSet struct{ Set }

func (genSet) Generate(r *rand.Rand, size int) reflect.Value {
	return reflect.ValueOf(genSet{randomSet(r, []int{63, 300, 2000}[r.Intn(3)])})
}

func TestAlgebraLaws(t *testing.T) {
	cfg := &quick.Config{MaxCount: 2000, Rand: rand.New(rand.NewSource(7))}
	laws := map[string]any{
		"union commutes": func(a, b genSet) bool { return a.Union(b.Set).Equal(b.Union(a.Set)) },
		"intersect commutes": func(a, b genSet) bool {
			return a.Intersect(b.Set).Equal(b.Intersect(a.Set))
		},
		"union associates": func(a, b, c genSet) bool {
			return a.Union(b.Set).Union(c.Set).Equal(a.Union(b.Union(c.Set)))
		},
		"intersect distributes over union": func(a, b, c genSet) bool {
			return a.Intersect(b.Union(c.Set)).Equal(a.Intersect(b.Set).Union(a.Intersect(c.Set)))
		},
		"de morgan (relative)": func(u, a, b genSet) bool {
			return u.Difference(a.Union(b.Set)).Equal(u.Difference(a.Set).Intersect(u.Difference(b.Set)))
		},
		"difference is disjoint": func(a, b genSet) bool {
			return a.Difference(b.Set).Intersect(b.Set).IsEmpty()
		},
		"partition": func(a, b genSet) bool {
			d, i := a.Difference(b.Set), a.Intersect(b.Set)
			return d.Union(i).Equal(a.Set) && d.Len()+i.Len() == a.Len()
		},
		"inclusion-exclusion": func(a, b genSet) bool {
			return a.Union(b.Set).Len() == a.Len()+b.Len()-a.Intersect(b.Set).Len()
		},
		"subset": func(a, b genSet) bool {
			return a.Intersect(b.Set).IsSubsetOf(a.Set) && a.IsSubsetOf(a.Union(b.Set)) &&
				a.IsSubsetOf(b.Set) == a.Difference(b.Set).IsEmpty()
		},
		"idempotent": func(a genSet) bool {
			return a.Union(a.Set).Equal(a.Set) && a.Intersect(a.Set).Equal(a.Set) && a.Difference(a.Set).IsEmpty()
		},
		"contains agrees with CPUs": func(a genSet) bool {
			cpus := a.CPUs()
			for _, c := range cpus {
				if !a.Contains(c) {
					return false
				}
			}
			return len(cpus) == 0 || (cpus[0] == a.Min() && cpus[len(cpus)-1] == a.Max())
		},
		"add": func(a genSet) bool {
			n := a.Max() + 1
			return a.Add(n).Contains(n) && a.Add(n).Len() == a.Len()+1
		},
	}
	for name, law := range laws {
		if err := quick.Check(law, cfg); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{"", "0", "0-3,8,10-11", "0, 1", "0-15:2", "0-15:2/4", "1,2-7,9", "3-1", "65536", "0-9:3/4"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		s, err := Parse(in)
		if err != nil {
			return
		}
		back, err := Parse(s.String())
		if err != nil || !back.Equal(s) {
			t.Fatalf("Parse(%q) = %v; Parse(String()) = %v, %v", in, s, back, err)
		}
		back, err = ParseMask(s.Mask(0))
		if err != nil || !back.Equal(s) {
			t.Fatalf("Parse(%q) = %v; ParseMask(Mask) = %v, %v", in, s, back, err)
		}
		if s.Max() > MaxCPU {
			t.Fatalf("Parse(%q) has CPU %d above MaxCPU", in, s.Max())
		}
	})
}

func FuzzParseMask(f *testing.F) {
	for _, s := range []string{"ff", "0x3", "ffffffff,00000001", "00000000,00000000,00000000,00000000,00000000,00000000,00000000,000000ff", "0", ",", "1,00000000,00000000"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		s, err := ParseMask(in)
		if err != nil {
			return
		}
		width := (strings.Count(in, ",") + 1) * 32
		m := s.Mask(width)
		back, err := ParseMask(m)
		if err != nil || !back.Equal(s) {
			t.Fatalf("ParseMask(%q) = %v; ParseMask(Mask) of %q = %v, %v", in, s, m, back, err)
		}
		if strings.Count(m, ",") != strings.Count(in, ",") {
			t.Fatalf("ParseMask(%q).Mask(%d) = %q: width changed", in, width, m)
		}
		back, err = Parse(s.String())
		if err != nil || !back.Equal(s) {
			t.Fatalf("ParseMask(%q) = %v; Parse(String()) = %v, %v", in, s, back, err)
		}
	})
}

func TestParseWithLast(t *testing.T) {
	for in, want := range map[string]string{
		"2-N": "2-7", "N": "7", "0,N": "0,7", "0-N:2/4": "0-1,4-5", "1-3": "1-3",
	} {
		got, err := ParseWithLast(in, 7)
		if err != nil || got.String() != want {
			t.Errorf("ParseWithLast(%q, 7) = %s, %v; want %s", in, got, err, want)
		}
	}
	if _, err := ParseWithLast("N-2", 7); err == nil {
		t.Error("N-2 (backwards) accepted")
	}
}
