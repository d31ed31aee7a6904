package main

import (
	"reflect"
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
