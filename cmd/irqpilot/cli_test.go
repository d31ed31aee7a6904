package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/irqpilot/irqpilot/internal/agent"
)

// --version prints the version (-ldflags -X, else the module's, else
// "devel"), the commit when the build recorded one, and the Go release.
func TestFormatVersion(t *testing.T) {
	vcs := func(rev, modified string) []debug.BuildSetting {
		return []debug.BuildSetting{{Key: "vcs.revision", Value: rev}, {Key: "vcs.modified", Value: modified}}
	}
	tests := []struct {
		name     string
		override string
		bi       *debug.BuildInfo
		want     string
	}{
		{"no build info", "", nil, "devel ("},
		{"devel build", "", &debug.BuildInfo{GoVersion: "go1.99", Main: debug.Module{Version: "(devel)"}}, "devel (go1.99)"},
		{"module version and commit", "", &debug.BuildInfo{GoVersion: "go1.99", Main: debug.Module{Version: "v1.2.3"}, Settings: vcs("abc123", "false")},
			"v1.2.3 (commit abc123, go1.99)"},
		{"modified tree", "", &debug.BuildInfo{GoVersion: "go1.99", Main: debug.Module{Version: "(devel)"}, Settings: vcs("abc123", "true")},
			"devel (commit abc123, modified, go1.99)"},
		{"ldflags override", "v9.0.0", &debug.BuildInfo{GoVersion: "go1.99", Main: debug.Module{Version: "v1.2.3"}}, "v9.0.0 (go1.99)"},
	}
	for _, tc := range tests {
		if got := formatVersion(tc.override, tc.bi); !strings.HasPrefix(got, tc.want) {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
	out := string(invRun(t, "--version"))
	if !strings.HasPrefix(out, "irqpilot ") || !strings.Contains(out, "go1.") {
		t.Errorf("--version: %q", out)
	}
}

// A mistyped verb or subcommand fails (exit 2) with cobra's suggestion; a
// missing argument says what is missing and shows the usage line.
func TestCLIMistakes(t *testing.T) {
	tests := []struct {
		args []string
		want []string
	}{
		{[]string{"inventroy"}, []string{`unknown command "inventroy" for "irqpilot"`, "Did you mean this?\n\tinventory"}},
		{[]string{"coalesce", "shwo"}, []string{`unknown command "shwo" for "irqpilot coalesce"`, "Did you mean this?\n\tshow"}},
		{[]string{"sim", "coalese"}, []string{`unknown command "coalese" for "irqpilot sim"`, "\tcoalesce"}},
		{[]string{"testbed", "stat"}, []string{`unknown command "stat" for "irqpilot testbed"`, "\tstatus"}},
		{[]string{"apply"}, []string{"apply needs a plan file", "usage: irqpilot apply PLAN"}},
		{[]string{"report", "-o", "x.html"}, []string{"report needs at least one recording", "usage: irqpilot report run.jsonl"}},
		{[]string{"report", "a.jsonl", "--prometheus", "http://localhost:9090", "-o", "x.png"}, []string{"give recordings or --prometheus, not both"}},
		{[]string{"persist"}, []string{"persist needs a plan file", "or --remove", "usage: irqpilot persist PLAN | --remove"}},
		{[]string{"persist", "--remove", "plan.yaml"}, []string{"persist --remove takes no plan (got plan.yaml)"}},
		{[]string{"--root", sharedFixtures + "/node_exporter", "plan", "--policy", "per-queu"},
			[]string{`unknown policy "per-queu" (known: auto, colocate, dedicated-core, efficiency, latency, per-queue, rps-spread); did you mean per-queue?`}},
	}
	for _, tc := range tests {
		cmd := selfCmd(nil, tc.args...)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		err := cmd.Run()
		if exitCode(err) != 2 {
			t.Errorf("irqpilot %s: exit %d, want 2\n%s", strings.Join(tc.args, " "), exitCode(err), stderr.String())
		}
		for _, w := range tc.want {
			if !strings.Contains(stderr.String(), w) {
				t.Errorf("irqpilot %s: stderr lacks %q:\n%s", strings.Join(tc.args, " "), w, stderr.String())
			}
		}
	}
	// A group verb alone still prints its help.
	if out := string(invRun(t, "coalesce")); !strings.Contains(out, "Available Commands:") || !strings.Contains(out, "show") {
		t.Errorf("coalesce alone: %s", out)
	}
}

// Two command trees share no flag: what one parses does not leak into the
// next (the flags live in each tree's options, not in package variables).
func TestRootCmdsIndependent(t *testing.T) {
	var a, b bytes.Buffer
	ra := newRootCmd()
	ra.SetArgs([]string{"--json", "--root", sharedFixtures + "/node_exporter", "inventory"})
	ra.SetOut(&a)
	if err := ra.Execute(); err != nil {
		t.Fatal(err)
	}
	rb := newRootCmd()
	rb.SetArgs([]string{"--root", sharedFixtures + "/node_exporter", "inventory"})
	rb.SetOut(&b)
	if err := rb.Execute(); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(a.String(), "{") || strings.HasPrefix(b.String(), "{") {
		t.Errorf("--json leaked between trees or was lost:\n%.80s\n---\n%.80s", a.String(), b.String())
	}
}

// Progress goes to stderr only when it is a terminal or forced; it is one
// line rewritten in place and cleared at the end.
func TestProgressOnlyWhenTerminalOrForced(t *testing.T) {
	var quiet bytes.Buffer
	p := newProgress(&quiet, false)
	p.show("record: %d of %d", 1, 3)
	p.wait(10*time.Millisecond, "doctor")
	p.done()
	if quiet.Len() != 0 {
		t.Errorf("progress written to a non-terminal without --progress: %q", quiet.String())
	}
	var forced bytes.Buffer
	p = newProgress(&forced, true)
	p.show("record: 1 of 3 samples")
	p.show("record: 2 of 3")
	p.done()
	got := forced.String()
	if !strings.HasPrefix(got, "\rrecord: 1 of 3 samples\rrecord: 2 of 3        ") || !strings.HasSuffix(got, "\r") || strings.Contains(got, "\n") {
		t.Errorf("progress line %q", got)
	}
}

// Flag values the agent used to accept silently (a default in their place,
// or a local file read as root) are refused before anything runs, exit 2,
// naming the flag.
func TestAgentRefusesBadFlags(t *testing.T) {
	pf := filepath.Join(t.TempDir(), "plan.yaml")
	if err := os.WriteFile(pf, []byte("version: 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	sd := filepath.Join(t.TempDir(), "state")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--keep-journals", "-5"}, "--keep-journals -5: must be at least 1"},
		{[]string{"--keep-journals", "0"}, "--keep-journals 0: must be at least 1"},
		{[]string{"--pingpong-limit", "-1"}, "--pingpong-limit -1: must be at least 1"},
		{[]string{"--pingpong-window", "-1s"}, "--pingpong-window -1s: must not be negative"},
		{[]string{"--adapt-budget", "-1"}, "--adapt-budget -1: must be at least 1"},
		{[]string{"--adapt-window", "0"}, "--adapt-window 0: must be at least 1"},
		{[]string{"--adapt-persist", "0"}, "--adapt-persist 0: must be at least 1"},
		{[]string{"--adapt-dwell", "-5m"}, "--adapt-dwell -5m0s: must not be negative"},
		{[]string{"--device", ""}, `--device "": an empty interface name`},
		{[]string{"--device", "va0,,vb0"}, `--device "": an empty interface name`},
		{[]string{"--device", "a/b"}, `--device "a/b": not an interface name`},
		{[]string{"--device", "averyveryverylongname"}, "longer than 15 characters"},
		{[]string{"--adapt-metric-query", "file:///etc/shadow"}, "--adapt-metric-query \"file:///etc/shadow\": give a Prometheus http:// or https:// URL"},
		{[]string{"--adapt-metric-query", "http:///api/v1/query"}, "give a Prometheus http:// or https:// URL"},
		{[]string{"--state-dir", ""}, "--state-dir is empty"},
		{[]string{"--device", "va0", "--include-default-route"}, "--include-default-route goes without --device"},
		{[]string{"--machine-wide"}, "with --plan FILE and no --adapt the file alone says what is in scope"},
		// With --plan and no --adapt these shape nothing: refused, not ignored.
		{[]string{"--device", "va0"}, "--device shapes the plans --policy and --adapt make; with --plan FILE and no --adapt it would be ignored"},
		{[]string{"--app", "comm:nginx"}, "--app shapes the plans --policy and --adapt make; with --plan FILE and no --adapt it would be ignored"},
		{[]string{"--adapt-metric-command", "echo 1"}, "--adapt-metric-command is used only with --adapt"},
		{[]string{"--adapt-metric-query", "http://p:9090/api/v1/query?query=up"}, "--adapt-metric-query is used only with --adapt"},
		{[]string{"--adapt-dwell", "1m"}, "--adapt-dwell is used only with --adapt"},
	} {
		args := append([]string{"--root", sharedFixtures + "/node_exporter", "agent", "--plan", pf, "--state-dir", sd, "--listen", ""}, tc.args...)
		cmd := selfCmd(nil, args...)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		err := cmd.Run()
		if exitCode(err) != 2 || !strings.Contains(stderr.String(), tc.want) {
			t.Errorf("agent %s: exit %d, want 2 with %q:\n%s", strings.Join(tc.args, " "), exitCode(err), tc.want, stderr.String())
		}
	}
	if _, err := os.Stat(sd); err == nil {
		t.Errorf("a refused agent created its state directory %s", sd)
	}
}

// status prints a rejected reload (and says the previous plan stays).
func TestStatusPrintsRejectedReload(t *testing.T) {
	var b bytes.Buffer
	printStatus(&b, &agent.Status{Plan: "/etc/irqpilot/plan.yaml", LastReload: &agent.ReloadResult{Rejected: true,
		Error: "/etc/irqpilot/plan.yaml:2: version: given twice (first at line 1)"}})
	if !strings.Contains(b.String(), "REJECTED; the previous plan stays in force: /etc/irqpilot/plan.yaml:2: version: given twice") {
		t.Errorf("status output:\n%s", b.String())
	}
	b.Reset()
	printStatus(&b, &agent.Status{Plan: "p", LastReload: &agent.ReloadResult{}})
	if strings.Contains(b.String(), "REJECTED") {
		t.Errorf("an applied reload printed as rejected:\n%s", b.String())
	}
}

// scripts/install-deps.sh keeps an administrator's policy-rc.d: during the
// install ours (exit 101) is in place, afterwards theirs is back byte for
// byte with its mode; with none before, none after. apt-get and dpkg-query
// are stand-ins on PATH; nothing is installed.
func TestInstallDepsKeepsPolicyRCD(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("no bash")
	}
	script, err := filepath.Abs("../../scripts/install-deps.sh")
	if err != nil {
		t.Fatal(err)
	}
	for _, existing := range []bool{true, false} {
		dir := t.TempDir()
		bin := filepath.Join(dir, "bin")
		os.Mkdir(bin, 0o755)
		prc := filepath.Join(dir, "policy-rc.d")
		seen := filepath.Join(dir, "seen")
		fake := map[string]string{
			"dpkg-query": "#!/bin/sh\nexit 1\n", // every package missing
			"apt-get":    "#!/bin/sh\n[ \"$1\" = install ] && cat " + prc + " > " + seen + "\nexit 0\n",
			"id":         "#!/bin/sh\necho 0\n",
		}
		for name, body := range fake {
			if err := os.WriteFile(filepath.Join(bin, name), []byte(body), 0o755); err != nil {
				t.Fatal(err)
			}
		}
		theirs := "#!/bin/sh\n# the administrator's own\nexit 0\n"
		if existing {
			if err := os.WriteFile(prc, []byte(theirs), 0o750); err != nil {
				t.Fatal(err)
			}
		}
		cmd := exec.Command("bash", script, "memcached")
		cmd.Env = append(os.Environ(), "PATH="+bin+":"+os.Getenv("PATH"), "IRQPILOT_POLICY_RC_D="+prc)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("install-deps.sh: %v\n%s", err, out)
		}
		during, _ := os.ReadFile(seen)
		if !strings.Contains(string(during), "exit 101") {
			t.Errorf("existing=%v: policy-rc.d during the install was %q, want ours (exit 101)", existing, during)
		}
		after, err := os.ReadFile(prc)
		switch {
		case existing && (err != nil || string(after) != theirs):
			t.Errorf("the administrator's policy-rc.d is %q (%v) after the install", after, err)
		case existing:
			if fi, _ := os.Stat(prc); fi.Mode().Perm() != 0o750 {
				t.Errorf("its mode is %v, want 0750", fi.Mode().Perm())
			}
		case !existing && err == nil:
			t.Errorf("policy-rc.d left behind: %q", after)
		}
		if left, _ := filepath.Glob(prc + ".irqpilot-*"); len(left) > 0 {
			t.Errorf("temporary files left: %v", left)
		}
	}
}

