package plan

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"syscall"

	"gopkg.in/yaml.v3"

	"github.com/irqpilot/irqpilot/internal/kernel"
)

// A plan is untrusted input (anyone may hand one to apply or the agent),
// so what it may cost to read is bounded, well above what a real plan
// needs: the plan auto makes for the largest real host at hand (pcp, 1152
// CPUs, 1 056 IRQs) holds about 2 000 entries in some 300 KB.
const (
	// MaxPlanBytes bounds a plan file. With maxPlanSeparators, the most a
	// plan can cost to parse is about 250 MB of allocation (a million
	// one-byte scalars; TestParseUnderAddressSpaceLimit).
	MaxPlanBytes = 4 << 20
	// MaxPlanEntries bounds the entries of a plan's lists together (irqs,
	// rx_queues, tx_queues, apps, coalesce, napi, notes): 8 per CPU at
	// NR_CPUS' maximum of 8192.
	MaxPlanEntries = 1 << 16
	// maxPlanSeparators bounds the YAML nodes a plan can make before
	// yaml.v3 builds them: every node after the first follows a newline or
	// one of the indicators , [ { : - ?, so counting those bounds the nodes.
	// 4 MiB of "a," would otherwise be 2 million nodes (some 500 MB of
	// allocation); a real plan has about 10 per entry.
	maxPlanSeparators = 1 << 20
)

// LoadFile reads and checks a plan file (YAML or JSON).
func LoadFile(file string) (*Plan, error) {
	data, err := ReadFile(file)
	if err != nil {
		return nil, err
	}
	return Parse(file, data)
}

// ReadFile reads a plan file, refusing anything but a regular file (a FIFO
// would block for ever, a device such as /dev/zero never ends) and a file
// larger than MaxPlanBytes. The file is opened O_NONBLOCK, so that opening
// a FIFO does not wait for a writer, and checked with fstat before one byte
// is read.
func ReadFile(file string) ([]byte, error) {
	fh, err := os.OpenFile(file, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	defer fh.Close()
	return ReadOpen(fh, file)
}

// ReadOpen reads a plan from fh, opened by the caller (as file), with
// ReadFile's checks: a regular file of at most MaxPlanBytes.
func ReadOpen(fh *os.File, file string) ([]byte, error) {
	fi, err := fh.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("plan %s is %s, not a regular file; refused (write the plan to a file first)", file, kernel.FileKind(fi.Mode()))
	}
	if fi.Size() > MaxPlanBytes {
		return nil, fmt.Errorf("plan %s is %d bytes, over the limit of %d (real plans are a few hundred KB)", file, fi.Size(), MaxPlanBytes)
	}
	data, err := io.ReadAll(io.LimitReader(fh, MaxPlanBytes+1))
	if err != nil {
		return nil, fmt.Errorf("plan %s: %w", file, err)
	}
	if len(data) > MaxPlanBytes {
		return nil, fmt.Errorf("plan %s grew past the limit of %d bytes while being read; refused", file, MaxPlanBytes)
	}
	return data, nil
}

// separators counts the bytes that can start a new YAML node (see
// maxPlanSeparators).
func separators(data []byte) int {
	n := 0
	for _, c := range data {
		switch c {
		case '\n', ',', '[', '{', ':', '-', '?':
			n++
		}
	}
	return n
}

// MarshalFile encodes the plan as a YAML file, with a header comment.
func (p *Plan) MarshalFile() ([]byte, error) {
	var b bytes.Buffer
	b.WriteString("# irqpilot plan — review, then: irqpilot apply FILE\n")
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(p); err != nil {
		return nil, err
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// MarshalJSONFile encodes the plan as indented JSON.
func (p *Plan) MarshalJSONFile() ([]byte, error) {
	b, err := json.MarshalIndent(p, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}
