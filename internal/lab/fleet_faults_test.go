package lab

import (
	"context"
	"fmt"
	"regexp"
	"testing"
	"time"
)

// The fleet's faults: each is done to a running fleet with its plans in
// force, and each step waits until the fleet is back to what it was (the
// plan in force, the agent running, eth0's steering as applied) and
// reports how long that took.

// converge polls g's state until ok accepts it, for at most d, and returns
// the time it took and the last state.
func (fx *fleetFixture) converge(t *testing.T, g *Guest, d time.Duration, ok func(guestState) bool) (time.Duration, guestState) {
	t.Helper()
	start := time.Now()
	var last guestState
	var lastErr error
	for time.Since(start) < d {
		s, err := fx.tryState(g, 90*time.Second)
		if err == nil {
			last = s
			if ok(s) {
				return time.Since(start), s
			}
		}
		lastErr = err
		time.Sleep(2 * time.Second)
	}
	t.Fatalf("%s did not converge within %s: last state %+v (last error %v)", g.Name, d, last, lastErr)
	return 0, last
}

var reIRQLine = regexp.MustCompile(`(?m)^IRQ \d+ `)

// shape is the steering with the IRQ numbers left out: after a NIC is
// plugged again its queues have new IRQ numbers, in the same order.
func (s guestState) shape() string { return reIRQLine.ReplaceAllString(s.steering, "IRQ # ") }

// inForce: the agent runs, applying the plan would write nothing, and the
// steering (IRQ numbers aside) is want's.
func inForce(want guestState) func(guestState) bool {
	return func(s guestState) bool {
		return s.agentActive == "active" && s.pending == 0 && s.shape() == want.shape() && s.plan == want.plan
	}
}

// faultReboot reboots g from inside (systemctl reboot) and waits until the
// plan is back in force after the boot (the enabled agent starts and
// applies it). Returns when the reboot was asked for, and the time to
// converge from then.
func (fx *fleetFixture) faultReboot(t *testing.T, g *Guest, want guestState) (time.Time, time.Duration) {
	t.Helper()
	at := time.Now()
	fx.ssh(t, g, "systemd-run --on-active=1 systemctl reboot")
	// Wait until it has gone down, so that the old system's answer does
	// not count as converged.
	for deadline := time.Now().Add(3 * time.Minute); fx.f.greets(g.Addr); {
		if time.Now().After(deadline) {
			t.Fatalf("%s still answers 3 minutes after systemctl reboot", g.Name)
		}
		time.Sleep(time.Second)
	}
	_, s := fx.converge(t, g, 10*time.Minute, func(s guestState) bool { return inForce(want)(s) && s.agentPID != want.agentPID })
	took := time.Since(at)
	t.Logf("fault: %s rebooted; plan in force again, agent pid %s (was %s), %s after systemctl reboot", g.Name, s.agentPID, want.agentPID, took.Round(time.Second))
	return at, took
}

// faultKillAgent kills g's agent with SIGKILL by its PID: systemd restarts
// it (Restart=on-failure) and nothing it applied is lost meanwhile.
func (fx *fleetFixture) faultKillAgent(t *testing.T, g *Guest, want guestState) time.Duration {
	t.Helper()
	pid := fx.state(t, g).agentPID
	start := time.Now()
	// Killed, not yet restarted (RestartSec=5s): the settings stay. Read
	// in the same session as the kill, so that a slow SSH round trip does
	// not read them after the restart.
	after := fx.ssh(t, g, "kill -9 "+pid+" && sleep 1 && echo \"UNIT $(systemctl is-active irqpilot-agent.service)\"; "+stateScript)
	out := field(after, "UNIT")
	if s := parseState(after); s.agentPID == pid || s.shape() != want.shape() {
		t.Errorf("%s: after kill -9 of the agent (pid %s, now %q) the steering is\n%s\nwant\n%s", g.Name, pid, s.agent, s.steering, want.steering)
	}
	took, s := fx.converge(t, g, 3*time.Minute, func(s guestState) bool {
		return inForce(want)(s) && s.agentPID != pid && s.agentPID != "0"
	})
	t.Logf("fault: %s agent (pid %s) killed with SIGKILL (unit then %q); restarted as pid %s, plan in force, %s after the kill", g.Name, pid, out, s.agentPID, took.Round(time.Second))
	return time.Since(start)
}

// faultReplugNIC unplugs g's NIC on the bridge through QEMU's monitor and
// plugs it again: the NIC comes back as eth0 with new IRQs, and the agent
// applies the plan to it.
func (fx *fleetFixture) faultReplugNIC(t *testing.T, g *Guest, want guestState) (unplug, took time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	before := fx.state(t, g)
	start := time.Now()
	unplug, err := g.ReplugNIC(ctx)
	if err != nil {
		t.Fatal(err)
	}
	plugged := time.Now()
	_, s := fx.converge(t, g, 5*time.Minute, inForce(want))
	took = time.Since(plugged)
	if s.steering == before.steering {
		t.Logf("%s: the re-plugged NIC's IRQs kept their numbers", g.Name)
	}
	t.Logf("fault: %s NIC unplugged (%s until QEMU removed it) and plugged again; eth0's plan in force %s after the re-plug (%s in all)\n%s",
		g.Name, unplug.Round(time.Millisecond), took.Round(time.Second), time.Since(start).Round(time.Second), s.steering)
	return unplug, took
}

