package workload

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/irqpilot/irqpilot/internal/bench/testbed"
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
	TB   *testbed.Testbed
	srv  testbed.Proc
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
	return AppInfo{PIDs: []int{w.srv.PID}, Device: tb.ServerDev, NSRoot: tb.Root(), NetNS: tb.NetNSPath(), NAPIThreads: tb.NAPIThreads()}, nil
}

func (w *DBWorkload) startServer() error {
	tb := w.TB
	data := filepath.Join(tb.Dir, "mysql-data")
	// Inside the server namespace too: the bootstrap server listens on
	// nothing, but should it, only there.
	out, err := exec.Command("ip", "netns", "exec", tb.ServerNS, "mariadb-install-db", "--no-defaults",
		"--datadir="+data, "--user=root", "--auth-root-authentication-method=socket",
		"--skip-test-db", "--skip-name-resolve").CombinedOutput()
	if err != nil {
		return fmt.Errorf("mariadb-install-db: %v: %s", err, Tail(out, 400))
	}
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
		return fmt.Errorf("%w: %s", err, Tail(b, 400))
	}
	sql := "CREATE DATABASE sbtest; CREATE USER 'sbtest'@'" + testbed.ClientAddr + "' IDENTIFIED BY 'sbtest'; " +
		"GRANT ALL ON sbtest.* TO 'sbtest'@'" + testbed.ClientAddr + "';"
	if out, err := exec.Command("ip", "netns", "exec", tb.ServerNS, "mariadb", "--no-defaults", "--socket="+w.sock(),
		"-uroot", "-e", sql).CombinedOutput(); err != nil {
		return fmt.Errorf("create the sysbench user: %v: %s", err, Tail(out, 300))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if out, err := exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", tb.ClientNS, "sysbench"},
		w.sysbenchArgs("prepare")...)...).CombinedOutput(); err != nil {
		return fmt.Errorf("sysbench prepare: %v: %s", err, Tail(out, 400))
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

// Run implements Workload: sysbench oltp_point_select for d at the
// workload's concurrency.
func (w *DBWorkload) Run(ctx context.Context, d time.Duration, s Placement) (Result, error) {
	secs := strconv.Itoa(max(1, int(d.Round(time.Second)/time.Second)))
	argv := append([]string{"ip", "netns", "exec", w.TB.ClientNS, "sysbench"}, w.sysbenchArgs("run",
		"--threads="+strconv.Itoa(w.Opts.Connections), "--time="+secs, "--report-interval=0",
		"--percentile=99", "--histogram=on")...)
	out, err := runPinned(ctx, d, s.ClientCPUs, argv)
	if err != nil {
		return Result{}, err
	}
	return ParseSysbench(out)
}

// Close stops mariadbd (by PID) and removes the testbed.
func (w *DBWorkload) Close() error {
	if w.TB == nil {
		return nil
	}
	err := w.TB.Down()
	w.TB = nil
	return err
}

var (
	sysbenchTPS    = regexp.MustCompile(`(?m)^\s*transactions:\s+(\d+)\s+\(([0-9.]+) per sec\.\)`)
	sysbenchP99    = regexp.MustCompile(`(?m)^\s*99th percentile:\s+([0-9.]+)`)
	sysbenchErrors = regexp.MustCompile(`(?m)^\s*ignored errors:\s+(\d+)`)
)

// ParseSysbench reads the output of sysbench 1.0's `run` of an OLTP
// test: transactions per second as the throughput and, from its latency
// histogram (--histogram=on), p50 and p99 in µs; without the histogram,
// p99 from its "99th percentile" line (--percentile=99).
func ParseSysbench(out []byte) (Result, error) {
	r := Result{Unit: "trx/s"}
	if bytes.Contains(out, []byte("FATAL:")) {
		return r, fmt.Errorf("sysbench failed: %s", Tail(out, 300))
	}
	m := sysbenchTPS.FindSubmatch(out)
	if m == nil {
		return r, fmt.Errorf("sysbench output has no 'transactions: N (X per sec.)' line (did it run to the end?)")
	}
	r.Throughput, _ = strconv.ParseFloat(string(m[2]), 64)
	if r.Throughput <= 0 {
		return r, fmt.Errorf("sysbench ran no transactions")
	}
	if e := sysbenchErrors.FindSubmatch(out); e != nil && string(e[1]) != "0" {
		return r, fmt.Errorf("sysbench: %s queries failed", e[1])
	}
	if h := sysbenchHistogram(out); len(h) > 0 {
		r.LatencyP50 = h.percentile(0.50) * 1e3
		r.LatencyP99 = h.percentile(0.99) * 1e3
	} else if p := sysbenchP99.FindSubmatch(out); p != nil {
		v, _ := strconv.ParseFloat(string(p[1]), 64)
		r.LatencyP99 = v * 1e3
	}
	return r, nil
}

// valueHist is a histogram as (value, count) rows in increasing value.
type valueHist []struct {
	v float64
	n uint64
}

// percentile is the value of the row holding the q-quantile.
func (h valueHist) percentile(q float64) float64 {
	var total uint64
	for _, r := range h {
		total += r.n
	}
	want := uint64(math.Ceil(q * float64(total)))
	var seen uint64
	for _, r := range h {
		seen += r.n
		if seen >= want {
			return r.v
		}
	}
	return h[len(h)-1].v
}

// sysbenchHistogram reads the rows "  VALUE |*** COUNT" after "Latency
// histogram (values are in milliseconds)".
func sysbenchHistogram(out []byte) valueHist {
	i := bytes.Index(out, []byte("Latency histogram"))
	if i < 0 {
		return nil
	}
	sc := bufio.NewScanner(bytes.NewReader(out[i:]))
	sc.Scan() // the title
	var h valueHist
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(line, "value") || (line == "" && len(h) == 0) {
			continue // the column heads
		}
		left, right, ok := strings.Cut(line, "|")
		if !ok {
			break
		}
		f := strings.Fields(right)
		v, err := strconv.ParseFloat(strings.TrimSpace(left), 64)
		if len(f) == 0 || err != nil {
			break
		}
		n, err := strconv.ParseUint(f[len(f)-1], 10, 64)
		if err != nil {
			break
		}
		h = append(h, struct {
			v float64
			n uint64
		}{v, n})
	}
	return h
}
