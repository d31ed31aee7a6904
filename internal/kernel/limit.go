package kernel

import (
	"errors"
	"fmt"
)

// ErrOverLimit is matched (errors.Is) by every refusal of input that is
// over one of the limits on what reading it may cost: a snapshot's entry,
// its total, a file read from a snapshot or --root tree, a /proc/interrupts
// with too many columns, rows or counts. The message names the limit;
// the program exits with its own status for it (ExitOverLimit), told
// apart from a crash.
var ErrOverLimit = errors.New("over a limit")

// ExitOverLimit is the exit status of a command whose input was refused
// for a limit (ErrOverLimit): 65, EX_DATAERR of sysexits.h ("the input
// data was incorrect in some way"). Go's runtime exits 2 when it dies
// (out of memory, a panic), and irqpilot's other errors are 2 too, so a
// refusal must not be: a script can tell "too big, refused, nothing left
// behind" from "it crashed".
const ExitOverLimit = 65

// limitError is a refusal for a limit: its message as written, matched
// by errors.Is(err, ErrOverLimit).
type limitError struct{ msg string }

func (e *limitError) Error() string        { return e.msg }
func (e *limitError) Is(target error) bool { return target == ErrOverLimit }

// overLimit formats a limitError.
func overLimit(format string, args ...any) error {
	return &limitError{fmt.Sprintf(format, args...)}
}
