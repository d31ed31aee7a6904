package plan

import (
	"strings"
	"testing"
)

// A plan made in a network namespace other than the host's keeps no
// rps_sock_flow_entries and no rps_flow_cnt (RFS cannot be turned on from
// there) and says why; rps_cpus stays.
func TestScopeToNetNS(t *testing.T) {
	p, err := Parse("p.yaml", []byte(`version: 1
rx_queues:
  - {device: uxv1, queue: 0, rps_cpus: 0-1, rps_flow_cnt: 4096, reason: r}
  - {device: uxv1, queue: 1, rps_flow_cnt: 4096, reason: r}
rps_sock_flow_entries: {value: 32768, reason: r}
apps:
  - {comm: memcached, all: true, cpus: 1, reason: r}
`))
	if err != nil {
		t.Fatal(err)
	}
	if !p.Apps[0].All {
		t.Errorf("apps[0].all not read")
	}
	ScopeToNetNS(p, "ux-a")
	if p.RPSSockFlowEntries != nil || len(p.RxQueues) != 1 || p.RxQueues[0].RPSFlowCnt != nil || p.RxQueues[0].RPSCPUs == nil {
		t.Errorf("after ScopeToNetNS: %+v %+v", p.RPSSockFlowEntries, p.RxQueues)
	}
	if len(p.Notes) != 1 || !strings.Contains(p.Notes[0], "network namespace ux-a") || !strings.Contains(p.Notes[0], "sysctl -w net.core.rps_sock_flow_entries=32768") {
		t.Errorf("notes %q", p.Notes)
	}
	if err := Check(p); err != nil {
		t.Errorf("scoped plan invalid: %v", err)
	}
}
