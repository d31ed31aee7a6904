package bench

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The udp workload is RPS/RFS on a single-queue NIC's shape on one machine: one-way traffic
// into a single-queue device, the sender pinned to one CPU. veth hands
// every packet to the receiving device with netif_rx on the sending CPU,
// so that CPU runs the whole receive softirq path — like a single-queue
// NIC whose only IRQ is on CPU 0. Its server is a UDP sink that reads and
// counts datagrams; the load generator floods it from the client namespace.
// Neither exists as a Debian package with a parsable rate, so both are this
// program itself, started again with HelperEnv set (see RunHelper).

// HelperEnv, when set in the environment, makes the irqpilot binary (or a
// package test binary) run a bench helper instead of its normal main:
// "udp-sink" or "udp-send".
const HelperEnv = "IRQPILOT_BENCH_HELPER"

// The sender's marks on standard error around the flood: the runner
// samples CPU load between them, not over the helper's start-up (a
// race-instrumented test binary takes a second to start, which diluted the
// default run's load — auto's evidence — by a third).
const (
	udpTrafficOn  = "udp-send: traffic on"
	udpTrafficOff = "udp-send: traffic off"
)

const (
	udpPort     = 9000
	udpCtlPort  = 9001
	udpSendSize = 56000 // bytes per send(2); UDP GSO cuts it into udpSegment-byte datagrams
	udpSegment  = 1400
	udpFlows    = 16 // connected sockets = source ports = flows for RPS's hash
)

// RunHelper runs helper mode with its arguments and returns the exit code.
func RunHelper(mode string, args []string, stdout, stderr io.Writer) int {
	var err error
	switch mode {
	case "udp-sink":
		err = udpSink(args)
	case "udp-send":
		err = udpSend(args, stdout, stderr)
	default:
		err = fmt.Errorf("unknown helper %q (udp-sink, udp-send)", mode)
	}
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", mode, err)
		return 1
	}
	return 0
}

// mmsghdr is struct mmsghdr of recvmmsg(2); golang.org/x/sys/unix has the
// system call number and Msghdr but not this type (x/net's ReadBatch would,
// but is not a dependency of the module). Go pads it like C on 32 and 64
// bits: Msghdr then a uint32, rounded up to the struct's alignment.
type mmsghdr struct {
	Hdr unix.Msghdr
	Len uint32
}

// errRestartSys is the kernel-internal ERESTARTSYS (512), which recvmmsg
// can report through the socket's pending error.
const errRestartSys = syscall.Errno(512)

// udpSink reads datagrams on addr:9000 with n threads and answers every
// connection to addr:9001 with "DATAGRAMS BYTES\n" received so far. It
// reads 64 datagrams per recvmmsg(2) and only their first 64 bytes
// (MSG_TRUNC reports the full length): the application's cost per datagram
// is small, so the receive softirq path is what the configurations move.
func udpSink(args []string) error {
	fs := flag.NewFlagSet("udp-sink", flag.ContinueOnError)
	addr := fs.String("addr", "", "address to listen on")
	threads := fs.Int("threads", 1, "reading threads")
	if err := fs.Parse(args); err != nil {
		return err
	}
	ip := net.ParseIP(*addr).To4()
	if ip == nil {
		return fmt.Errorf("-addr %q is not an IPv4 address", *addr)
	}
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM, 0)
	if err != nil {
		return err
	}
	_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUF, 4<<20)
	sa := &unix.SockaddrInet4{Port: udpPort}
	copy(sa.Addr[:], ip)
	if err := unix.Bind(fd, sa); err != nil {
		return fmt.Errorf("bind %s:%d: %w", *addr, udpPort, err)
	}
	ctl, err := net.ListenTCP("tcp4", &net.TCPAddr{IP: ip, Port: udpCtlPort})
	if err != nil {
		return err
	}
	counts := make([][2]atomic.Int64, max(1, *threads))
	errc := make(chan error, len(counts)+1)
	for i := range counts {
		go func(c *[2]atomic.Int64) {
			const batch, size = 64, 64
			bufs := make([]byte, batch*size)
			iovs := make([]unix.Iovec, batch)
			msgs := make([]mmsghdr, batch)
			for j := range msgs {
				iovs[j].Base = &bufs[j*size]
				iovs[j].SetLen(size)
				msgs[j].Hdr.Iov = &iovs[j]
				msgs[j].Hdr.SetIovlen(1)
			}
			for {
				n, _, e := unix.Syscall6(unix.SYS_RECVMMSG, uintptr(fd), uintptr(unsafe.Pointer(&msgs[0])), batch, unix.MSG_TRUNC, 0, 0)
				// A signal (the Go runtime's preemption) that interrupts
				// a batch after some datagrams makes the kernel keep
				// -ERESTARTSYS as the socket's error and return it on the
				// next call as errno 512 (net/socket.c __sys_recvmmsg);
				// it is EINTR that leaked, not a failure.
				if e == unix.EINTR || e == errRestartSys {
					continue
				}
				if e != 0 {
					errc <- fmt.Errorf("recvmmsg: %w", e)
					return
				}
				var b int64
				for j := 0; j < int(n); j++ {
					b += int64(msgs[j].Len)
				}
				c[0].Add(int64(n))
				c[1].Add(b)
			}
		}(&counts[i])
	}
	go func() {
		for {
			c, err := ctl.Accept()
			if err != nil {
				errc <- err
				return
			}
			var d, b int64
			for i := range counts {
				d += counts[i][0].Load()
				b += counts[i][1].Load()
			}
			fmt.Fprintf(c, "%d %d\n", d, b)
			c.Close()
		}
	}()
	return <-errc
}

