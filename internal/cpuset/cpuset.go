// Package cpuset holds sets of CPU ids and converts them to and from the two
// forms the kernel uses: cpulists ("0-3,8,10-11") and hex masks
// ("ffffffff,00000001", comma-separated 32-bit groups, most significant first).
//
// Sets are immutable values: every operation returns a new Set, so a Set can be
// shared freely. There is no upper bound on CPU ids other than memory (the
// kernel's NR_CPUS can be 8192; sets here are not limited to 1024 like
// sched.CPUSet in x/sys/unix).
package cpuset

import (
	"fmt"
	"math/bits"
	"strconv"
	"strings"
)

// MaxCPU bounds the ids accepted by the parsers so that a garbled file such as
// "0-4000000000" is an error, not a multi-gigabyte allocation. The kernel's
// largest configurable NR_CPUS is 8192; we allow generous headroom.
const MaxCPU = 1 << 16

// Set is an immutable set of CPU ids. The zero value is the empty set.
type Set struct {
	w []uint64 // bit i of w[i/64] = CPU i; no trailing zero words
}

// Of returns the set of the given CPUs. It panics on a negative id.
func Of(cpus ...int) Set {
	var b builder
	for _, c := range cpus {
		if c < 0 {
			panic(fmt.Sprintf("cpuset.Of: negative cpu %d", c))
		}
		b.add(c)
	}
	return b.set()
}

// Range returns the set {lo, …, hi}; empty when hi < lo. Negative ids are
// left out.
func Range(lo, hi int) Set {
	lo = max(lo, 0)
	var b builder
	for c := lo; c <= hi; c++ {
		b.add(c)
	}
	return b.set()
}

type builder struct{ w []uint64 }

func (b *builder) add(c int) {
	i := c / 64
	for len(b.w) <= i {
		b.w = append(b.w, 0)
	}
	b.w[i] |= 1 << uint(c%64)
}

func (b *builder) set() Set { return Set{w: trim(b.w)} }

func trim(w []uint64) []uint64 {
	n := len(w)
	for n > 0 && w[n-1] == 0 {
		n--
	}
	if n == 0 {
		return nil
	}
	return w[:n]
}

// Parse reads a cpulist such as "0-3,8,10-11". Ranges may carry the kernel's
// group pattern (bitmap_parselist, Documentation/admin-guide/kernel-parameters
// "cpu lists"): "0-15:2/4" takes the first 2 CPUs of every group of 4 starting
// at 0 (0,1,4,5,8,9,12,13). "0-15:2" (no group) is accepted as a stride,
// the same as "0-15:1/2". Surrounding white space and spaces after commas (as
// in blk-mq's "0, 1") are accepted; an empty string is the empty set.
func Parse(list string) (Set, error) {
	list = strings.TrimSpace(list)
	if list == "" {
		return Set{}, nil
	}
	var b builder
	for _, part := range strings.Split(list, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			return Set{}, fmt.Errorf("cpulist %q: empty element", list)
		}
		used, group := 1, 1
		if i := strings.IndexByte(part, ':'); i >= 0 {
			u, g, hasGroup := strings.Cut(part[i+1:], "/")
			var err1, err2 error
			if hasGroup {
				used, err1 = parseCPU(u)
				group, err2 = parseCPU(g)
			} else {
				group, err1 = parseCPU(u) // stride form: one CPU every group
			}
			if err1 != nil || err2 != nil || used <= 0 || group <= 0 || used > group {
				return Set{}, fmt.Errorf("cpulist %q: bad group pattern in %q (want used/group with 0 < used <= group)", list, part)
			}
			part = part[:i]
		}
		lo, hi, err := parseRange(part)
		if err != nil {
			return Set{}, fmt.Errorf("cpulist %q: %v", list, err)
		}
		for c := lo; c <= hi; c += group {
			for k := 0; k < used && c+k <= hi; k++ {
				b.add(c + k)
			}
		}
	}
	return b.set(), nil
}

