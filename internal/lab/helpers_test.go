package lab

import (
	"context"
	"testing"
)

// runGuest boots o's guest and runs its script (Run), on this machine
// (hostFS) with the guest's irqpilot and the test's log unless o names
// its own; an error booting or running fails the test.
func runGuest(t *testing.T, o Options) *Result {
	t.Helper()
	if o.FS == nil {
		o.FS = hostFS
	}
	if o.Irqpilot == "" {
		o.Irqpilot = guestIrqpilot(t)
	}
	if o.Log == nil {
		o.Log = testLog{t}
	}
	r, err := Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// eachCase runs f as a subtest on every case of labMatrix: every shape of
// LAB_SHAPES on every kernel of LAB_KERNELS.
func eachCase(t *testing.T, f func(*testing.T, labCase)) {
	t.Helper()
	needLab(t)
	runCases(t, labMatrix(t), f)
}

// eachKernel runs f as a subtest on every case of labKernelCases: the first
// shape of LAB_SHAPES on every kernel of LAB_KERNELS.
func eachKernel(t *testing.T, f func(*testing.T, labCase)) {
	t.Helper()
	needLab(t)
	runCases(t, labKernelCases(t), f)
}

func runCases(t *testing.T, cases []labCase, f func(*testing.T, labCase)) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.Name(), func(t *testing.T) { f(t, c) })
	}
}
