package kernel

import (
	"errors"
	"strings"
	"testing"
)

func cpuHeader(n int) string {
	var sb strings.Builder
	for c := range n {
		sb.WriteString(" CPU" + itoa(c))
	}
	sb.WriteByte('\n')
	return sb.String()
}

// Each limit of parseInterrupts is refused with a *ParseError that names the
// limit, before anything proportional to it is allocated.
func TestParseInterruptsLimits(t *testing.T) {
	for _, tc := range []struct {
		name, data, msg string
		line            int
	}{
		{
			// More columns than NR_CPUS can be.
			name: "columns", data: cpuHeader(maxInterruptColumns+1) + "NMI: 1\n",
			msg: "8193 CPU columns", line: 1,
		},
		{
			// The pathological product: short rows, so that the bytes
			// are few, but rows × columns counts would be reserved.
			name: "product", data: cpuHeader(8192) + strings.Repeat("NMI: 0\n", 2100),
			msg: "counts", line: 1,
		},
		{
			name: "rows", data: " CPU0\n" + strings.Repeat("NMI: 0\n", maxInterruptRows+1),
			msg: "rows", line: 1,
		},
		{
			name: "line length", data: " CPU0\n 0: 1 IO-APIC 2-edge " + strings.Repeat("x", maxInterruptLineBytes) + "\n",
			msg: "bytes long", line: 2,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseInterrupts("/proc/interrupts", []byte(tc.data))
			var pe *ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("error %v is not a *ParseError", err)
			}
			if pe.File != "/proc/interrupts" || pe.Line != tc.line || !strings.Contains(pe.Msg, tc.msg) || !strings.Contains(pe.Msg, "limit") {
				t.Errorf("got %q (line %d), want line %d naming the limit and %q", err, pe.Line, tc.line, tc.msg)
			}
		})
	}
}

// The largest real capture (1152 CPUs, 13 MB, 1 056 rows) is well inside
// every limit, and so is a 8192-column file of a few rows.
func TestParseInterruptsLimitsAdmitReal(t *testing.T) {
	data := readFixture(t, "pcp/interrupts-1152cpu-x86_64.bz2")
	in, err := parseInterrupts("pcp", data)
	if err != nil || len(in.CPUs) != 1152 || len(in.Lines) != 1056 {
		t.Fatalf("1152-CPU capture: %v", err)
	}
	in, err = parseInterrupts("wide", []byte(cpuHeader(maxInterruptColumns)+" 0:"+strings.Repeat(" 12345678901", maxInterruptColumns)+" IO-APIC 2-edge timer\nNMI: 1 Non-maskable interrupts\n"))
	if err != nil || len(in.Lines) != 2 {
		t.Fatalf("8192 columns: %v", err)
	}
}

func TestParsePerCPUCountLimit(t *testing.T) {
	if _, err := parsePerCPUCount(strings.Repeat("0,", maxInterruptColumns-1) + "0"); err != nil {
		t.Fatalf("%d counts: %v", maxInterruptColumns, err)
	}
	_, err := parsePerCPUCount(strings.Repeat("0,", maxInterruptColumns) + "0")
	if err == nil || !strings.Contains(err.Error(), "limit") {
		t.Fatalf("%d counts: err = %v, want the limit", maxInterruptColumns+1, err)
	}
}