// faultPrometheus stops the fleet's Prometheus for off and starts it
// again: the agents do not notice (same PIDs, plans in force); returns the
// stop window and the time until Prometheus has a fresh sample of every
// agent again.
func (fx *fleetFixture) faultPrometheus(t *testing.T, off time.Duration) (from, to time.Time, took time.Duration) {
	t.Helper()
	pids := map[string]string{}
	for _, g := range fx.f.Guests {
		pids[g.Name] = fx.state(t, g).agentPID
	}
	from = time.Now()
	if err := fx.prom.Stop(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(off)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if err := fx.prom.Start(ctx); err != nil {
		t.Fatal(err)
	}
	to = time.Now()
	for {
		n, err := fx.query(fmt.Sprintf(`count(timestamp(up{job="irqpilot"} == 1) > %d)`, to.Unix()))
		if err == nil && n == float64(len(fx.f.Guests)) {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("Prometheus did not scrape every agent again after its restart (last: %v, %v)", n, err)
		}
		time.Sleep(time.Second)
	}
	took = time.Since(to)
	for _, g := range fx.f.Guests {
		s := fx.state(t, g)
		if s.agentPID != pids[g.Name] || s.agentActive != "active" || s.pending != 0 {
			t.Errorf("%s while Prometheus was away: agent %s (pid was %s), pending %d", g.Name, s.agent, pids[g.Name], s.pending)
		}
	}
	t.Logf("fault: Prometheus (pid %d now) stopped for %s; agents untouched; every agent scraped again %s after its restart",
		fx.prom.PID(), off, took.Round(time.Second))
	return from, to, took
}

// gapsCover reports whether the report's "data missing" lines for host
// cover a span that overlaps [from, to].
func gapsCover(out, host string, from, to time.Time) bool {
	re := regexp.MustCompile(`(?m)^data missing: ` + regexp.QuoteMeta(host) + `: no data from (\S+) to (\S+) `)
	for _, m := range re.FindAllStringSubmatch(out, -1) {
		a, err1 := time.Parse(time.RFC3339, m[1])
		b, err2 := time.Parse(time.RFC3339, m[2])
		if err1 == nil && err2 == nil && a.Before(to) && b.After(from) {
			return true
		}
	}
	return false
}

// states is every guest's state now, by name.
func (fx *fleetFixture) states(t *testing.T) map[string]guestState {
	t.Helper()
	out := map[string]guestState{}
	for _, g := range fx.f.Guests {
		out[g.Name] = fx.state(t, g)
	}
	return out
}

// faultsAndReport does the faults one after another, then draws the
// report from Prometheus and checks that it names the holes the reboot and
// Prometheus's absence left.
func (fx *fleetFixture) faultsAndReport(t *testing.T, bin string, since time.Time, before, after [2]time.Time) {
	t.Helper()
	gs := fx.f.Guests
	want := fx.states(t)
	rebooted := gs[len(gs)-1]
	rebootAt, rebootTook := fx.faultReboot(t, rebooted, want[rebooted.Name])
	want[rebooted.Name] = fx.state(t, rebooted)
	killTook := fx.faultKillAgent(t, gs[0], want[gs[0].Name])
	unplug, replugTook := fx.faultReplugNIC(t, gs[0], want[gs[0].Name])
	promFrom, promTo, promTook := fx.faultPrometheus(t, time.Minute)
	// Let rate() see two scrapes after the hole, then draw.
	time.Sleep(6 * fleetScrape)
	out, png := fx.report(t, bin, since, before, after)
	if !gapsCover(out, rebooted.Name, rebootAt, rebootAt.Add(rebootTook)) {
		t.Errorf("the report does not say that %s's data is missing while it rebooted (%s + %s):\n%s", rebooted.Name, rebootAt.Format(time.RFC3339), rebootTook.Round(time.Second), out)
	}
	for _, g := range gs {
		if !gapsCover(out, g.Name, promFrom, promTo) {
			t.Errorf("the report does not say that %s's data is missing while Prometheus was stopped (%s to %s):\n%s", g.Name, promFrom.Format(time.RFC3339), promTo.Format(time.RFC3339), out)
		}
	}
	t.Logf("faults: reboot %s converged in %s; kill -9 agent %s in %s; NIC re-plug %s: unplug %s, converged %s after the re-plug; Prometheus stopped 1m, every agent scraped again %s after its restart; chart %s",
		rebooted.Name, rebootTook.Round(time.Second), gs[0].Name, killTook.Round(time.Second), gs[0].Name, unplug.Round(time.Second), replugTook.Round(time.Second), promTook.Round(time.Second), png)
}

// coreFaults are the faults make test does: the last guest rebooted from
// inside and the first guest's agent killed, each waited for until the
// plan is in force again.
func (fx *fleetFixture) coreFaults(t *testing.T) {
	t.Helper()
	gs := fx.f.Guests
	want := fx.states(t)
	rebooted := gs[len(gs)-1]
	_, rebootTook := fx.faultReboot(t, rebooted, want[rebooted.Name])
	killTook := fx.faultKillAgent(t, gs[0], want[gs[0].Name])
	t.Logf("faults: reboot %s converged in %s; kill -9 agent %s in %s",
		rebooted.Name, rebootTook.Round(time.Second), gs[0].Name, killTook.Round(time.Second))
}