func parseRange(s string) (int, int, error) {
	loS, hiS, isRange := strings.Cut(s, "-")
	lo, err := parseCPU(loS)
	if err != nil {
		return 0, 0, err
	}
	if !isRange {
		return lo, lo, nil
	}
	hi, err := parseCPU(hiS)
	if err != nil {
		return 0, 0, err
	}
	if hi < lo {
		return 0, 0, fmt.Errorf("range %q runs backwards", s)
	}
	return lo, hi, nil
}

func parseCPU(s string) (int, error) {
	// Digits only: strconv.Atoi alone would also take "+1".
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, fmt.Errorf("%q is not a cpu number", s)
		}
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("%q is not a cpu number", s)
	}
	if n > MaxCPU {
		return 0, fmt.Errorf("cpu %d exceeds the supported maximum %d", n, MaxCPU)
	}
	return n, nil
}

// ParseWithLast is Parse for boot parameters (isolcpus=, nohz_full=),
// where the kernel's bitmap_parselist also accepts "N" for the last CPU id
// (nr_cpu_ids-1): "2-N" on an 8-CPU machine is 2-7.
func ParseWithLast(list string, last int) (Set, error) {
	if last < 0 || !strings.ContainsRune(list, 'N') {
		return Parse(list)
	}
	n := strconv.Itoa(last)
	parts := strings.Split(list, ",")
	for i, part := range parts {
		rng, stride, hasStride := strings.Cut(part, ":")
		lo, hi, isRange := strings.Cut(rng, "-")
		if strings.TrimSpace(lo) == "N" {
			lo = n
		}
		if isRange && strings.TrimSpace(hi) == "N" {
			hi = n
		}
		parts[i] = lo
		if isRange {
			parts[i] += "-" + hi
		}
		if hasStride {
			parts[i] += ":" + stride
		}
	}
	return Parse(strings.Join(parts, ","))
}

// MustParse is Parse for constants in tests and tables; it panics on error.
func MustParse(list string) Set {
	s, err := Parse(list)
	if err != nil {
		panic(err)
	}
	return s
}

// ParseMask reads a kernel hex mask: comma-separated groups of up to 8 hex
// digits, most significant group first ("ff", "00000000,00000003"). An
// optional "0x" prefix is accepted. Any width is allowed.
func ParseMask(mask string) (Set, error) {
	mask = strings.TrimSpace(mask)
	mask = strings.TrimPrefix(strings.TrimPrefix(mask, "0x"), "0X")
	if mask == "" {
		return Set{}, fmt.Errorf("cpu mask: empty")
	}
	groups := strings.Split(mask, ",")
	if len(groups)*32 > MaxCPU+32 {
		return Set{}, fmt.Errorf("cpu mask %.20q…: wider than %d CPUs", mask, MaxCPU)
	}
	var b builder
	for gi := range groups {
		g := groups[len(groups)-1-gi] // least significant first
		if g == "" || len(g) > 8 {
			return Set{}, fmt.Errorf("cpu mask %q: group %q is not 1-8 hex digits", mask, g)
		}
		v, err := strconv.ParseUint(g, 16, 32)
		if err != nil {
			return Set{}, fmt.Errorf("cpu mask %q: group %q is not hex", mask, g)
		}
		for v != 0 {
			bit := bits.TrailingZeros64(v)
			b.add(gi*32 + bit)
			v &^= 1 << uint(bit)
		}
	}
	return b.set(), nil
}

// String formats the set as a canonical cpulist ("0-3,8"); "" when empty.
func (s Set) String() string {
	var sb strings.Builder
	cpus := s.CPUs()
	for i := 0; i < len(cpus); {
		j := i
		for j+1 < len(cpus) && cpus[j+1] == cpus[j]+1 {
			j++
		}
		if sb.Len() > 0 {
			sb.WriteByte(',')
		}
		sb.WriteString(strconv.Itoa(cpus[i]))
		if j > i {
			sb.WriteByte('-')
			sb.WriteString(strconv.Itoa(cpus[j]))
		}
		i = j + 1
	}
	return sb.String()
}

