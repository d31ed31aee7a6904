package tui

import (
	"math"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"
)

func filterIRQs(in []IRQ, filter string) []IRQ {
	f := strings.ToLower(strings.TrimSpace(filter))
	out := make([]IRQ, 0, len(in))
	for _, q := range in {
		if f != "" && !strings.Contains(strings.ToLower(q.Name), f) &&
			!strings.Contains(strings.ToLower(q.Device), f) &&
			!strings.Contains(q.Class, f) && strconv.Itoa(q.IRQ) != f {
			continue
		}
		out = append(out, q)
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].Rate != out[j].Rate {
			return out[i].Rate > out[j].Rate
		}
		return out[i].IRQ < out[j].IRQ
	})
	return out
}

// human formats a rate in at most 6 characters: 999, 12.3k, 4.56M.
func human(v float64) string {
	switch {
	case v < 0.05:
		return "0"
	case v < 10:
		return strconv.FormatFloat(v, 'f', 1, 64)
	case v < 10000:
		return strconv.FormatFloat(math.Round(v), 'f', 0, 64)
	case v < 1e6:
		return strconv.FormatFloat(v/1e3, 'f', 1, 64) + "k"
	case v < 1e9:
		return strconv.FormatFloat(v/1e6, 'f', 2, 64) + "M"
	}
	return strconv.FormatFloat(v/1e9, 'f', 2, 64) + "G"
}

func clip(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:max(n-1, 0)]) + "…"
}

// FormatText is `top --once`: every CPU and the IRQs that fired (at most
// maxIRQs, busiest first), as plain text lines of at most width columns.
func FormatText(f *Frame, width, maxIRQs int) []string {
	irqs := filterIRQs(f.IRQs, "")
	n := 0
	for n < len(irqs) && n < maxIRQs && irqs[n].Rate > 0 {
		n++
	}
	g := *f
	g.IRQs = irqs[:n]
	m := &Model{Frame: &g, Sort: SortID}
	// Tall enough for everything: title, header, CPUs, blank, header, IRQs,
	// blank, cost header, cost rows, footer.
	h := len(f.CPUs) + n + 5 + len(f.CPUs) + 2
	if n == 0 {
		h++
	}
	s := Render(m, width, h).Text()
	return s[:len(s)-1] // no key help
}
