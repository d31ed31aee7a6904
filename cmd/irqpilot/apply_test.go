package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/irqpilot/irqpilot/internal/host"
	"github.com/irqpilot/irqpilot/internal/hostgen"
	"github.com/irqpilot/irqpilot/internal/livetest"
	"github.com/irqpilot/irqpilot/internal/plan"
	"github.com/irqpilot/irqpilot/internal/setting"
)

// steeringState reads every steering file of vq0 inside the namespace plus
// the global RFS table size and every IRQ's affinity: what apply may touch.
func steeringState(t *testing.T, ns *vethNamespace) map[string]string {
	t.Helper()
	script := `for f in /sys/class/net/vq0/queues/*/rps_cpus /sys/class/net/vq0/queues/*/rps_flow_cnt /sys/class/net/vq0/queues/*/xps_cpus /proc/sys/net/core/rps_sock_flow_entries /proc/irq/*/smp_affinity_list; do printf '%s=' "$f"; cat "$f" 2>/dev/null || echo; done`
	out, err := exec.Command("ip", append([]string{"netns", "exec", ns.name, "sh", "-c"}, script)...).Output()
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		k, v, _ := strings.Cut(l, "=")
		m[k] = v
	}
	return m
}

// steeringOnly drops the plan's IRQ entries: this test checks each policy's
// steering of a veth it created; moving the machine's real IRQs (eth0's,
// the console's) is tested once, with restore, in internal/apply.
func steeringOnly(t *testing.T, file string) {
	t.Helper()
	p, err := plan.LoadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	p.IRQs = nil
	data, err := p.MarshalFile()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// Live: in a fresh namespace with a 4-queue veth pair, each policy's plan is
// applied, checked in sysfs, re-applied (no change) and reverted (every file
// byte-identical to before).
func TestApplyPoliciesLive(t *testing.T) {
	ns := newVethNamespace(t)
	livetest.RestoreAllIRQs(t, true)
	for _, policy := range []string{"rps-spread", "per-queue", "colocate", "dedicated-core", "auto"} {
		t.Run(policy, func(t *testing.T) {
			dir := t.TempDir()
			state := filepath.Join(dir, "state")
			planFile := filepath.Join(dir, "plan.yaml")
			invRunIn(t, ns.exec, "plan", "--policy", policy, "--device", "vq0", "--irqbalance", "leave", "-o", planFile)
			steeringOnly(t, planFile)
			before := steeringState(t, ns)

			out := invRunIn(t, ns.exec, "apply", "--json", "--state-dir", state, planFile)
			var res struct {
				Journal string `json:"journal"`
				Changed int    `json:"changed"`
				Entries []struct {
					Kind, Path, Value, Status string
				} `json:"entries"`
			}
			if err := json.Unmarshal(out, &res); err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
			if policy == "auto" {
				// The namespace's veth is idle: auto finds no evidence of
				// harm and its plan changes nothing (issue 10).
				if res.Changed != 0 || res.Journal != "" {
					t.Fatalf("auto changed an idle device: %s", out)
				}
				if after := steeringState(t, ns); fmt.Sprint(after) != fmt.Sprint(before) {
					t.Errorf("auto's empty plan changed steering")
				}
				return
			}
			if res.Changed == 0 || res.Journal == "" {
				t.Fatalf("apply changed nothing: %s", out)
			}
			after := steeringState(t, ns)
			for _, e := range res.Entries {
				if e.Status != "done" || e.Path == "" {
					continue
				}
				got := after["/"+e.Path]
				if same, err := setting.Same(setting.Kind(e.Kind), got, e.Value); err != nil || !same {
					if e.Kind == "rps-flow-cnt" || e.Kind == "sysctl" {
						continue // rounded to a power of two by the kernel; apply checked it
					}
					t.Errorf("%s = %q after apply, want %q", e.Path, got, e.Value)
				}
			}

			var again struct {
				Journal string         `json:"journal"`
				Changed int            `json:"changed"`
				Error   string         `json:"error"`
				Entries []journalEntry `json:"entries"`
			}
			runJSON(t, ns.exec, 0, &again, "apply", "--json", "--state-dir", state, planFile)
			if again.Changed != 0 || again.Journal != "" || again.Error != "" || countStatus(again.Entries, "done") != 0 {
				t.Errorf("re-apply changed something: %+v", again)
			}

			invRunIn(t, ns.exec, "revert", "--state-dir", state)
			reverted := steeringState(t, ns)
			for k, v := range before {
				if reverted[k] != v {
					t.Errorf("%s: %q before, %q after revert", k, v, reverted[k])
				}
			}
			var hist historyOut
			runJSON(t, ns.exec, 0, &hist, "--json", "history", "--state-dir", state)
			states := map[string]string{}
			for _, j := range hist.Journals {
				states[j.ID] = j.State
			}
			if states[res.Journal] != "reverted" {
				t.Errorf("history does not list %s as reverted: %v", res.Journal, states)
			}
		})
	}
}

// Bad plans are refused with a message naming the problem, and nothing is
// written: the steering files are compared before and after.
func TestApplyRejectsBadPlansLive(t *testing.T) {
	ns := newVethNamespace(t)
	livetest.RestoreAllIRQs(t, true)
	cases := map[string]string{
		"malformed YAML":  "version: 1\nrx_queues: [\n",
		"unknown IRQ":     "version: 1\nirqs:\n  - irq: 99999\n    cpus: 0\n    reason: r\n",
		"offline CPU":     "version: 1\nrx_queues:\n  - device: vq0\n    rps_cpus: 0-4095\n    reason: r\n",
		"missing device":  "version: 1\nrx_queues:\n  - device: nosuch0\n    rps_cpus: 0\n    reason: r\n",
		"duplicate entry": "version: 1\nrx_queues:\n  - device: vq0\n    queue: 1\n    rps_cpus: 0\n    reason: r\n  - device: vq0\n    queue: 1\n    rps_cpus: 1\n    reason: r\n",
		"no reason":       "version: 1\nrx_queues:\n  - device: vq0\n    queue: 1\n    rps_cpus: 0\n",
	}
	want := map[string]string{
		"malformed YAML": "bad.yaml:", "unknown IRQ": "99999", "offline CPU": "do not exist",
		"missing device": "nosuch0", "duplicate entry": "vq0", "no reason": "reason",
	}
	for name, body := range cases {
		t.Run(strings.ReplaceAll(name, " ", "-"), func(t *testing.T) {
			dir := t.TempDir()
			f := filepath.Join(dir, "bad.yaml")
			os.WriteFile(f, []byte(body), 0o644)
			before := steeringState(t, ns)
			cmd := selfCmd(ns.exec, "apply", "--state-dir", filepath.Join(dir, "state"), f)
			out, err := cmd.CombinedOutput()
			if err == nil {
				t.Fatalf("bad plan applied:\n%s", out)
			}
			if !strings.Contains(string(out), want[name]) {
				t.Errorf("error does not name %q:\n%s", want[name], out)
			}
			if after := steeringState(t, ns); fmt.Sprint(after) != fmt.Sprint(before) {
				t.Errorf("files changed although the plan was rejected")
			}
			if _, err := os.Stat(filepath.Join(dir, "state", "journal")); err == nil {
				if js, _ := filepath.Glob(filepath.Join(dir, "state", "journal", "*.json")); len(js) > 0 {
					t.Errorf("a journal was written for a rejected plan: %v", js)
				}
			}
		})
	}
}

func TestApplyRefusesSnapshotAndNonRootHint(t *testing.T) {
	cmd := selfCmd(nil, "apply", "--snapshot", "../../testdata/snapshots/veth4.tar.gz", "x.yaml")
	out, err := cmd.CombinedOutput()
	if exitCode(err) != 2 {
		t.Errorf("apply on a snapshot: %v, want exit 2\n%s", err, out)
	}
	wantLines(t, string(out), "irqpilot: apply writes kernel settings; on a --snapshot it runs only with --dry-run (what the plan would change on the captured machine)")
}

// apply --dry-run on a capture runs the live code against it: the plan
// made from the capture is diffed against the captured values. (That this
// machine's journals are not mixed in is apply.ConvergeOptions.Captured;
// the state directory here is empty, so this test does not show it.)
func TestApplyDryRunOnSnapshot(t *testing.T) {
	snap := "../../testdata/snapshots/veth4.tar.gz"
	planFile := filepath.Join(t.TempDir(), "p.yaml")
	invRun(t, "--snapshot", snap, "plan", "--policy", "per-queue", "-o", planFile)
	var got struct {
		DryRun    bool             `json:"dry_run"`
		Entries   []setting.Change `json:"entries"`
		Leftovers []setting.Change `json:"leftovers"`
	}
	runJSON(t, nil, 0, &got, "--snapshot", snap, "apply", "--dry-run", "--json", "--state-dir", t.TempDir(), planFile)
	if !got.DryRun || len(got.Leftovers) != 0 {
		t.Errorf("dry_run %v, leftovers %v", got.DryRun, got.Leftovers)
	}
	changes := 0
	for _, e := range got.Entries {
		if e.Kind == setting.KindIRQAffinity && e.Status == setting.StatusPending {
			changes++
			if e.Old != "0-1" {
				t.Errorf("%s: changes from %q, want the captured 0-1", e.Target, e.Old)
			}
		}
	}
	if changes == 0 {
		t.Errorf("the per-queue plan changes no captured IRQ affinity: %+v", got.Entries)
	}
}

// `apply --dry-run /dev/zero` died of a fatal out-of-memory and a FIFO hung
// apply for ever. Both are refused, naming the file, with exit 2, before
// anything else is read.
func TestApplyRefusesPlanThatIsNotAFile(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "plan.fifo")
	if err := unix.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ file, want string }{{"/dev/zero", "character device"}, {fifo, "FIFO"}} {
		cmd := selfCmd(nil, "apply", "--dry-run", "--state-dir", filepath.Join(t.TempDir(), "s"), tc.file)
		var errb strings.Builder
		cmd.Stderr = &errb
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			if code := exitCode(err); code != 2 || !strings.Contains(errb.String(), tc.want) || !strings.Contains(errb.String(), tc.file) {
				t.Errorf("apply %s: exit %d\n%s", tc.file, code, errb.String())
			}
		case <-time.After(60 * time.Second):
			cmd.Process.Kill()
			<-done
			t.Errorf("apply %s still running after 60s", tc.file)
		}
	}
	_ = os.Remove(fifo)
}

