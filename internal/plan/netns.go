package plan

import "fmt"

// ScopeToNetNS removes from p what cannot take effect in a network
// namespace other than the initial one, and says why in p.Notes:
// net.core.rps_sock_flow_entries exists only in the initial namespace (the
// RFS table is global), so a plan made in another namespace cannot turn RFS
// on, and per-queue rps_flow_cnt steers nothing until the table is sized
// from the initial namespace. ns names the namespace for the note.
func ScopeToNetNS(p *Plan, ns string) {
	var flows int
	for i := range p.RxQueues {
		e := &p.RxQueues[i]
		if e.RPSFlowCnt != nil {
			flows++
			e.RPSFlowCnt = nil
		}
	}
	kept := p.RxQueues[:0]
	for _, e := range p.RxQueues {
		if e.RPSCPUs != nil || e.RPSFlowCnt != nil {
			kept = append(kept, e)
		}
	}
	p.RxQueues = kept
	entries := 0
	if p.RPSSockFlowEntries != nil {
		entries = p.RPSSockFlowEntries.Value
		p.RPSSockFlowEntries = nil
	}
	if flows == 0 && entries == 0 {
		return
	}
	note := fmt.Sprintf("RFS left out: this plan was made in network namespace %s, and net.core.rps_sock_flow_entries exists only in the host's initial namespace (the RFS table is machine-wide), so RFS cannot be turned on from here", ns)
	if flows > 0 {
		note += fmt.Sprintf("; the %d rx queue flow count(s) (rps_flow_cnt) were dropped too, as they steer nothing without that table", flows)
	}
	if entries > 0 {
		note += fmt.Sprintf(" (to use RFS: on the host, sysctl -w net.core.rps_sock_flow_entries=%d; then give the rx queues rps_flow_cnt in this plan)", entries)
	}
	p.Notes = append(p.Notes, note)
}
