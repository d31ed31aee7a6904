package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/irqpilot/irqpilot/internal/bench/testbed"
	"github.com/irqpilot/irqpilot/internal/kernel"
	"github.com/irqpilot/irqpilot/internal/livetest"
)

// testbed up --prefix names the namespaces with it; testbed down without a
// name removes the test beds this user made in --state-dir, says which,
// and leaves another user's.
func TestTestbedPrefixAndDownMineLive(t *testing.T) {
	livetest.NeedRoot(t)
	sd := filepath.Join(t.TempDir(), "state")
	const prefix = "huxtb-"
	var ids []string
	t.Cleanup(func() { // whatever a failure left
		for _, id := range ids {
			for _, ns := range []string{id + "-s", id + "-c"} {
				if _, err := os.Stat(filepath.Join(kernel.RunNetNSDir, ns)); err == nil {
					_ = kernel.DelNetns(ns)
				}
			}
		}
	})
	for i := 0; i < 2; i++ {
		out, errOut, err := runIrqpilot(t, "testbed", "up", "--prefix", prefix, "--state-dir", sd, "--json")
		if err != nil {
			t.Fatalf("testbed up: %v: %s", err, errOut)
		}
		var tb testbed.Testbed
		if err := json.Unmarshal([]byte(out), &tb); err != nil {
			t.Fatalf("%v: %s", err, out)
		}
		ids = append(ids, tb.ID)
		if !regexp.MustCompile(`^huxtb-[0-9a-f]{6}$`).MatchString(tb.ID) || tb.ServerNS != tb.ID+"-s" || tb.ClientNS != tb.ID+"-c" {
			t.Fatalf("test bed %+v: want ID, namespaces named with %s", tb, prefix)
		}
		for _, ns := range []string{tb.ServerNS, tb.ClientNS} {
			if _, err := os.Stat(filepath.Join(kernel.RunNetNSDir, ns)); err != nil {
				t.Errorf("namespace %s: %v", ns, err)
			}
		}
	}
	// Another user's test bed in the same state directory (its namespaces
	// were never made: down must not look for them).
	other := "huxtb-0fa1e0"
	b, _ := json.Marshal(testbed.Testbed{ID: other, Prefix: prefix, ServerNS: other + "-s", ClientNS: other + "-c", Queues: 1})
	f := filepath.Join(sd, other+".json")
	if err := os.WriteFile(f, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(f, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	// Another admin's, made through sudo: root's file, another login.
	sudoed := "huxtb-0fa1e1"
	b, _ = json.Marshal(testbed.Testbed{ID: sudoed, Prefix: prefix, ServerNS: sudoed + "-s", ClientNS: sudoed + "-c", Queues: 1, User: 54321})
	if err := os.WriteFile(filepath.Join(sd, sudoed+".json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := runIrqpilot(t, "testbed", "up", "--prefix", "Bad/prefix", "--state-dir", sd); err == nil {
		t.Errorf("testbed up accepted the prefix Bad/prefix")
	}

	out, errOut, err := runIrqpilot(t, "testbed", "down", "--state-dir", sd)
	if err != nil {
		t.Fatalf("testbed down: %v: %s%s", err, out, errOut)
	}
	for _, id := range ids {
		if !strings.Contains(out, "removed "+id+" (namespaces "+id+"-s, "+id+"-c)") {
			t.Errorf("testbed down does not list %s as removed:\n%s", id, out)
		}
		for _, ns := range []string{id + "-s", id + "-c"} {
			if _, err := os.Stat(filepath.Join(kernel.RunNetNSDir, ns)); err == nil {
				t.Errorf("namespace %s is still there", ns)
			}
		}
	}
	if strings.Contains(out, "removed "+other) || strings.Contains(out, "removed "+sudoed) || !strings.Contains(out, "left "+other+", "+sudoed+": made by another user") {
		t.Errorf("testbed down and another user's test bed, and another login's made through sudo:\n%s", out)
	}
	if _, err := os.Stat(f); err != nil {
		t.Errorf("another user's state file: %v", err)
	}
	// Named, it goes.
	if out, errOut, err := runIrqpilot(t, "testbed", "down", "--state-dir", sd, other); err != nil || !strings.Contains(out, "removed "+other) {
		t.Errorf("testbed down %s: %v: %s%s", other, err, out, errOut)
	}
}
