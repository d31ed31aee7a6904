package plan

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// Error is one problem in a plan, located by file, line and field.
type Error struct {
	File  string // "" for a plan not read from a file
	Line  int    // 1-based; 0 when unknown (generated plans)
	Field string // "irqs[2].cpus"; "" for the whole document
	Msg   string
}

func (e *Error) Error() string {
	var b strings.Builder
	if e.File != "" {
		b.WriteString(e.File)
	} else {
		b.WriteString("plan")
	}
	if e.Line > 0 {
		b.WriteByte(':')
		b.WriteString(strconv.Itoa(e.Line))
	}
	b.WriteString(": ")
	if e.Field != "" {
		b.WriteString(e.Field)
		b.WriteString(": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

// Errors is every problem found in a plan, in file order. It is returned as
// a single error; errors.As(err, &Errors{}) gives the list.
type Errors []*Error

// maxErrors bounds how many problems one Load or Resolve reports.
const maxErrors = 50

func (es Errors) Error() string {
	parts := make([]string, len(es))
	for i, e := range es {
		parts[i] = e.Error()
	}
	return strings.Join(parts, "\n")
}

// Unwrap lets errors.As find the individual *Error values.
func (es Errors) Unwrap() []error {
	out := make([]error, len(es))
	for i, e := range es {
		out[i] = e
	}
	return out
}

// errList collects errors for one file.
type errList struct {
	file string
	errs Errors
	// lines is the line of each field the file gave ("irqs[2].cpus"), so an
	// error about a field points at that field's line, not its entry's.
	lines map[string]int
}

func (l *errList) add(line int, field, format string, args ...any) {
	if len(l.errs) >= maxErrors {
		return
	}
	if n, ok := l.lines[field]; ok && n > 0 {
		line = n
	}
	l.errs = append(l.errs, &Error{File: l.file, Line: line, Field: field, Msg: fmt.Sprintf(format, args...)})
}

// addAt records an error at line itself, not at the line the field was
// first read on (a key given twice is reported where it is repeated).
func (l *errList) addAt(line int, field, format string, args ...any) {
	if len(l.errs) >= maxErrors {
		return
	}
	l.errs = append(l.errs, &Error{File: l.file, Line: line, Field: field, Msg: fmt.Sprintf(format, args...)})
}

func (l *errList) err() error {
	if len(l.errs) == 0 {
		return nil
	}
	return l.errs
}

var (
	yamlLineRE   = regexp.MustCompile(`line (\d+)`)
	yamlLineLead = regexp.MustCompile(`^line \d+: `)
)

func yamlErrLine(err error) int {
	if m := yamlLineRE.FindStringSubmatch(err.Error()); m != nil {
		n, _ := strconv.Atoi(m[1])
		return n
	}
	return 0
}

// syntaxErrLine is the line of a parse error: yaml.v3's "line N", or for a
// JSON document (which yaml.v3 often reports without a line) the line of
// encoding/json's syntax error offset.
func syntaxErrLine(data []byte, err error) int {
	if n := yamlErrLine(err); n > 0 {
		return problemLine(data, err, n)
	}
	if t := bytes.TrimSpace(data); len(t) > 0 && (t[0] == '{' || t[0] == '[') {
		var v any
		var se *json.SyntaxError
		if jerr := json.Unmarshal(data, &v); errors.As(jerr, &se) {
			return 1 + bytes.Count(data[:min(int(se.Offset), len(data))], []byte("\n"))
		}
	}
	return 0
}

// problemLine: yaml.v3 reports a syntax error at the line where the
// enclosing construct began (its context mark: line 1 for a stray line in
// the top-level mapping) rather than where the problem is, and does not
// expose the problem's position. The problem's line is the first line
// whose prefix of the document already fails with the same message; it is
// at or after the context line. Only when a prefix reproduces the message
// is that line used, else the reported one.
func problemLine(data []byte, err error, reported int) int {
	msg := yamlErrMsg(err)
	lines := bytes.SplitAfter(data, []byte("\n"))
	end := 0
	for i, ln := range lines {
		end += len(ln)
		if i+1 < reported {
			continue
		}
		var n yaml.Node
		perr := yaml.Unmarshal(data[:end], &n)
		if perr != nil && yamlErrMsg(perr) == msg {
			return i + 1
		}
	}
	return reported
}

func yamlErrMsg(err error) string {
	s := strings.TrimPrefix(err.Error(), "yaml: ")
	return strings.TrimSpace(yamlLineLead.ReplaceAllString(s, ""))
}

func itoa(n int) string { return strconv.Itoa(n) }
