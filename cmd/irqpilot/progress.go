package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// progress shows on stderr that a long verb is working and what is left:
// one line rewritten in place, only when stderr is a terminal (or with
// --progress), never on stdout, so --json output stays clean.
type progress struct {
	w     io.Writer
	on    bool
	width int
}

// newProgress reports to errOut when force is set or errOut is a terminal.
func newProgress(errOut io.Writer, force bool) *progress {
	return &progress{w: errOut, on: force || isTerminal(errOut)}
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}

// show replaces the progress line.
func (p *progress) show(format string, args ...any) {
	if p == nil || !p.on {
		return
	}
	s := fmt.Sprintf(format, args...)
	pad := ""
	if n := p.width - len(s); n > 0 {
		pad = strings.Repeat(" ", n)
	}
	p.width = len(s)
	fmt.Fprintf(p.w, "\r%s%s", s, pad)
}

// done clears the progress line.
func (p *progress) done() {
	if p == nil || !p.on || p.width == 0 {
		return
	}
	fmt.Fprintf(p.w, "\r%s\r", strings.Repeat(" ", p.width))
	p.width = 0
}

// wait sleeps d, showing what is being waited for and the time left each
// second.
func (p *progress) wait(d time.Duration, what string) {
	if p == nil || !p.on {
		time.Sleep(d)
		return
	}
	end := time.Now().Add(d)
	for left := time.Until(end); left > 0; left = time.Until(end) {
		p.show("%s: %s left", what, left.Round(time.Second))
		time.Sleep(min(left, time.Second))
	}
	p.done()
}
