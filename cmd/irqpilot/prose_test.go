package main

import (
	"bytes"
	"strings"
	"testing"
	"unicode/utf8"
)

// doctor's Why and Fix lines wrap at the page's width, and a command in
// backticks is never broken across lines: it is copied as printed.
func TestWriteProseKeepsCommandsWhole(t *testing.T) {
	long := "`irqpilot plan --remedy interrupt-bound-cpu:cpu0 -o fix.yaml && irqpilot apply --verify fix.yaml --revert-if worse`"
	short := "`echo 1 > /proc/irq/34/smp_affinity_list`"
	text := strings.Repeat("words that explain the remedy at some length, ", 6) + "Commands: " + short + ". Or as a plan: " + long + ". Then " + strings.Repeat("more words ", 12)
	var b bytes.Buffer
	writeProse(&b, "  Fix: ", "       ", text)
	lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
	if len(lines) < 4 {
		t.Fatalf("not wrapped: %q", b.String())
	}
	var sawShort, sawLong bool
	for i, l := range lines {
		if i > 0 && !strings.HasPrefix(l, "       ") {
			t.Errorf("line %d not indented: %q", i, l)
		}
		sawShort = sawShort || strings.Contains(l, short)
		sawLong = sawLong || strings.Contains(l, long)
		if n := utf8.RuneCountInString(l); n > width && strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(l), ".")) != long {
			t.Errorf("line %d is %d wide (page %d) and is not one unbreakable command: %q", i, n, width, l)
		}
		if strings.Count(l, "`")%2 != 0 {
			t.Errorf("line %d breaks a command: %q", i, l)
		}
	}
	if !sawShort || !sawLong {
		t.Errorf("a command is not whole on one line:\n%s", b.String())
	}
	if got := strings.Join(strings.Fields(b.String()), " "); got != strings.Join(strings.Fields("Fix: "+text), " ") {
		t.Errorf("words lost or changed:\n%s\nwant\n%s", got, text)
	}
}