// Mask formats the set as a kernel hex mask wide enough for nbits CPUs (at
// least one 32-bit group, and never narrower than the set itself), e.g.
// Of(0,1).Mask(64) == "00000000,00000003". This is the form the kernel prints
// in smp_affinity and rps_cpus for a kernel with nr_cpu_ids == nbits.
func (s Set) Mask(nbits int) string {
	if m := s.Max() + 1; m > nbits {
		nbits = m
	}
	ngroups := (nbits + 31) / 32
	if ngroups == 0 {
		ngroups = 1
	}
	var sb strings.Builder
	for g := ngroups - 1; g >= 0; g-- {
		var v uint64
		if g/2 < len(s.w) {
			v = (s.w[g/2] >> (uint(g%2) * 32)) & 0xffffffff
		}
		if sb.Len() > 0 {
			sb.WriteByte(',')
		}
		fmt.Fprintf(&sb, "%08x", v)
	}
	return sb.String()
}

// MarshalText encodes the set as a cpulist, so sets appear as "0-3" in JSON and YAML.
func (s Set) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// UnmarshalText decodes a cpulist.
func (s *Set) UnmarshalText(b []byte) error {
	v, err := Parse(string(b))
	if err != nil {
		return err
	}
	*s = v
	return nil
}

// Contains reports whether cpu is in the set.
func (s Set) Contains(cpu int) bool {
	if cpu < 0 || cpu/64 >= len(s.w) {
		return false
	}
	return s.w[cpu/64]&(1<<uint(cpu%64)) != 0
}

// Len is the number of CPUs in the set.
func (s Set) Len() int {
	n := 0
	for _, w := range s.w {
		n += bits.OnesCount64(w)
	}
	return n
}

// IsEmpty reports whether the set has no CPUs.
func (s Set) IsEmpty() bool { return len(s.w) == 0 }

// Max is the highest CPU in the set, or -1 when empty.
func (s Set) Max() int {
	if len(s.w) == 0 {
		return -1
	}
	i := len(s.w) - 1
	return i*64 + 63 - bits.LeadingZeros64(s.w[i])
}

// Min is the lowest CPU in the set, or -1 when empty.
func (s Set) Min() int {
	for i, w := range s.w {
		if w != 0 {
			return i*64 + bits.TrailingZeros64(w)
		}
	}
	return -1
}

// CPUs lists the set's CPUs in ascending order.
func (s Set) CPUs() []int {
	out := make([]int, 0, s.Len())
	for i, w := range s.w {
		for w != 0 {
			b := bits.TrailingZeros64(w)
			out = append(out, i*64+b)
			w &^= 1 << uint(b)
		}
	}
	return out
}

// Equal reports whether both sets hold the same CPUs.
func (s Set) Equal(o Set) bool {
	if len(s.w) != len(o.w) {
		return false
	}
	for i := range s.w {
		if s.w[i] != o.w[i] {
			return false
		}
	}
	return true
}

// Union returns s ∪ o.
func (s Set) Union(o Set) Set {
	a, b := s.w, o.w
	if len(a) < len(b) {
		a, b = b, a
	}
	w := append([]uint64(nil), a...)
	for i := range b {
		w[i] |= b[i]
	}
	return Set{w: trim(w)}
}

// Intersect returns s ∩ o.
func (s Set) Intersect(o Set) Set {
	n := min(len(s.w), len(o.w))
	w := make([]uint64, n)
	for i := 0; i < n; i++ {
		w[i] = s.w[i] & o.w[i]
	}
	return Set{w: trim(w)}
}

// Difference returns s \ o.
func (s Set) Difference(o Set) Set {
	w := append([]uint64(nil), s.w...)
	for i := 0; i < len(w) && i < len(o.w); i++ {
		w[i] &^= o.w[i]
	}
	return Set{w: trim(w)}
}

// IsSubsetOf reports whether every CPU of s is in o.
func (s Set) IsSubsetOf(o Set) bool { return s.Difference(o).IsEmpty() }

// Add returns s ∪ {cpus}.
func (s Set) Add(cpus ...int) Set { return s.Union(Of(cpus...)) }
