package main

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

// Progress goes to stderr only when it is a terminal or forced; it is one
// line rewritten in place and cleared at the end.
func TestProgressOnlyWhenTerminalOrForced(t *testing.T) {
	var quiet bytes.Buffer
	p := newProgress(&quiet, false)
	p.show("record: %d of %d", 1, 3)
	p.wait(10*time.Millisecond, "doctor")
	p.done()
	if quiet.Len() != 0 {
		t.Errorf("progress written to a non-terminal without --progress: %q", quiet.String())
	}
	var forced bytes.Buffer
	p = newProgress(&forced, true)
	p.show("record: 1 of 3 samples")
	p.show("record: 2 of 3")
	p.done()
	got := forced.String()
	if !strings.HasPrefix(got, "\rrecord: 1 of 3 samples\rrecord: 2 of 3        ") || !strings.HasSuffix(got, "\r") || strings.Contains(got, "\n") {
		t.Errorf("progress line %q", got)
	}
}