// TestLabRefusesBeforeBooting: bad input is refused with an error that
// names it, before anything is fetched or booted.
func TestLabRefusesBeforeBooting(t *testing.T) {
	dyn := "/bin/true" // Debian's, dynamically linked
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"lab", "--shape", "huge", "--", "true"}, `unknown lab shape "huge" (known: big, nics, server, small)`},
		{[]string{"lab"}, "give a command to run in the guest after --, or --shell"},
		{[]string{"lab", "--shell", "--", "true"}, "--shell takes no command"},
		{[]string{"lab", "--timeout", "0s", "--", "true"}, "--timeout must be positive"},
		{[]string{"lab", "--guest-binary", dyn, "--", "true"}, "is dynamically linked"},
		{[]string{"lab", "--fleet", "0", "--fleet-dir", "/nonexistent"}, "--fleet needs a number of guests"},
		{[]string{"lab", "--fleet", "2", "--", "true"}, "--fleet takes neither --shell nor a command"},
	} {
		cmd := selfCmd(nil, tc.args...)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		err := cmd.Run()
		if err == nil || !strings.Contains(stderr.String(), tc.want) {
			t.Errorf("irqpilot %s: err %v, stderr %q, want %q", strings.Join(tc.args, " "), err, stderr.String(), tc.want)
		}
	}
	if _, err := os.Stat(dyn); err != nil {
		t.Fatalf("%s: %v", dyn, err)
	}
}

