package lab

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// systemdScript runs in the systemd guest, in two boots.
const systemdScript = `
phase=$(cat /var/lib/lab-phase 2>/dev/null || echo 1)
rps() { cat /sys/class/net/eth0/queues/rx-0/rps_cpus | sed 's/^[0,]*//'; }
case $phase in
1)
  echo "PID1 $(cat /proc/1/comm)"
  echo "PKG $(dpkg-query -W -f='${Version}' irqpilot)"
  echo "RPS-BEFORE $(rps)"
  i=0; until systemctl is-active -q irqbalance || [ $i -ge 120 ]; do sleep 1; i=$((i+1)); done
  echo "IRQB-BEFORE $(systemctl is-active irqbalance)"
  cat > /tmp/ib.yaml <<PLAN
version: 1
policy: hand
why: the lab's service manager checks
irqbalance:
  mode: stop
  reason: the lab stops its unit through systemd
PLAN
  irqpilot apply /tmp/ib.yaml > /tmp/ib.out 2>&1; echo "IRQB-APPLY $?"
  echo "IRQB-STOPPED $(systemctl is-active irqbalance) $(pgrep -x irqbalance || echo none)"
  echo "IRQB-STOPJOBS $(journalctl -u irqbalance -o cat --no-pager | grep -c '^Stopping irqbalance')"
  irqpilot revert > /tmp/ibr.out 2>&1; echo "IRQB-REVERT $?"
  echo "IRQB-AFTER $(systemctl is-active irqbalance)"
  cat /tmp/ib.out /tmp/ibr.out | sed 's/^/IRQB-LOG /'
  cat > /tmp/p.yaml <<PLAN
version: 1
policy: hand
why: the lab's persistence checks
rx_queues:
  - device: eth0
    rps_cpus: 4-7
    reason: lab, re-applied at boot
  - device: eth2
    rps_cpus: 5
    reason: lab, a NIC hot-added after boot (the udev rule)
PLAN
  irqpilot persist /tmp/p.yaml > /tmp/persist.out 2>&1 || { echo PERSIST-FAIL; cat /tmp/persist.out; }
  echo "ENABLED-BOOT $(systemctl is-enabled irqpilot-apply.service 2>&1)"
  echo 2 > /var/lib/lab-phase
  touch /run/lab-reboot
  ;;
2)
  echo "AFTER-REBOOT-RPS $(rps)"
  echo "BOOT-UNIT $(systemctl show -p Result --value irqpilot-apply.service) $(systemctl show -p ExecMainStatus --value irqpilot-apply.service)"
  echo "@@HOST:plug@@"
  i=0; until [ -e /sys/class/net/eth2 ] || [ $i -ge 1500 ]; do sleep 0.2; i=$((i+1)); done
  i=0; until [ "$(cat /sys/class/net/eth2/queues/rx-0/rps_cpus 2>/dev/null | sed 's/^[0,]*//')" = 20 ] || [ $i -ge 600 ]; do sleep 0.5; i=$((i+1)); done
  echo "UDEV-RPS $(cat /sys/class/net/eth2/queues/rx-0/rps_cpus 2>/dev/null | sed 's/^[0,]*//') $((i/2))s"
  mkdir -p /etc/systemd/system/irqpilot-agent.service.d
  printf '[Service]\nWatchdogSec=6s\nTimeoutAbortSec=3s\nRestartSec=1s\n' > /etc/systemd/system/irqpilot-agent.service.d/lab.conf
  systemctl daemon-reload
  systemctl start irqpilot-agent.service; echo "AGENT-START $?"
  echo "AGENT-ACTIVE $(systemctl is-active irqpilot-agent)"
  pid=$(systemctl show -p MainPID --value irqpilot-agent)
  n0=$(systemctl show -p NRestarts --value irqpilot-agent)
  kill -STOP $pid
  i=0; until [ "$(systemctl show -p NRestarts --value irqpilot-agent)" -gt "$n0" ] || [ $i -ge 300 ]; do sleep 1; i=$((i+1)); done
  echo "WATCHDOG-RESTARTS $(($(systemctl show -p NRestarts --value irqpilot-agent) - n0)) ${i}s"
  echo "WATCHDOG-KILLED $(journalctl -u irqpilot-agent --no-pager -o cat | grep -c 'Watchdog timeout')"
  i=0; until systemctl is-active -q irqpilot-agent || [ $i -ge 300 ]; do sleep 1; i=$((i+1)); done
  newpid=$(systemctl show -p MainPID --value irqpilot-agent)
  if [ "$newpid" != "$pid" ] && [ "$newpid" != 0 ]; then echo "AGENT-NEWPID yes"; else echo "AGENT-NEWPID no"; fi
  echo 0 > /sys/class/net/eth0/queues/rx-0/rps_cpus
  i=0; until [ "$(rps)" = f0 ] || [ $i -ge 300 ]; do sleep 1; i=$((i+1)); done
  echo "REPAIRED-RPS $(rps)"
  systemctl stop irqpilot-agent; echo "AGENT-STOP $?"
  echo "AFTER-STOP-RPS $(rps)"
  echo "--- agent journal"; journalctl -u irqpilot-agent --no-pager -o cat | tail -20
  ;;
esac
`

