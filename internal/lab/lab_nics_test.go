package lab

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/irqpilot/irqpilot/internal/host"
	"github.com/irqpilot/irqpilot/internal/plan"
)

// nicsScript plans, applies and reverts per-queue and rps-spread for each
// of the nics shape's NICs (the roundtrip of applyRevertScript), keeping
// the plans, and records the shared legacy line's affinity while each plan
// is in force.
const nicsScript = `
snap() {
  for i in /proc/irq/[0-9]*; do printf '%s %s\n' "$i" "$(cat $i/smp_affinity_list)"; done
  for f in /sys/class/net/eth*/queues/*/rps_cpus /sys/class/net/eth*/queues/*/rps_flow_cnt /sys/class/net/eth*/queues/*/xps_cpus; do
    printf '%s %s\n' "$f" "$(cat $f 2>/dev/null)"
  done
  printf 'rps_sock_flow_entries %s\n' "$(cat /proc/sys/net/core/rps_sock_flow_entries)"
}
irqpilot inventory --json > /tmp/inv.json
line=$(awk '/eth1/ && /IO-APIC/ {sub(":","",$1); print $1}' /proc/interrupts)
echo "LINE $line $(cat /proc/irq/$line/smp_affinity_list)"
snap > /tmp/before
for d in eth0 eth1 eth2; do for p in per-queue rps-spread; do
  n=$d-$p
  if ! irqpilot plan --policy $p --device $d -o /tmp/$n.yaml > /tmp/$n.plan.out 2>&1; then echo "PLAN-FAIL $n"; cat /tmp/$n.plan.out; continue; fi
  irqpilot apply /tmp/$n.yaml > /tmp/$n.apply 2>&1 || { echo "APPLY-FAIL $n"; cat /tmp/$n.apply; }
  snap > /tmp/during-$n
  cmp -s /tmp/before /tmp/during-$n && echo "UNCHANGED $n" || echo "CHANGED $n"
  echo "LINE-DURING $n $(cat /proc/irq/$line/smp_affinity_list)"
  irqpilot revert > /tmp/$n.revert 2>&1 || { echo "REVERT-FAIL $n"; cat /tmp/$n.revert; }
  snap > /tmp/after-$n
  if cmp -s /tmp/before /tmp/after-$n; then echo "EXACT $n"; else echo "NOT-EXACT $n"; diff /tmp/before /tmp/after-$n; fi
  echo "@@PLAN $n"; cat /tmp/$n.yaml; echo "@@/PLAN"
done; done
echo "@@INV"; cat /tmp/inv.json
echo "@@END"
`

// TestLabNICModels: QEMU's older NIC models with their in-tree drivers
// (the nics shape): vmxnet3 with an MSI-X vector per queue, e1000 and
// 8139cp (QEMU's rtl8139) on one shared legacy interrupt line. The
// inventory ties each queue vector to its queue and the shared line to
// both NICs, saying whom it is shared with; per-queue places vmxnet3's
// four queue IRQs and leaves the shared line where it is for either NIC
// (its reason says why); every plan applies and reverts byte-exact.
func TestLabNICModels(t *testing.T) {
	needLab(t)
	s, err := Lookup("nics")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range labMatrix(t) {
		if c.Shape.Name != labShapes(t)[0].Name {
			continue
		}
		t.Run(strings.Replace(c.Name(), c.Shape.Name, s.Name, 1), func(t *testing.T) { labNICModels(t, s, c.Kernel) })
	}
}

