package workload

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
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
