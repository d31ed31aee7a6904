package bench

import (
	"os"
	"path/filepath"
	"testing"
)

// bench created /var/lib/irqpilot (and its bench directory) 0755 with
// MkdirAll. Both are now made under the state directory's rules: 0700.
func TestBenchStateDirPrivate(t *testing.T) {
	base := filepath.Join(t.TempDir(), "lib")
	if err := os.Mkdir(base, 0o755); err != nil {
		t.Fatal(err)
	}
	state := filepath.Join(base, "irqpilot", "bench")
	if err := secureStateDir(state); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{filepath.Dir(state), state} {
		fi, err := os.Stat(d)
		if err != nil {
			t.Fatal(err)
		}
		if perm := fi.Mode().Perm(); perm != 0o700 {
			t.Errorf("%s created %04o, want 0700", d, perm)
		}
	}
	// An existing parent is left as it is (it may be /tmp); a state
	// directory others can write is refused.
	if fi, _ := os.Stat(base); fi.Mode().Perm() != 0o755 {
		t.Errorf("existing parent %s changed to %04o", base, fi.Mode().Perm())
	}
	open := filepath.Join(base, "open")
	os.Mkdir(open, 0o777)
	os.Chmod(open, 0o777)
	if err := secureStateDir(filepath.Join(open, "bench")); err == nil {
		t.Errorf("a bench state directory below a world-writable directory was accepted")
	}
}
