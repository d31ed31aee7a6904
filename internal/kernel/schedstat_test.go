package kernel

import (
	"os"
	"testing"
)

func TestProcRunNanos(t *testing.T) {
	fs := New(tree(t, map[string]string{
		"proc/10/task/10/schedstat": "1500 200 7\n",
		"proc/10/task/11/schedstat": "25 0 1\n",
		"proc/10/task/12/schedstat": "",
		"proc/20/task/20/schedstat": "x 0 1\n",
		"proc/30/task/":             "",
	}))
	if n, err := fs.ProcRunNanos(10); err != nil || n != 1525 {
		t.Errorf("ProcRunNanos(10) = %d, %v, want 1525", n, err)
	}
	if _, err := fs.ProcRunNanos(20); err == nil {
		t.Error("ProcRunNanos of a broken schedstat: no error")
	}
	for _, pid := range []int{30, 40} {
		if _, err := fs.ProcRunNanos(pid); err == nil {
			t.Errorf("ProcRunNanos(%d) without threads: no error", pid)
		}
	}
	if n, err := New("/").ProcRunNanos(os.Getpid()); err != nil || n == 0 {
		t.Errorf("ProcRunNanos(self) = %d, %v", n, err)
	}
}
