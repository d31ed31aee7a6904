package kernel

import "testing"

// A namespace is not told by its inode alone: the kernel reuses a deleted
// namespace's inode. Cookies decide where both have one; otherwise a
// recorded name must match.
func TestNetNSSame(t *testing.T) {
	old := NetNS{Inode: 4026532300, Name: "ns-a", Cookie: 7}
	for _, c := range []struct {
		here NetNS
		same bool
	}{
		{NetNS{Inode: 4026532300, Name: "ns-a", Cookie: 7}, true},
		{NetNS{Inode: 4026532300, Name: "ns-b", Cookie: 7}, true}, // one namespace, mounted under another name too
		{NetNS{Inode: 4026532300, Name: "ns-a", Cookie: 9}, false},
		{NetNS{Inode: 4026532300, Name: "ns-b", Cookie: 9}, false},
		{NetNS{Inode: 4026532301, Name: "ns-a", Cookie: 7}, false},
		{NetNS{Inode: 4026532300, Name: "ns-a"}, true},
		{NetNS{Inode: 4026532300, Name: "ns-b"}, false},
		{NetNS{Inode: 4026532300}, false},
	} {
		if got := old.Same(c.here); got != c.same {
			t.Errorf("%+v.Same(%+v) = %v, want %v", old, c.here, got, c.same)
		}
	}
	if !(NetNS{Inode: 5}).Same(NetNS{Inode: 5, Name: "x", Cookie: 3}) {
		t.Error("a journal without name or cookie (older versions) is told by its inode")
	}
}

// The cookie of this process's namespace is read, and stays the same.
func TestNetnsCookie(t *testing.T) {
	a, b := netnsCookie(), netnsCookie()
	if a == 0 {
		t.Skip("this kernel gives no namespace cookie (before Linux 5.14)")
	}
	if a != b {
		t.Errorf("cookie %d then %d", a, b)
	}
}
