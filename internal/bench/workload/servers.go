package workload

// The workloads whose server is not a network testbed's memcached, nginx
// or udp sink (workload.go): MariaDB with sysbench and sockperf in the
// testbed, fio on the real disk, and any command.

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/irqpilot/irqpilot/internal/bench/testbed"
	"github.com/irqpilot/irqpilot/internal/kernel"
	"github.com/irqpilot/irqpilot/internal/program"
	"golang.org/x/sys/unix"
)

// mysqlPort is where MariaDB listens, on testbed.ServerAddr only.
const mysqlPort = 3306

// DefaultTableSize is the rows of sysbench's table when --table-size is
// not given: small enough to prepare in about a second and to sit in the
// buffer pool whole, so every point select is served from memory and
// what a run measures is the network path and the server's threads, not
// the disk (the shape of the point-select write-up).
const DefaultTableSize = 10000

// DBOptions shape the mysql workload.
type DBOptions struct {
	Testbed testbed.Options
	// Connections is sysbench's --threads: client threads, one
	// connection each (the concurrency; default 16).
	Connections int
	// TableSize is the rows of sbtest1 (default DefaultTableSize).
	TableSize int
}

// DBWorkload is MariaDB in the testbed's server namespace and sysbench's
// oltp_point_select (one primary-key SELECT per transaction, 100 % reads)
// from the client namespace.
//
// The server is started by bench with its own data directory in the
// testbed's temporary directory (mariadb-install-db, then mariadbd by PID,
// --no-defaults so nothing of the machine's /etc/mysql applies), listens
// on testbed.ServerAddr:3306 inside the server namespace and on a socket
// in that 0700 directory, and is stopped by PID with the testbed.
type DBWorkload struct {
	Opts DBOptions
	served
}

// NewDB returns the mysql workload.
func NewDB(o DBOptions) (*DBWorkload, error) {
	if o.Connections <= 0 {
		o.Connections = 16
	}
	if o.TableSize <= 0 {
		o.TableSize = DefaultTableSize
	}
	if o.Testbed.Queues <= 0 {
		o.Testbed.Queues = 1
	}
	for _, prog := range []string{"mariadb-install-db", "mariadbd", "mariadb", "sysbench"} {
		if _, err := exec.LookPath(prog); err != nil {
			return nil, fmt.Errorf("mysql workload needs %s (Debian packages mariadb-server, mariadb-client, sysbench): %w", prog, err)
		}
	}
	return &DBWorkload{Opts: o}, nil
}

// Name implements Workload.
func (w *DBWorkload) Name() string { return "mysql" }

// Server is the running mariadbd (zero before Prepare).
func (w *DBWorkload) Server() testbed.Proc { return w.srv }

func (w *DBWorkload) sock() string { return filepath.Join(w.TB.Dir, "mysqld.sock") }

// Prepare brings the testbed up, initialises a data directory, starts
// mariadbd, creates the sysbench user and prepares the table.
func (w *DBWorkload) Prepare() (AppInfo, error) {
	tb, err := testbed.Up(w.Opts.Testbed)
	if err != nil {
		return AppInfo{}, err
	}
	w.TB = tb
	if err := w.startServer(); err != nil {
		_ = tb.Down()
		w.TB = nil
		return AppInfo{}, fmt.Errorf("mysql workload: %w", err)
	}
	return w.app([]int{w.srv.PID}), nil
}

