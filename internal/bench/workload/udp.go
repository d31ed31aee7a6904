package workload

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

	"github.com/irqpilot/irqpilot/internal/program"
	"golang.org/x/sys/unix"
)

// The udp workload is the RPS/RFS single-queue NIC write-up's shape on one machine: one-way traffic
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
	udpSetPort  = 9002
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
//
// A connection to addr:9002 sets how it waits for datagrams (see
// BusyPoll): it sends "busypoll SOCKET_US EPOLL_US\n" and gets "ok …\n"
// or "error …\n". Without busy polling the readers block in recvmmsg, as
// they always did; with socket busy polling the same call spins on the
// device's NAPI instance first; with epoll busy polling each reader waits
// in epoll_wait(2) on an epoll instance with busy-poll parameters and then
// drains the socket without blocking.
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
	set, err := net.ListenTCP("tcp4", &net.TCPAddr{IP: ip, Port: udpSetPort})
	if err != nil {
		return err
	}
	counts := make([][2]atomic.Int64, max(1, *threads))
	epfds := make([]int, len(counts))
	for i := range epfds {
		if epfds[i], err = unix.EpollCreate1(unix.EPOLL_CLOEXEC); err != nil {
			return fmt.Errorf("epoll_create1: %w", err)
		}
		if err := unix.EpollCtl(epfds[i], unix.EPOLL_CTL_ADD, fd, &unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(fd)}); err != nil {
			return fmt.Errorf("epoll_ctl: %w", err)
		}
	}
	var useEpoll atomic.Bool
	errc := make(chan error, len(counts)+2)
	for i := range counts {
		go func(c *[2]atomic.Int64, epfd int) {
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
			evs := make([]unix.EpollEvent, 1)
			for {
				flags := unix.MSG_TRUNC
				if useEpoll.Load() {
					// A timeout, so a switch back to blocking reads is
					// seen without traffic.
					n, err := unix.EpollWait(epfd, evs, 100)
					if err == unix.EINTR || n == 0 {
						continue
					}
					if err != nil {
						errc <- fmt.Errorf("epoll_wait: %w", err)
						return
					}
					flags |= unix.MSG_DONTWAIT
				}
				n, _, e := unix.Syscall6(unix.SYS_RECVMMSG, uintptr(fd), uintptr(unsafe.Pointer(&msgs[0])), batch, uintptr(flags), 0, 0)
				// A signal (the Go runtime's preemption) that interrupts
				// a batch after some datagrams makes the kernel keep
				// -ERESTARTSYS as the socket's error and return it on the
				// next call as errno 512 (net/socket.c __sys_recvmmsg);
				// it is EINTR that leaked, not a failure.
				if e == unix.EINTR || e == errRestartSys || e == unix.EAGAIN {
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
		}(&counts[i], epfds[i])
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
	go func() {
		for {
			c, err := set.Accept()
			if err != nil {
				errc <- err
				return
			}
			_ = c.SetDeadline(time.Now().Add(5 * time.Second))
			line, err := bufio.NewReader(c).ReadString('\n')
			var bp BusyPoll
			if err == nil {
				_, err = fmt.Sscanf(line, "busypoll %d %d", &bp.SocketUsecs, &bp.EpollUsecs)
			}
			if err == nil {
				err = setBusyPoll(fd, epfds, bp)
			}
			if err == nil {
				useEpoll.Store(bp.EpollUsecs > 0)
				fmt.Fprintf(c, "ok %s\n", bp)
			} else {
				fmt.Fprintf(c, "error %v\n", err)
			}
			c.Close()
		}
	}()
	return <-errc
}

// BusyPoll is how the udp sink waits for datagrams: busy polling of the
// device's NAPI instance by the socket (SO_BUSY_POLL, the per-socket form
// of net.core.busy_read) or by epoll (per-instance parameters, the form
// IRQ suspension needs), in µs; zero is off. Either one sets "prefer busy
// polling" and a budget of 64 packets per poll (a NAPI weight) beside it.
type BusyPoll struct {
	SocketUsecs int `json:"socket_usecs,omitempty"`
	EpollUsecs  int `json:"epoll_usecs,omitempty"`
}

// IsZero: no busy polling.
func (b BusyPoll) IsZero() bool { return b.SocketUsecs == 0 && b.EpollUsecs == 0 }

func (b BusyPoll) String() string {
	switch {
	case b.IsZero():
		return "no busy polling"
	case b.EpollUsecs == 0:
		return fmt.Sprintf("socket busy poll %d µs", b.SocketUsecs)
	case b.SocketUsecs == 0:
		return fmt.Sprintf("epoll busy poll %d µs", b.EpollUsecs)
	}
	return fmt.Sprintf("socket busy poll %d µs, epoll busy poll %d µs", b.SocketUsecs, b.EpollUsecs)
}

// maxBusyPollUsecs caps the option: a sink spinning longer than a
// millisecond per wait measures nothing useful, and epoll refuses more than
// S32_MAX.
const maxBusyPollUsecs = 1000

func (b BusyPoll) Check() error {
	for _, v := range []struct {
		name string
		us   int
	}{{"socket busy poll", b.SocketUsecs}, {"epoll busy poll", b.EpollUsecs}} {
		if v.us < 0 || v.us > maxBusyPollUsecs {
			return fmt.Errorf("%s %d µs: want 0 (off) to %d", v.name, v.us, maxBusyPollUsecs)
		}
	}
	return nil
}

// busyPollBudget is the packets one busy poll may process (the kernel's
// default is 8, BUSY_POLL_BUDGET; 64 is a NAPI poll's weight).
const busyPollBudget = 64

// epollParams is struct epoll_params of <linux/eventpoll.h> (6.9), set with
// EPIOCSPARAMS; golang.org/x/sys/unix has the ioctl number only.
type epollParams struct {
	BusyPollUsecs  uint32
	BusyPollBudget uint16
	PreferBusyPoll uint8
	_              uint8
}

// setBusyPoll puts b in force on the sink's socket and epoll instances.
// SO_BUSY_POLL above net.core.busy_read and a budget above the default
// need CAP_NET_ADMIN (the sink runs as root).
func setBusyPoll(fd int, epfds []int, b BusyPoll) error {
	if err := b.Check(); err != nil {
		return err
	}
	on := func(us int) int {
		if us > 0 {
			return 1
		}
		return 0
	}
	budget := 0 // the kernel's default
	if b.SocketUsecs > 0 {
		budget = busyPollBudget
	}
	for _, o := range []struct {
		name     string
		opt, val int
	}{
		{"SO_BUSY_POLL", unix.SO_BUSY_POLL, b.SocketUsecs},
		{"SO_PREFER_BUSY_POLL", unix.SO_PREFER_BUSY_POLL, on(b.SocketUsecs)},
		{"SO_BUSY_POLL_BUDGET", unix.SO_BUSY_POLL_BUDGET, budget},
	} {
		if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, o.opt, o.val); err != nil {
			if o.opt != unix.SO_BUSY_POLL && errors.Is(err, unix.ENOPROTOOPT) && o.val == 0 {
				continue // a kernel without the option (before 5.11) is off already
			}
			return fmt.Errorf("setsockopt %s=%d: %w (kernel 5.11 or later and CAP_NET_ADMIN needed)", o.name, o.val, err)
		}
	}
	// Read back: the socket's value is what the kernel will spin for.
	if v, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_BUSY_POLL); err != nil || v != b.SocketUsecs {
		return fmt.Errorf("SO_BUSY_POLL reads %d after setting %d (%v)", v, b.SocketUsecs, err)
	}
	p := epollParams{BusyPollUsecs: uint32(b.EpollUsecs)}
	if b.EpollUsecs > 0 {
		p.BusyPollBudget, p.PreferBusyPoll = busyPollBudget, 1
	}
	for _, ep := range epfds {
		if _, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(ep), unix.EPIOCSPARAMS, uintptr(unsafe.Pointer(&p))); e != 0 {
			if e == unix.ENOTTY && b.EpollUsecs == 0 {
				continue // no epoll busy-poll parameters before 6.9: off already
			}
			return fmt.Errorf("epoll EPIOCSPARAMS busy_poll_usecs=%d: %w (kernel 6.9 or later)", b.EpollUsecs, e)
		}
		var got epollParams
		if _, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(ep), unix.EPIOCGPARAMS, uintptr(unsafe.Pointer(&got))); e != 0 || got != p {
			return fmt.Errorf("epoll EPIOCGPARAMS reads %+v after setting %+v (%v)", got, p, e)
		}
	}
	return nil
}