func udpQuery(addr string) (datagrams, bytes int64, err error) {
	c, err := net.DialTimeout("tcp4", net.JoinHostPort(addr, strconv.Itoa(udpCtlPort)), 5*time.Second)
	if err != nil {
		return 0, 0, err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return 0, 0, fmt.Errorf("udp sink counter: %w", err)
	}
	_, err = fmt.Sscanf(line, "%d %d", &datagrams, &bytes)
	return datagrams, bytes, err
}

// udpSend floods addr:9000 for -d from udpFlows connected sockets with
// UDP GSO, then prints what the sink received meanwhile.
func udpSend(args []string, out, marks io.Writer) error {
	fs := flag.NewFlagSet("udp-send", flag.ContinueOnError)
	addr := fs.String("addr", "", "sink address")
	d := fs.Duration("d", 5*time.Second, "duration")
	if err := fs.Parse(args); err != nil {
		return err
	}
	ip := net.ParseIP(*addr).To4()
	if ip == nil {
		return fmt.Errorf("-addr %q is not an IPv4 address", *addr)
	}
	var fds []int
	defer func() {
		for _, fd := range fds {
			unix.Close(fd)
		}
	}()
	for i := 0; i < udpFlows; i++ {
		fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM, 0)
		if err != nil {
			return err
		}
		fds = append(fds, fd)
		if err := unix.SetsockoptInt(fd, unix.IPPROTO_UDP, unix.UDP_SEGMENT, udpSegment); err != nil {
			return fmt.Errorf("UDP_SEGMENT: %w", err)
		}
		sa := &unix.SockaddrInet4{Port: udpPort}
		copy(sa.Addr[:], ip)
		if err := unix.Connect(fd, sa); err != nil {
			return err
		}
	}
	d0, b0, err := udpQuery(*addr)
	if err != nil {
		return err
	}
	buf := make([]byte, udpSendSize)
	fmt.Fprintln(marks, udpTrafficOn)
	start := time.Now()
	end := start.Add(*d)
	var sends int64
	for i := 0; ; i++ {
		if i%64 == 0 && time.Now().After(end) {
			break
		}
		if _, err := unix.Write(fds[i%len(fds)], buf); err != nil && !errors.Is(err, syscall.ECONNREFUSED) &&
			!errors.Is(err, syscall.ENOBUFS) && !errors.Is(err, syscall.EAGAIN) {
			return err
		}
		sends++
	}
	secs := time.Since(start).Seconds()
	fmt.Fprintln(marks, udpTrafficOff)
	time.Sleep(200 * time.Millisecond) // let the backlog drain into the sink
	d1, b1, err := udpQuery(*addr)
	if err != nil {
		return err
	}
	per := (udpSendSize + udpSegment - 1) / udpSegment
	fmt.Fprintf(out, "udp: %d sends (%d datagrams) in %.3f s; sink received %d datagrams, %d bytes: %.0f dgram/s\n",
		sends, sends*int64(per), secs, d1-d0, b1-b0, float64(d1-d0)/secs)
	return nil
}

var udpLine = regexp.MustCompile(`(?m)^udp: (\d+) sends \((\d+) datagrams\) in ([0-9.]+) s; sink received (\d+) datagrams, (\d+) bytes: ([0-9.]+) dgram/s`)

// ParseUDP reads the udp-send helper's line: the figure of merit is the
// datagrams per second the sink application received.
func ParseUDP(out []byte) (Result, error) {
	m := udpLine.FindSubmatch(out)
	if m == nil {
		return Result{}, fmt.Errorf("udp sender output has no result line: %s", strings.TrimSpace(tail(out, 200)))
	}
	v, err := strconv.ParseFloat(string(m[6]), 64)
	if err != nil {
		return Result{}, err
	}
	return Result{Throughput: v, Unit: "dgram/s"}, nil
}

// helperCommand is argv to run this program as helper mode (with the
// environment variable set through env(1), so it survives ip netns exec
// and taskset).
func helperCommand(mode string, args ...string) ([]string, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("own executable: %w", err)
	}
	return append([]string{"env", HelperEnv + "=" + mode, exe}, args...), nil
}