func labNICModels(t *testing.T, s Shape, kernel string) {
	r := runGuest(t, Options{Shape: s, Kernel: kernel, Script: nicsScript})
	out := r.Output
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("guest output:\n%s", out)
		}
	})
	var h host.Host
	if err := json.Unmarshal([]byte(section(out, "@@INV")), &h); err != nil {
		t.Fatalf("inventory: %v\n%s", err, out)
	}
	checkNICs(t, s, &h)
	eth0, eth1, eth2 := h.NIC("eth0"), h.NIC("eth1"), h.NIC("eth2")
	if eth0 == nil || eth1 == nil || eth2 == nil || eth0.Driver != "vmxnet3" || eth1.Driver != "e1000" || eth2.Driver != "8139cp" {
		t.Fatalf("NICs %+v: want eth0 vmxnet3, eth1 e1000, eth2 8139cp", h.NICs)
	}
	queueIRQs := map[int]bool{}
	for _, q := range eth0.RxQueues {
		if q.IRQ == nil || queueIRQs[*q.IRQ] {
			t.Errorf("vmxnet3 rx-%d: IRQ %v, want a vector of its own", q.Index, q.IRQ)
			continue
		}
		queueIRQs[*q.IRQ] = true
	}
	if len(eth0.RxQueues) < 2 {
		t.Errorf("vmxnet3 has %d rx queues, want several (one per vCPU)", len(eth0.RxQueues))
	}
	lineF := strings.Fields(field(out, "LINE"))
	if len(lineF) != 2 {
		t.Fatalf("no legacy line for eth1 in /proc/interrupts: %q\n%s", field(out, "LINE"), out)
	}
	var line int
	fmt.Sscan(lineF[0], &line)
	q := findIRQ(&h, line)
	if q == nil || len(eth1.IRQs) != 1 || len(eth2.IRQs) != 1 || eth1.IRQs[0] != line || eth2.IRQs[0] != line {
		t.Fatalf("the shared line %d: %+v; eth1 IRQs %v, eth2 IRQs %v, want both [%d]", line, q, eth1.IRQs, eth2.IRQs, line)
	}
	others := append([]string{q.Device}, q.SharedWith...)
	if strings.Join(others, ",") != "eth1,eth2" || q.Queue != nil {
		t.Errorf("IRQ %d: device %q shared with %v, queue %v; want eth1 shared with eth2, no queue", line, q.Device, q.SharedWith, q.Queue)
	}
	for _, d := range []string{"eth0", "eth1", "eth2"} {
		for _, p := range []string{"per-queue", "rps-spread"} {
			n := d + "-" + p
			for _, bad := range []string{"PLAN-FAIL", "APPLY-FAIL", "REVERT-FAIL", "NOT-EXACT"} {
				if strings.Contains(out, bad+" "+n+"\n") {
					t.Errorf("%s %s:\n%s", bad, n, out)
				}
			}
			if !strings.Contains(out, "\nEXACT "+n+"\n") || !strings.Contains(out, "\nCHANGED "+n+"\n") {
				t.Errorf("%s: want a change, reverted byte-exact", n)
			}
			pl, err := plan.Parse(n+".yaml", []byte(section(out, "@@PLAN "+n)))
			if err != nil {
				t.Fatalf("%s: %v", n, err)
			}
			if f := strings.Fields(field(out, "LINE-DURING "+n)); len(f) != 1 || f[0] != lineF[1] {
				t.Errorf("%s moved the shared line %d: %v while in force, %s before", n, line, f, lineF[1])
			}
			switch {
			case d == "eth0" && p == "per-queue":
				placed := 0
				for _, e := range pl.IRQs {
					if e.IRQ != nil && queueIRQs[*e.IRQ] {
						placed++
					}
				}
				if placed != len(queueIRQs) {
					t.Errorf("per-queue on vmxnet3 placed %d of its %d queue IRQs: %+v", placed, len(queueIRQs), pl.IRQs)
				}
			case d != "eth0" && p == "per-queue":
				other := map[string]string{"eth1": "eth2", "eth2": "eth1"}[d]
				want := fmt.Sprintf("%s's one interrupt line, IRQ %d, is shared with %s and left where it is", d, line, other)
				if len(pl.IRQs) != 0 || len(pl.RxQueues) == 0 || !strings.Contains(pl.RxQueues[0].Reason, want) {
					t.Errorf("per-queue on %s: IRQs %+v, rx queues %+v; want no IRQ entry and a reason with %q", d, pl.IRQs, pl.RxQueues, want)
				}
			}
		}
	}
}