func (w *DBWorkload) startServer() error {
	tb := w.TB
	data := filepath.Join(tb.Dir, "mysql-data")
	// Inside the server namespace too: the bootstrap server listens on
	// nothing, but should it, only there.
	if _, err := program.Output(context.Background(), tb.Programs(), "ip", "netns", "exec", tb.ServerNS, "mariadb-install-db", "--no-defaults",
		"--datadir="+data, "--user=root", "--auth-root-authentication-method=socket",
		"--skip-test-db", "--skip-name-resolve"); err != nil {
		return err
	}
	var err error
	w.srv, err = tb.StartProgram("mariadbd", "mariadbd", 0, "mariadbd", "--no-defaults",
		"--datadir="+data, "--user=root", "--socket="+w.sock(), "--pid-file="+filepath.Join(tb.Dir, "mysqld.pid"),
		"--bind-address="+testbed.ServerAddr, "--port="+strconv.Itoa(mysqlPort), "--skip-name-resolve",
		"--skip-log-bin", "--innodb-buffer-pool-size=128M", "--max-connections=1024",
		"--log-error="+filepath.Join(tb.Dir, "mariadbd.err"))
	if err != nil {
		return err
	}
	// InnoDB's start on a busy machine takes longer than the testbed's
	// usual 5 s.
	if err := tb.WaitListen(mysqlPort, 60*time.Second); err != nil {
		b, _ := os.ReadFile(filepath.Join(tb.Dir, "mariadbd.err"))
		return fmt.Errorf("%w: %s", err, program.Tail(b, 400))
	}
	sql := "CREATE DATABASE sbtest; CREATE USER 'sbtest'@'" + testbed.ClientAddr + "' IDENTIFIED BY 'sbtest'; " +
		"GRANT ALL ON sbtest.* TO 'sbtest'@'" + testbed.ClientAddr + "';"
	if _, err := program.Output(context.Background(), tb.Programs(), "ip", "netns", "exec", tb.ServerNS, "mariadb", "--no-defaults", "--socket="+w.sock(),
		"-uroot", "-e", sql); err != nil {
		return fmt.Errorf("create the sysbench user: %w", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	argv := w.client(append([]string{"sysbench"}, w.sysbenchArgs("prepare")...)...)
	if _, err := program.Output(ctx, tb.Programs(), argv...); err != nil {
		return fmt.Errorf("sysbench prepare: %w", err)
	}
	return nil
}

// sysbenchArgs are sysbench's arguments up to and including the command.
func (w *DBWorkload) sysbenchArgs(command string, extra ...string) []string {
	args := []string{"oltp_point_select", "--db-driver=mysql", "--mysql-host=" + testbed.ServerAddr,
		"--mysql-port=" + strconv.Itoa(mysqlPort), "--mysql-user=sbtest", "--mysql-password=sbtest", "--mysql-db=sbtest",
		"--tables=1", "--table-size=" + strconv.Itoa(w.Opts.TableSize)}
	return append(append(args, extra...), command)
}

// sockperfPort is where the sockperf server listens (UDP), on
// testbed.ServerAddr only.
const sockperfPort = 11111

// Sockperf modes.
const (
	SockperfPingPong  = "ping-pong"
	SockperfUnderLoad = "under-load"
)

// DefaultSockperfRate is under-load's messages per second when --rate is
// not given.
const DefaultSockperfRate = 10000

// sockperfReplyEvery is under-load's --reply-every: the server answers one
// message in this many, and each answer is one latency observation. With
// sockperf's default (100) a 3 s run at 10 000 msg/s has some 250
// observations, too few for a p99.9; with 10 it has some 2 500.
const sockperfReplyEvery = 10

// SockperfOptions shape the sockperf workload.
type SockperfOptions struct {
	Testbed testbed.Options
	// Mode is SockperfPingPong (one message in flight: the round trip
	// alone) or SockperfUnderLoad (a fixed rate, Rate messages per second).
	Mode string
	Rate int
}

// SockperfWorkload is a sockperf server (UDP) in the testbed's server
// namespace and sockperf ping-pong or under-load from the client
// namespace. Its objective is latency, lower is better: a run's figure of
// merit is the p99 (Result.LowerIsBetter), with p50 and p99.9 beside it,
// the message rate reached and the server's CPU time per message.
type SockperfWorkload struct {
	Opts SockperfOptions
	served
}

// NewSockperf returns the sockperf workload.
func NewSockperf(o SockperfOptions) (*SockperfWorkload, error) {
	switch o.Mode {
	case "":
		o.Mode = SockperfPingPong
	case SockperfPingPong, SockperfUnderLoad:
	default:
		return nil, fmt.Errorf("sockperf mode %q: want %s or %s", o.Mode, SockperfPingPong, SockperfUnderLoad)
	}
	if o.Rate <= 0 {
		o.Rate = DefaultSockperfRate
	}
	if o.Testbed.Queues <= 0 {
		o.Testbed.Queues = 1
	}
	if _, err := exec.LookPath("sockperf"); err != nil {
		return nil, fmt.Errorf("sockperf workload needs sockperf (Debian package sockperf): %w", err)
	}
	return &SockperfWorkload{Opts: o}, nil
}

// Name implements Workload.
func (w *SockperfWorkload) Name() string { return "sockperf" }

// Server is the running sockperf server (zero before Prepare).
func (w *SockperfWorkload) Server() testbed.Proc { return w.srv }

// LowerIsBetter: the workload's objective is a latency.
func (w *SockperfWorkload) LowerIsBetter() bool { return true }

// Prepare brings the testbed up and starts the server.
func (w *SockperfWorkload) Prepare() (AppInfo, error) {
	tb, err := testbed.Up(w.Opts.Testbed)
	if err != nil {
		return AppInfo{}, err
	}
	w.TB = tb
	w.srv, err = tb.StartProgram("sockperf", "sockperf", 0, "sockperf", "server", "-i", testbed.ServerAddr, "-p", strconv.Itoa(sockperfPort))
	if err == nil {
		err = w.waitUDP(10 * time.Second)
	}
	if err != nil {
		_ = tb.Down()
		w.TB = nil
		return AppInfo{}, fmt.Errorf("sockperf workload: %w", err)
	}
	return w.app([]int{w.srv.PID}), nil
}

// waitUDP waits until the server's UDP socket is bound (in the server
// namespace's socket table): a message sent before would be lost.
func (w *SockperfWorkload) waitUDP(timeout time.Duration) error {
	if err := w.TB.WaitBound(sockperfPort, timeout); err != nil {
		b, _ := os.ReadFile(filepath.Join(w.TB.Dir, "sockperf.log"))
		return fmt.Errorf("sockperf server: %w: %s", err, program.Tail(b, 300))
	}
	return nil
}

// Run implements Workload: the client for d, and the server's CPU time
// over it (the sum over its threads of /proc/PID/task/TID/schedstat's
// time on CPU, in ns; the kernel's accounting at nanosecond resolution,
// where /proc/PID/stat's utime and stime count 10 ms ticks).
func (w *SockperfWorkload) Run(ctx context.Context, d time.Duration, s Placement) (Result, error) {
	secs := strconv.Itoa(max(1, int(d.Round(time.Second)/time.Second)))
	argv := w.client("sockperf", w.Opts.Mode, "-i", testbed.ServerAddr,
		"-p", strconv.Itoa(sockperfPort), "-t", secs)
	if w.Opts.Mode == SockperfUnderLoad {
		argv = append(argv, "--mps="+strconv.Itoa(w.Opts.Rate), "--reply-every="+strconv.Itoa(sockperfReplyEvery))
	}
	cpu0, err0 := procCPUNanos(w.Opts.Testbed.FS, w.srv.PID)
	out, err := runPinned(ctx, s, d, s.ClientCPUs, argv)
	cpu1, err1 := procCPUNanos(w.Opts.Testbed.FS, w.srv.PID)
	if err != nil {
		return Result{}, err
	}
	st, err := ParseSockperf(out)
	if err != nil {
		return Result{}, err
	}
	if err0 == nil && err1 == nil && st.TotalSent > 0 && cpu1 >= cpu0 {
		st.ServerCPUPerOp = float64(cpu1-cpu0) / 1e3 / float64(st.TotalSent)
	}
	return st.Result, nil
}

// procCPUNanos sums the time on CPU of every thread of pid on fs's
// machine, in ns.
func procCPUNanos(fs *kernel.FS, pid int) (uint64, error) { return fs.ProcRunNanos(pid) }

// StorageWorkload is fio random reads on a file on the real disk. Its IRQ is
// kernel-managed; what a configuration places is fio relative to it.
type StorageWorkload struct {
	// Dir holds the test file (default /var/tmp: the root disk).
	Dir    string
	SizeMB int
	// Engine is fio's ioengine: "libaio" (default) or "psync" (one
	// synchronous read at a time: latency-bound, the IRQ-to-thread
	// distance matters most).
	Engine string
	// IODepth of libaio (default 16; psync is always 1).
	IODepth int
	// FS is the machine the disk is on, the live one (the caller's
	// kernel.New("/")): Prepare finds the disk there (DiskOf).
	FS   *kernel.FS
	file string
}

// Name implements Workload.
func (w *StorageWorkload) Name() string { return "storage" }

// Prepare lays out the test file.
func (w *StorageWorkload) Prepare() (AppInfo, error) {
	if w.Dir == "" {
		w.Dir = "/var/tmp"
	}
	if w.SizeMB <= 0 {
		w.SizeMB = 256
	}
	switch w.Engine {
	case "":
		w.Engine = "libaio"
	case "libaio", "psync":
	default:
		return AppInfo{}, fmt.Errorf("storage workload: ioengine %q: want libaio or psync", w.Engine)
	}
	if w.Engine == "psync" {
		w.IODepth = 1
	}
	if w.IODepth <= 0 {
		w.IODepth = 16
	}
	if w.FS == nil {
		return AppInfo{}, fmt.Errorf("storage workload: no machine to find the disk on (StorageWorkload.FS)")
	}
	f, err := os.CreateTemp(w.Dir, "irqpilot-fio-*.dat")
	if err != nil {
		return AppInfo{}, err
	}
	w.file = f.Name()
	f.Close()
	if _, err := program.Output(context.Background(), w.FS.Programs(), "fio", "--name=layout", "--filename="+w.file, "--size="+strconv.Itoa(w.SizeMB)+"M",
		"--rw=write", "--bs=1M", "--create_only=0", "--end_fsync=1", "--output-format=terse"); err != nil {
		os.Remove(w.file)
		return AppInfo{}, fmt.Errorf("fio layout of %s: %w", w.file, err)
	}
	disk, err := DiskOf(w.FS, w.file)
	if err != nil {
		os.Remove(w.file)
		return AppInfo{}, fmt.Errorf("storage workload: %w", err)
	}
	return AppInfo{Disk: disk}, nil
}

// Run implements Workload.
func (w *StorageWorkload) Run(ctx context.Context, d time.Duration, s Placement) (Result, error) {
	secs := strconv.Itoa(max(1, int(d.Round(time.Second)/time.Second)))
	out, err := runPinned(ctx, s, d, s.AppCPUs, []string{"fio", "--name=randread", "--filename=" + w.file,
		"--size=" + strconv.Itoa(w.SizeMB) + "M", "--rw=randread", "--bs=4k", "--direct=1", "--ioengine=" + w.Engine,
		"--iodepth=" + strconv.Itoa(w.IODepth), "--runtime=" + secs, "--time_based", "--output-format=json"})
	if err != nil {
		return Result{}, err
	}
	return ParseFio(out)
}

// Close removes the test file.
func (w *StorageWorkload) Close() error {
	if w.file == "" {
		return nil
	}
	err := os.Remove(w.file)
	w.file = ""
	return err
}

// CommandWorkload runs any command; Pattern's first group is the figure of
// merit. The command runs under the setup's application CPUs.
type CommandWorkload struct {
	Argv    []string
	Pattern string
	Unit    string
}

// Name implements Workload.
func (w *CommandWorkload) Name() string { return "command" }

// Prepare checks the command exists.
func (w *CommandWorkload) Prepare() (AppInfo, error) {
	if len(w.Argv) == 0 {
		return AppInfo{}, fmt.Errorf("command workload: no command given")
	}
	if _, err := exec.LookPath(w.Argv[0]); err != nil {
		return AppInfo{}, fmt.Errorf("command workload: %w", err)
	}
	if _, err := ParsePattern(nil, w.Pattern, w.Unit); err != nil && strings.Contains(err.Error(), "capture group") {
		return AppInfo{}, err
	}
	return AppInfo{}, nil
}

// Run implements Workload. The command should run about d by itself; it is
// stopped after d plus 30 s.
func (w *CommandWorkload) Run(ctx context.Context, d time.Duration, s Placement) (Result, error) {
	out, err := runPinned(ctx, s, d, s.AppCPUs, w.Argv)
	if err != nil {
		return Result{}, err
	}
	return ParsePattern(out, w.Pattern, w.Unit)
}

// Close implements Workload.
func (w *CommandWorkload) Close() error { return nil }

// DiskOf names the whole-disk block device holding path (vda for a file on
// /dev/vda or /dev/vda1), from the file's device number and fs's
// /sys/dev/block/MAJ:MIN; fs is the machine path is on, the live one.
func DiskOf(fs *kernel.FS, path string) (string, error) {
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return "", fmt.Errorf("%s: %w", path, err)
	}
	major, minor := unix.Major(uint64(st.Dev)), unix.Minor(uint64(st.Dev))
	dev, err := fs.DiskOfDev(major, minor)
	if err != nil {
		return "", fmt.Errorf("%s is on device %d:%d, not a block device (%w)", path, major, minor, err)
	}
	return dev, nil
}