// apply on a generated host (a tree never moves an interrupt, as an idle
// x86 IRQ is not moved until it fires): the write is done and said to be
// pending; applying again changes nothing and still says so.
func TestApplyPendingMove(t *testing.T) {
	root, h := livetest.GenHost(t, hostgen.Spec{CPUs: 8, Packages: 1, Nodes: 1, ThreadsPerCore: 2, Offline: hostgen.NoOffline,
		NICs: []hostgen.NICSpec{{Name: "eth0", Driver: "ice", Slot: 3, Queues: 4}}, NVMeQueues: -1})
	q := h.IRQ(*h.NIC("eth0").RxQueues[3].IRQ)
	lands := *q.EffectiveAffinity
	want := 0
	for lands.Contains(want) {
		want++
	}
	plan := filepath.Join(t.TempDir(), "plan.yaml")
	if err := os.WriteFile(plan, []byte("version: 1\nirqs:\n  - device: eth0\n    queue: 3\n    cpus: \""+strconv.Itoa(want)+"\"\n    reason: test\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	state := filepath.Join(t.TempDir(), "state")
	note := "effective " + lands.String() + ": " + host.MovePendingNote
	summary := ": " + host.MovePendingNote + "; the kernel moves it when it next fires"
	for i, status := range []string{"done", "unchanged"} {
		out := string(invRun(t, "--root", root, "apply", "--state-dir", state, plan))
		var row string
		for _, l := range strings.Split(out, "\n") {
			if strings.Contains(l, "irq "+strconv.Itoa(q.Number)) && strings.Contains(l, "smp_affinity_list") {
				row = l
			}
		}
		if !strings.HasPrefix(row, status) || !strings.HasSuffix(strings.TrimSpace(row), note) {
			t.Errorf("apply %d: irq %d row %q, want %s noted %q\n%s", i+1, q.Number, row, status, note, out)
		}
		if !strings.Contains(out, summary) {
			t.Errorf("apply %d: no line saying the move is pending:\n%s", i+1, out)
		}
	}
}
