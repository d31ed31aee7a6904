package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

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