// lab --list names the shapes and their machines; the server is 2
// packages × 8 cores × 2 threads in 4 nodes, in the table as in --json.
func TestLabList(t *testing.T) {
	type shape struct {
		Name                         string
		CPUs, Packages, Cores, Nodes int
		Threads                      int
	}
	var list []struct {
		Name     string `json:"name"`
		CPUs     int    `json:"cpus"`
		Packages int    `json:"packages"`
		Cores    int    `json:"cores_per_package"`
		Threads  int    `json:"threads_per_core"`
		Nodes    int    `json:"nodes"`
		Note     string `json:"note"`
	}
	runJSON(t, nil, 0, &list, "--json", "lab", "--list")
	got := map[string]shape{}
	notes := map[string]string{}
	for _, l := range list {
		got[l.Name] = shape{l.Name, l.CPUs, l.Packages, l.Cores, l.Nodes, l.Threads}
		notes[l.Name] = l.Note
	}
	for _, name := range []string{"small", "big"} {
		if _, ok := got[name]; !ok {
			t.Errorf("lab --list --json lacks %s: %+v", name, list)
		}
	}
	if diff := cmp.Diff(shape{"server", 32, 2, 8, 4, 2}, got["server"]); diff != "" {
		t.Errorf("server shape (-want +got):\n%s", diff)
	}
	if !strings.HasPrefix(notes["server"], "32 vCPUs: 2 packages × 8 cores × 2 threads in 4 nodes;") {
		t.Errorf("server's machine: %q", notes["server"])
	}
	// The table: a row per shape, its CPUs, nodes and machine.
	rows := map[string]string{}
	for _, l := range strings.Split(string(invRun(t, "lab", "--list")), "\n") {
		if f := strings.Fields(l); len(f) > 3 {
			rows[f[0]] = strings.Join(f[1:], " ")
		}
	}
	for _, name := range []string{"small", "server", "big"} {
		s := got[name]
		if want := fmt.Sprintf("%d %d %s", s.CPUs, s.Nodes, notes[name]); rows[name] != want {
			t.Errorf("lab --list row %s: %q, want %q", name, rows[name], want)
		}
	}
}

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