// udpSetBusyPoll tells the sink at addr how to wait (see udpSink).
func udpSetBusyPoll(addr string, b BusyPoll) error {
	c, err := net.DialTimeout("tcp4", net.JoinHostPort(addr, strconv.Itoa(udpSetPort)), 5*time.Second)
	if err != nil {
		return fmt.Errorf("udp sink busy-poll control: %w", err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	fmt.Fprintf(c, "busypoll %d %d\n", b.SocketUsecs, b.EpollUsecs)
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return fmt.Errorf("udp sink busy-poll control: %w", err)
	}
	if msg, ok := strings.CutPrefix(strings.TrimSpace(line), "error "); ok {
		return fmt.Errorf("udp sink: %s: %s", b, msg)
	}
	return nil
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
	var bp BusyPoll
	fs.IntVar(&bp.SocketUsecs, "busy-poll", 0, "the sink's socket busy polling, µs (0: off)")
	fs.IntVar(&bp.EpollUsecs, "epoll-busy-poll", 0, "the sink's epoll busy polling, µs (0: off)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	ip := net.ParseIP(*addr).To4()
	if ip == nil {
		return fmt.Errorf("-addr %q is not an IPv4 address", *addr)
	}
	// Every run says how the sink waits, so a configuration's busy polling
	// never carries over into the next one.
	if err := udpSetBusyPoll(*addr, bp); err != nil {
		return err
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
		return Result{}, fmt.Errorf("udp sender output has no result line: %s", strings.TrimSpace(program.Tail(out, 200)))
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
