package lab

import (
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/irqpilot/irqpilot/internal/kernel"
)

// udpSource sends UDP datagrams into a guest from the host's side of one
// of its NICs' taps: flows sockets, each its own source port, so that the
// tap's queue selection (a hash of the flow) spreads them over a
// multi-queue NIC's queues. Nothing in the guest answers a datagram to a
// closed port but a rate-limited ICMP error, so the guest sends next to
// nothing, and the queue a flow arrives on never follows a reply.
type udpSource struct {
	stop chan struct{}
	done chan struct{}
	mu   sync.Mutex
	sent int
	err  error
}

// StartUDP starts sending pps datagrams a second, round robin over flows
// flows, from hostIP (a /24 given to NIC nic's tap) to guestIP port 9,
// until StopUDP or the machine is gone.
func (m *Monitor) StartUDP(nic int, hostIP, guestIP string, flows, pps int) error {
	if m.udp != nil {
		return fmt.Errorf("UDP traffic already runs")
	}
	if nic >= len(m.nicTaps) {
		return fmt.Errorf("no NIC %d (the shape has %d)", nic, len(m.nicTaps))
	}
	var conns []*net.UDPConn
	dst := &net.UDPAddr{IP: net.ParseIP(guestIP), Port: 9}
	err := kernel.InNetns(m.ns, func() error {
		l, err := netlink.LinkByName(m.nicTaps[nic])
		if err != nil {
			return err
		}
		a, err := netlink.ParseAddr(hostIP + "/24")
		if err != nil {
			return err
		}
		if err := netlink.AddrReplace(l, a); err != nil {
			return fmt.Errorf("address %s on %s: %w", hostIP, l.Attrs().Name, err)
		}
		for i := 0; i < flows; i++ {
			// Sockets belong to the namespace they are made in.
			// Unconnected: the guest's ICMP errors (a closed port) are
			// not reported to an unconnected socket's sends.
			c, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.ParseIP(hostIP), Port: 40000 + i})
			if err != nil {
				return err
			}
			conns = append(conns, c)
		}
		return nil
	})
	if err != nil {
		for _, c := range conns {
			c.Close()
		}
		return fmt.Errorf("UDP traffic into the guest: %w", err)
	}
	s := &udpSource{stop: make(chan struct{}), done: make(chan struct{})}
	m.udp = s
	go s.run(conns, dst, pps)
	return nil
}

// StopUDP stops the traffic and says how many datagrams were sent.
func (m *Monitor) StopUDP() (int, error) {
	s := m.udp
	if s == nil {
		return 0, fmt.Errorf("no UDP traffic runs")
	}
	m.udp = nil
	close(s.stop)
	<-s.done
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sent, s.err
}

func (s *udpSource) run(conns []*net.UDPConn, dst *net.UDPAddr, pps int) {
	defer close(s.done)
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	const tick = 10 * time.Millisecond
	t := time.NewTicker(tick)
	defer t.Stop()
	payload := make([]byte, 64)
	start, i := time.Now(), 0
	for {
		select {
		case <-s.stop:
			return
		case now := <-t.C:
			// Catch up to the rate since the start, whatever the ticker
			// missed; a send the tap refuses (the guest is not reading
			// its queue) is dropped like a NIC drops it.
			due := int(now.Sub(start).Seconds() * float64(pps))
			s.mu.Lock()
			for ; s.sent < due; s.sent++ {
				if _, err := conns[i%len(conns)].WriteToUDP(payload, dst); err != nil && s.err == nil {
					s.err = err
				}
				i++
			}
			s.mu.Unlock()
		}
	}
}
