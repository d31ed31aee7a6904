package main

import (
	"bytes"
	"reflect"
	"strings"
	"testing"
)

// A spec's KEY=VALUE fields stay with it; a configuration with options
// after a spec ("latency/busypoll=50") starts a new one.
func TestSplitConfigs(t *testing.T) {
	for in, want := range map[string][]string{
		"default,spec:app=0,rps=1,auto":            {"default", "spec:app=0,rps=1", "auto"},
		"spec:app=0,latency/busypoll=50":           {"spec:app=0", "latency/busypoll=50"},
		"spec:app=0,client=1,spec:rps=off,flows=8": {"spec:app=0,client=1", "spec:rps=off,flows=8"},
		"spec:app=0,rps=1#best,default#aa":         {"spec:app=0,rps=1#best", "default#aa"},
	} {
		if got := splitConfigs(in); !reflect.DeepEqual(got, want) {
			t.Errorf("splitConfigs(%q) = %q, want %q", in, got, want)
		}
	}
}

// A --baseline that names no configuration is refused before anything is
// measured or started (a typo would otherwise run every round and then
// compare nothing).
func TestBenchBaselineChecked(t *testing.T) {
	root := newRootCmd()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs([]string{"bench", "--workload", "memcached", "--configs", "default,default#aa,auto", "--baseline", "#best"})
	err := root.Execute()
	if err == nil || !strings.Contains(err.Error(), `--baseline: baseline "#best" is not one of`) {
		t.Fatalf("bench --baseline #best: %v", err)
	}
	if strings.Contains(out.String(), "round 1") {
		t.Errorf("measured before refusing:\n%s", out.String())
	}
}
