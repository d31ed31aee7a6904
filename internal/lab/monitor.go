package lab

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"regexp"
	"strings"
	"time"
)

// Monitor talks to a running machine's QEMU monitor (the human monitor
// protocol over a unix socket).
type Monitor struct {
	path string
	// taps are the spare tap devices, in the lab's namespace, that
	// hot-added NICs use as their backends.
	taps []string
	used int
	// ns is the lab's namespace and nicTaps the taps behind the shape's
	// NICs, in order: StartUDP sends into the guest through them.
	ns      string
	nicTaps []string
	udp     *udpSource
}

// Command runs one monitor command and returns what QEMU printed.
func (m *Monitor) Command(cmd string) (string, error) {
	var c net.Conn
	var err error
	for i := 0; i < 50; i++ { // the socket appears once QEMU is up
		if c, err = net.Dial("unix", m.path); err == nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		return "", fmt.Errorf("QEMU monitor: %w", err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	r := bufio.NewReader(c)
	if _, err := readPrompt(r); err != nil {
		return "", err
	}
	if _, err := fmt.Fprintf(c, "%s\n", cmd); err != nil {
		return "", err
	}
	out, err := readPrompt(r)
	if err != nil {
		return "", err
	}
	// The monitor echoes the command line (with terminal escapes) first.
	out = reEscape.ReplaceAllString(out, "")
	if i := strings.Index(out, "\n"); i >= 0 {
		out = out[i+1:]
	}
	out = strings.TrimSpace(out)
	if strings.Contains(strings.ToLower(out), "error") {
		return out, fmt.Errorf("QEMU monitor %q: %s", cmd, out)
	}
	return out, nil
}

var reEscape = regexp.MustCompile(`\x1b\[[0-9;]*[A-Za-z]|\r`)

func readPrompt(r *bufio.Reader) (string, error) {
	var b bytes.Buffer
	for {
		c, err := r.ReadByte()
		if err != nil {
			return b.String(), fmt.Errorf("QEMU monitor: %w", err)
		}
		b.WriteByte(c)
		if bytes.HasSuffix(b.Bytes(), []byte("(qemu) ")) {
			return strings.TrimSuffix(b.String(), "(qemu) "), nil
		}
	}
}

// AddNIC hot-adds a virtio-net NIC with id into a free root port, backed by
// a spare tap of the lab's namespace.
func (m *Monitor) AddNIC(id string) error {
	if m.used >= len(m.taps) {
		return fmt.Errorf("no spare tap for NIC %s (%d slots)", id, len(m.taps))
	}
	tap := m.taps[m.used]
	if _, err := m.Command(fmt.Sprintf("netdev_add tap,id=nd-%s,ifname=%s,script=no,downscript=no", id, tap)); err != nil {
		return err
	}
	_, err := m.Command(fmt.Sprintf("device_add virtio-net-pci,netdev=nd-%s,id=%s,bus=hp%d", id, id, m.used))
	m.used++
	return err
}

// RemoveNIC asks the guest to release NIC id (a PCIe hot-unplug: the
// guest's driver lets go, then QEMU removes the device).
func (m *Monitor) RemoveNIC(id string) error {
	_, err := m.Command("device_del " + id)
	return err
}

var reHost = regexp.MustCompile(`@@HOST:([A-Za-z0-9_-]+)@@`)

// serveHost watches the console for the guest's requests and runs them,
// each once, in order, until ctx ends or the machine is gone.
func serveHost(ctx context.Context, console string, m *Monitor, actions map[string]func(*Monitor) error) error {
	defer func() {
		if m.udp != nil {
			_, _ = m.StopUDP() // the machine is gone
		}
	}()
	done := 0
	t := time.NewTicker(200 * time.Millisecond)
	defer t.Stop()
	for {
		b, _ := os.ReadFile(console)
		all := reHost.FindAllSubmatch(b, -1)
		for ; done < len(all); done++ {
			name := string(all[done][1])
			f, ok := actions[name]
			if !ok {
				return fmt.Errorf("the guest asked for %q, which the host does not know", name)
			}
			if err := f(m); err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}
