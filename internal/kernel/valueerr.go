package kernel

// ValueError is a kernel file that was read but does not hold what it
// should: Path names the file as the kernel does
// ("/sys/class/net/eth0/queues/rx-0/rps_cpus"), Err says what is wrong with
// its value. A caller that names the file itself (in an Unavailable entry)
// can report Err alone.
type ValueError struct {
	Path string
	Err  error
}

func (e *ValueError) Error() string { return e.Path + ": " + e.Err.Error() }

func (e *ValueError) Unwrap() error { return e.Err }
