package kernel

import (
	"slices"
	"testing"
)

// /proc/locks as this kernel writes it: a holder, a waiter ("->") on the
// same file, a POSIX lock and a FLOCK on another file.
func TestFlockHolders(t *testing.T) {
	text := `1: FLOCK  ADVISORY  WRITE 25493 fe:00:10124402 0 EOF
1: -> FLOCK  ADVISORY  WRITE 25511 fe:00:10124402 0 EOF
2: POSIX  ADVISORY  WRITE 812 00:1a:4711 0 EOF
3: FLOCK  ADVISORY  WRITE 900 00:1a:4711 0 EOF
`
	if got := flockHolders(text, 0xfe<<8, 10124402); !slices.Equal(got, []int{25493}) {
		t.Errorf("holders of fe:00:10124402 = %v, want [25493]", got)
	}
	if got := flockHolders(text, 0x1a, 4711); !slices.Equal(got, []int{900}) {
		t.Errorf("holders of 00:1a:4711 = %v, want [900]", got)
	}
	if got := flockHolders(text, 0x1a, 1); len(got) != 0 {
		t.Errorf("holders of an unlocked file = %v", got)
	}
}
