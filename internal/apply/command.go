package apply

import (
	"path/filepath"
	"strings"

	"github.com/irqpilot/irqpilot/internal/kernel"
)

// RevertCommand is the one way irqpilot prints a revert command for a
// person to paste — apply's undo line, the agent's stop message, hints —
// so that every printed form works as printed: args are revert's own
// arguments ("--to", ID or "--session=ID": --session has a default value,
// so its ID must follow "="), the state directory is named
// (absolute) unless it is the default, every word is shell-quoted, and a
// journal applied in a named network namespace other than the host's is
// reverted there.
func RevertCommand(stateDir string, ns *kernel.NetNS, args ...string) string {
	var w []string
	if ns != nil && !ns.Initial && ns.Name != "" {
		w = append(w, "ip", "netns", "exec", ns.Name)
	}
	w = append(w, "irqpilot", "revert")
	w = append(w, args...)
	if stateDir != "" && stateDir != DefaultStateDir {
		if abs, err := filepath.Abs(stateDir); err == nil {
			stateDir = abs
		}
		w = append(w, "--state-dir", stateDir)
	}
	for i := range w {
		w[i] = ShellQuote(w[i])
	}
	return strings.Join(w, " ")
}

// ShellQuote quotes s for a POSIX shell when it needs it.
func ShellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./=:@%+,") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
