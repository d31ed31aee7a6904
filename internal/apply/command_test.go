package apply

import (
	"testing"

	"github.com/irqpilot/irqpilot/internal/kernel"
)

func TestRevertCommand(t *testing.T) {
	for _, tc := range []struct {
		dir  string
		ns   *kernel.NetNS
		args []string
		want string
	}{
		{DefaultStateDir, nil, []string{"--to", "20261128T042323Z"}, "irqpilot revert --to 20261128T042323Z"},
		{"/tmp/st odd;x", nil, []string{"--session=20261128T042323.000Z-p42"}, "irqpilot revert --session=20261128T042323.000Z-p42 --state-dir '/tmp/st odd;x'"},
		{DefaultStateDir, &kernel.NetNS{Name: "au4-$(id)"}, []string{"--to", "X"}, "ip netns exec 'au4-$(id)' irqpilot revert --to X"},
		{DefaultStateDir, &kernel.NetNS{Name: "lab", Initial: true}, []string{"--all"}, "irqpilot revert --all"},
		{"/s/it's", nil, nil, `irqpilot revert --state-dir '/s/it'\''s'`},
	} {
		if got := RevertCommand(tc.dir, tc.ns, tc.args...); got != tc.want {
			t.Errorf("RevertCommand(%q, %+v, %q) = %s, want %s", tc.dir, tc.ns, tc.args, got, tc.want)
		}
	}
}
