package main

import (
	"bytes"
	"strings"
	"testing"
)

// persist --print-unit (hidden, for `make deb`) prints the unit a package
// ships for the binary it names, without root and without installing.
func TestPersistPrintUnit(t *testing.T) {
	for unit, want := range map[string][]string{
		"agent": {`ExecStart="/usr/bin/irqpilot" agent --state-dir "/var/lib/irqpilot" --plan "/etc/irqpilot/plan.yaml"`, "Type=notify", "Documentation=man:irqpilot(8)", "not enabled"},
		"boot":  {`ExecStart="/usr/bin/irqpilot" apply --boot --state-dir "/var/lib/irqpilot" "/etc/irqpilot/plan.yaml"`, "Type=oneshot", "not enabled"},
		"udev":  {`ENV{SYSTEMD_WANTS}+="irqpilot-apply.service"`, "copy it to /etc/udev/rules.d/"},
	} {
		root := newRootCmd()
		var out, errOut bytes.Buffer
		root.SetOut(&out)
		root.SetErr(&errOut)
		root.SetArgs([]string{"persist", "--print-unit", unit, "--binary", "/usr/bin/irqpilot"})
		if err := root.Execute(); err != nil {
			t.Fatalf("persist --print-unit %s: %v", unit, err)
		}
		for _, w := range want {
			if !strings.Contains(out.String(), w) {
				t.Errorf("persist --print-unit %s lacks %q:\n%s", unit, w, out.String())
			}
		}
		if strings.Contains(out.String(), "wrote") {
			t.Errorf("persist --print-unit %s installed something:\n%s", unit, out.String())
		}
	}
	for _, bad := range [][]string{
		{"persist", "--print-unit", "agent"}, // the binary must be named
		{"persist", "--print-unit", "timer", "--binary", "/usr/bin/irqpilot"},
		{"persist", "--print-unit", "agent", "--binary", "/usr/bin/irqpilot", "plan.yaml"},
		{"persist", "--print-unit", "agent", "--binary", "/usr/bin/irqpilot", "--remove"},
	} {
		root := newRootCmd()
		root.SetOut(&bytes.Buffer{})
		root.SetErr(&bytes.Buffer{})
		root.SetArgs(bad)
		if err := root.Execute(); err == nil {
			t.Errorf("irqpilot %s: no error", strings.Join(bad, " "))
		}
	}
}
