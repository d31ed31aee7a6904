package setting

import (
	"reflect"
	"strings"
	"testing"
)

func TestParseKV(t *testing.T) {
	m, keys, err := parseKV("  tx_frames=9 rx_usecs=8\tadaptive_rx=off ")
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"tx_frames", "rx_usecs", "adaptive_rx"}; !reflect.DeepEqual(keys, want) {
		t.Errorf("keys = %v, want %v (the order of the value)", keys, want)
	}
	if want := map[string]string{"tx_frames": "9", "rx_usecs": "8", "adaptive_rx": "off"}; !reflect.DeepEqual(m, want) {
		t.Errorf("fields = %v, want %v", m, want)
	}
	for _, bad := range []struct{ in, msg string }{
		{"rx_usecs", `"rx_usecs" is not key=value`},
		{"=8", `"=8" is not key=value`},
		{"rx_usecs=", `"rx_usecs=" is not key=value`},
		{"rx_usecs=1 rx_usecs=2", "field rx_usecs given twice"},
		{"  ", "no key=value field"},
	} {
		_, _, err := parseKV(bad.in)
		if err == nil || !strings.Contains(err.Error(), bad.msg) {
			t.Errorf("parseKV(%q) error = %v, want %q", bad.in, err, bad.msg)
		}
	}
}

// numbered returns a Coalesce whose every field holds a distinct value, so a
// test sees any field that changes when it should not.