// TestLabSystemd: in a Debian guest with systemd as PID 1 and the .deb
// installed, a plan that stops irqbalance stops its unit through systemd
// and revert starts it again, the boot unit re-applies a persisted plan after a reboot, the
// udev rule applies it to a NIC hot-added later, the
// agent's unit starts when the agent reports ready, the watchdog kills a
// hung agent and systemd restarts it, the restarted agent repairs drift,
// and `systemctl stop` leaves the applied settings in force (as
// documented).
func TestLabSystemd(t *testing.T) {
	needLab(t)
	if os.Getenv("LAB_SYSTEMD") == "" {
		t.Skip("the systemd guest builds a Debian root and boots twice (several minutes): make test-lab runs it (LAB_SYSTEMD=1)")
	}
	if _, err := exec.LookPath("mmdebstrap"); err != nil {
		t.Skip("no mmdebstrap (make test installs it)")
	}
	deb := buildDeb(t, "")
	s := labShapes(t)[0]
	r := runGuest(t, Options{Shape: s,
		Systemd: true, Debs: []string{deb}, Script: systemdScript,
		// Two boots and waits of minutes each on a loaded machine: the
		// guest's own waits bound the steps, this only the whole.
		Timeout: 30 * time.Minute,
		Host:    map[string]func(*Monitor) error{"plug": func(m *Monitor) error { return m.AddNIC("hot0") }}})
	out := r.Output
	t.Logf("%s ran in %s (two boots):\n%s", s.Name, r.Elapsed.Round(100e6), out)
	want := map[string]func(string) bool{
		"PID1": func(v string) bool { return v == "systemd" },
		// irqbalance stopped and started again through systemd's own
		// socket, not by signals: the unit's state follows the plan.
		"IRQB-BEFORE":  func(v string) bool { return v == "active" },
		"IRQB-APPLY":   func(v string) bool { return v == "0" },
		"IRQB-STOPPED": func(v string) bool { return v == "inactive none" },
		// systemd's own stop job ran ("Stopping irqbalance…"): not the
		// SIGTERM that follows a stop the manager refused.
		"IRQB-STOPJOBS":     func(v string) bool { return v == "1" },
		"IRQB-REVERT":       func(v string) bool { return v == "0" },
		"IRQB-AFTER":        func(v string) bool { return v == "active" },
		"ENABLED-BOOT":      func(v string) bool { return v == "enabled" },
		"AFTER-REBOOT-RPS":  func(v string) bool { return v == "f0" },
		"UDEV-RPS":          func(v string) bool { return strings.HasPrefix(v, "20 ") },
		"BOOT-UNIT":         func(v string) bool { return v == "success 0" },
		"AGENT-START":       func(v string) bool { return v == "0" },
		"AGENT-ACTIVE":      func(v string) bool { return v == "active" },
		"WATCHDOG-RESTARTS": func(v string) bool { return !strings.HasPrefix(v, "0 ") && v != "" },
		"WATCHDOG-KILLED":   func(v string) bool { return v != "" && v != "0" }, // systemd's "Watchdog timeout", not another failure
		"AGENT-NEWPID":      func(v string) bool { return v == "yes" },
		"REPAIRED-RPS":      func(v string) bool { return v == "f0" }, // the plan's 4-7, put back by the restarted agent
		"AGENT-STOP":        func(v string) bool { return v == "0" },
		"AFTER-STOP-RPS":    func(v string) bool { return v == "f0" }, // stop leaves the plan in force
	}
	for k, ok := range want {
		if v := field(out, k); !ok(v) {
			t.Errorf("%s = %q", k, v)
		}
	}
	if field(out, "RPS-BEFORE") != "" {
		t.Errorf("eth0 rx-0 had RPS before the plan: %q", field(out, "RPS-BEFORE"))
	}
}

// buildDeb builds the Debian package with the project's own script, at
// version (empty: the script's default from git describe), into a new
// directory.
func buildDeb(t *testing.T, version string) string {
	t.Helper()
	dir := t.TempDir()
	b := exec.Command("../../scripts/build-deb.sh", dir)
	// The guest installs it and the test throws it away: the fastest xz.
	b.Env = append(os.Environ(), "DEB_XZ_LEVEL=0")
	if version != "" {
		b.Env = append(b.Env, "VERSION="+version)
	}
	if out, err := b.CombinedOutput(); err != nil {
		t.Fatalf("build-deb.sh: %v\n%s", err, out)
	}
	debs, _ := filepath.Glob(filepath.Join(dir, "irqpilot_*.deb"))
	if len(debs) != 1 {
		t.Fatalf("build-deb.sh made %v", debs)
	}
	return debs[0]
}
