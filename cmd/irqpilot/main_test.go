package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"testing"

	"github.com/irqpilot/irqpilot/internal/livetest"
)

// The test binary doubles as irqpilot when selfEnv is set: the tests run
// the real command (flags, output, exit status) in a child process, inside
// a network namespace too, without a separate build.
const selfEnv = "IRQPILOT_TEST_MAIN"

// TestMain runs irqpilot when selfEnv is set, else the tests, and removes
// the binary livetest built for the tests that need a file on disk.
func TestMain(m *testing.M) {
	if os.Getenv(selfEnv) == "1" {
		main()
		os.Exit(0)
	}
	code := m.Run()
	livetest.RemoveBuilt()
	os.Exit(code)
}

// selfCmd returns a command running irqpilot (this test binary) with args,
// behind prefix (a wrapper such as "ip netns exec NS") when not nil.
func selfCmd(prefix []string, args ...string) *exec.Cmd {
	self, _ := os.Executable()
	argv := append(append(append([]string{}, prefix...), self), args...)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), selfEnv+"=1")
	return cmd
}

// runCmd runs cmd to completion and returns its output and error.
func runCmd(cmd *exec.Cmd) (stdout, stderr string, err error) {
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err = cmd.Run()
	return out.String(), errb.String(), err
}

func exitCode(err error) int {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	if err != nil {
		return -1
	}
	return 0
}

// vethNamespace is a network namespace of the test's own with the veth
// pair vq0/vq1 of 4 queues each; exec runs a command inside it.
type vethNamespace struct {
	name string
	exec []string // "ip netns exec NAME"
}

// newVethPair makes a vethNamespace (random name), removed at the end.
func newVethPair(t *testing.T) *vethNamespace {
	t.Helper()
	livetest.NeedRoot(t, "ip")
	name := livetest.Netns(t, livetest.Name("irqp-vq-"))
	livetest.Veth(t, name, "vq0", "vq1", 4)
	return &vethNamespace{name: name, exec: []string{"ip", "netns", "exec", name}}
}
