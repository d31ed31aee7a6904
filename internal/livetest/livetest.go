// Package livetest holds what live tests (root, real processes, namespaces)
// in several packages need alike: running a command, building the irqpilot
// binary once, and a buffer a process's output goroutine and the test
// share. Only tests import it.
package livetest

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// Run runs name with args and returns its trimmed combined output; a
// failure fails the test with the output.
func Run(t testing.TB, name string, args ...string) string {
	t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

var built atomic.Bool

var binary = sync.OnceValues(func() (string, error) {
	built.Store(true)
	root, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}").Output()
	if err != nil {
		return "", fmt.Errorf("module root: %v", err)
	}
	dir, err := os.MkdirTemp("", "irqpilot-livetest-bin-")
	if err != nil {
		return "", err
	}
	// Reachable by other users: tests run it as nobody too.
	if err := os.Chmod(dir, 0o755); err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "irqpilot")
	build := exec.Command("go", "build", "-trimpath", "-o", bin, "./cmd/irqpilot")
	build.Dir = strings.TrimSpace(string(root))
	// Static: runs in a bare mount namespace or container root too.
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build irqpilot: %v\n%s", err, out)
	}
	return bin, nil
})

// Irqpilot is the path of an irqpilot binary built from this module, once
// per test binary (in a directory under TMPDIR left to the OS's cleanup:
// other tests of the same binary may still run it).
func Irqpilot(t testing.TB) string {
	t.Helper()
	bin, err := binary()
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

// Buffer is a bytes.Buffer that a process's output copier and the test
// may use at once.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *Buffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *Buffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// RemoveBuilt removes the binary Irqpilot built, if it did: call it from
// TestMain after m.Run.
func RemoveBuilt() {
	if built.Load() {
		if bin, _ := binary(); bin != "" {
			os.RemoveAll(filepath.Dir(bin))
		}
	}
}
