package kernel

import "testing"

// The directories host names in its notes, and HasProcIRQ, on the capture
// of the 2-CPU virtio VM (testdata/vm2cpu) and on an empty tree.
func TestIRQDirs(t *testing.T) {
	fs := New("testdata/vm2cpu")
	if !fs.HasProcIRQ() {
		t.Error("HasProcIRQ: false on a capture with /proc/irq")
	}
	if New(t.TempDir()).HasProcIRQ() {
		t.Error("HasProcIRQ: true on an empty tree")
	}
	if p := SysIRQPath(36); p != "sys/kernel/irq/36" || !fs.Exists(p) {
		t.Errorf("SysIRQPath(36) = %q, not in the capture", p)
	}
	for _, p := range []string{SysIRQDir, ProcIRQDir, InterruptsPath} {
		if !fs.Exists(p) {
			t.Errorf("%s not in the capture", p)
		}
	}
}
