package lab

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/irqpilot/irqpilot/internal/kernel"
	"github.com/vishvananda/netlink"
)

// A fleet is several systemd guests that stay up while the host drives
// them over SSH, as a configuration manager drives real servers: each
// guest's NIC is a tap on one bridge inside a network namespace made for
// the fleet; the bridge has the address FleetGateway, guest i has
// FleetAddr(i) (set by the initramfs from the kernel's command line, before
// systemd starts). The host's own namespace has no route there: commands
// that reach the guests run inside the fleet's namespace (Fleet.Command).
// Each guest has its own copy of the root image with its own SSH host key,
// which the host knows (Fleet.KnownHosts), and the user FleetUser with the
// given authorized key and password-less sudo. No irqpilot is installed:
// getting it there is the point.

// FleetShape is a fleet guest: small enough that four boot at once on a
// 2-core host under TCG, with two NUMA nodes and a two-queue virtio-net
// (eth0, the guest's only NIC) behind node 1, so that placement plans have
// something to decide.
var FleetShape = Shape{
	Name: "fleet", Sockets: 1, Cores: 4, Threads: 1, Nodes: 2, MemMiB: 512,
	NICs: []NIC{{Model: "virtio-net-pci", Queues: 2, Node: 1}},
	Note: "4 vCPUs in 2 nodes; a 2-queue virtio-net on node 1 (the fleet's guests)",
}

const (
	// FleetUser is the account the host logs in as on every guest.
	FleetUser = "lab"
	// FleetGateway is the bridge's address in the fleet's namespace.
	FleetGateway = "10.77.0.1"
	fleetPrefix  = 24
)

// FleetAddr is guest i's address on the fleet's bridge.
func FleetAddr(i int) string { return fmt.Sprintf("10.77.0.%d", 11+i) }

// FleetOptions say what fleet to start.
type FleetOptions struct {
	// N is the number of guests (default 4; each is FleetShape).
	N int
	// Shape of every guest (default FleetShape; its first NIC is the one
	// on the bridge).
	Shape Shape
	// AuthorizedKey is the public key (one authorized_keys line) that may
	// log in as FleetUser.
	AuthorizedKey string
	// Busybox and Cache as in Options.
	Busybox, Cache string
	// Log receives progress lines (nil: discarded).
	Log io.Writer
	// FS is the host, as in Options.
	FS *kernel.FS
}

// Guest is one running machine of a fleet.
type Guest struct {
	// Name is its host name ("fleet1", …), Addr its address.
	Name, Addr string
	// HostKey is its SSH host public key ("ssh-ed25519 AAAA…").
	HostKey string
	// Console is the file its serial console is written to.
	Console string
	// Booted is how long it took from QEMU's start to its SSH server's
	// greeting.
	Booted time.Duration

	cmd       *exec.Cmd
	mon       *Monitor
	nicDevice string // the -device argument of the bridge's NIC
	done      chan struct{}
	err       error
	start     time.Time
}

// PID is QEMU's process id.
func (g *Guest) PID() int { return g.cmd.Process.Pid }

// Monitor is the guest's QEMU monitor (system_reset, device_del, …).
func (g *Guest) Monitor() *Monitor { return g.mon }

// Fleet is a set of running guests.
type Fleet struct {
	// Namespace is the network namespace of the bridge and the taps.
	Namespace string
	Guests    []*Guest
	// KnownHosts is an OpenSSH known_hosts file with every guest's host
	// key, by address.
	KnownHosts string
	dir        string
	cleanupNS  func()
	stopOnce   sync.Once
	loads      []*memcachedLoad
}

// StartFleet builds each guest's image, boots them all and returns once
// QEMU runs for every one (WaitSSH waits for their SSH servers). Stop
// powers them off and removes everything StartFleet made; on an error
// StartFleet has already done so.
func StartFleet(ctx context.Context, o FleetOptions) (f *Fleet, err error) {
	if o.FS == nil {
		return nil, errors.New("lab fleet: no host machine (FleetOptions.FS)")
	}
	if o.N == 0 {
		o.N = 4
	}
	if o.N > 200 {
		return nil, fmt.Errorf("a fleet of %d guests: the bridge's /24 holds at most 200", o.N)
	}
	if o.Shape.Name == "" {
		o.Shape = FleetShape
	}
	if strings.TrimSpace(o.AuthorizedKey) == "" {
		return nil, errors.New("a fleet needs the public key the host logs in with")
	}
	if len(o.Shape.NICs) == 0 {
		return nil, fmt.Errorf("shape %s has no NIC to put on the fleet's bridge", o.Shape.Name)
	}
	qemu, k, err := prepareGuest(&o.Log, &o.Busybox, &o.Cache, "")
	if err != nil {
		return nil, err
	}
	rootfs, err := PrepareFleetRootfs(o.Cache, o.Log)
	if err != nil {
		return nil, err
	}
	if _, err := ReclaimStale(o.FS, o.Log); err != nil {
		fmt.Fprintf(o.Log, "lab: %v\n", err)
	}
	dir, err := os.MkdirTemp("", "irqpilot-fleet-")
	if err != nil {
		return nil, err
	}
	f = &Fleet{dir: dir, cleanupNS: func() {}}
	defer func() {
		if err != nil {
			f.Stop()
			f = nil
		}
	}()

	initrd := filepath.Join(dir, "initrd.cpio")
	fi, err := os.Create(initrd)
	if err != nil {
		return f, err
	}
	err = writeInitramfs(fi, k, o.Busybox, "", nil)
	if cerr := fi.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return f, err
	}
	imgs, keys, err := fleetImages(dir, rootfs, k, o.N, o.AuthorizedKey, o.Log)
	if err != nil {
		return f, err
	}
	var kh bytes.Buffer
	for i := range imgs {
		fmt.Fprintf(&kh, "%s %s\n", FleetAddr(i), keys[i])
	}
	f.KnownHosts = filepath.Join(dir, "known_hosts")
	if err := os.WriteFile(f.KnownHosts, kh.Bytes(), 0o644); err != nil {
		return f, err
	}

	ns, taps, cleanup, err := fleetNamespace(o.FS, dir, o.N, o.Shape.NICs)
	if err != nil {
		return f, err
	}
	f.Namespace, f.cleanupNS = ns, cleanup

	for i := 0; i < o.N; i++ {
		g := &Guest{Name: fmt.Sprintf("fleet%d", i+1), Addr: FleetAddr(i), HostKey: keys[i],
			Console: filepath.Join(dir, fmt.Sprintf("console%d.log", i)), done: make(chan struct{})}
		mon := filepath.Join(dir, fmt.Sprintf("monitor%d.sock", i))
		g.mon = &Monitor{path: mon}
		args := append([]string{"netns", "exec", ns, qemu,
			"-nodefaults", "-no-user-config", "-display", "none",
			"-kernel", k.Vmlinuz, "-initrd", initrd},
			o.Shape.machineArgs(taps[i], nil)...)
		// machineArgs gives every machine the same MACs; on one bridge
		// each guest needs its own.
		// The bridge's NIC gets an id, so that it can be unplugged and
		// plugged again (Guest.ReplugNIC).
		for j, a := range args {
			args[j] = strings.ReplaceAll(a, "mac=52:54:00:12:34:", fmt.Sprintf("mac=52:54:00:77:%02x:", i))
			if strings.HasPrefix(a, o.Shape.NICs[0].Model+",netdev=n0,") {
				args[j] += ",id=" + fleetNICID
				g.nicDevice = args[j]
			}
		}
		args = append(args,
			"-drive", "file="+imgs[i]+",if=none,id=root,format=raw",
			"-device", "virtio-blk-pci,drive=root,serial=labroot,bus=pcie.0",
			"-serial", "file:"+g.Console,
			"-monitor", "unix:"+mon+",server=on,wait=off",
			"-append", fmt.Sprintf("console=ttyS0 panic=-1 loglevel=4 quiet lab.root systemd.show_status=false net.ifnames=0 lab.addr=%s/%d", g.Addr, fleetPrefix))
		// Not CommandContext: the guests outlive the call; Stop ends them.
		g.cmd = exec.Command("ip", args...)
		// A fleet run killed outright takes its guests with it.
		g.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		var qerr bytes.Buffer
		g.cmd.Stderr = &qerr
		if err := g.cmd.Start(); err != nil {
			return f, err
		}
		g.start = time.Now()
		f.Guests = append(f.Guests, g)
		go func() {
			err := g.cmd.Wait()
			if err != nil {
				err = fmt.Errorf("%v: %s", err, strings.TrimSpace(qerr.String()))
			}
			g.err = err
			close(g.done)
		}()
		fmt.Fprintf(o.Log, "lab: booting %s (%s, %d vCPUs, %d nodes, QEMU pid %d)\n", g.Name, g.Addr, o.Shape.CPUs(), o.Shape.Nodes, g.PID())
	}
	return f, nil
}

// prepareGuest fills in what Options and FleetOptions leave empty (no
// log, Debian's busybox, the default cache) and finds QEMU and the guest's
// kernel.
func prepareGuest(log *io.Writer, busybox, cache *string, version string) (qemu string, k *Kernel, err error) {
	if *log == nil {
		*log = io.Discard
	}
	if *busybox == "" {
		*busybox = "/bin/busybox"
	}
	if *cache == "" {
		*cache = DefaultCache()
	}
	if qemu, err = exec.LookPath("qemu-system-x86_64"); err != nil {
		return "", nil, fmt.Errorf("the lab needs QEMU (Debian's qemu-system-x86): %w", err)
	}
	if version == "" {
		version = DefaultKernel
	}
	k, err = PrepareKernelVersion(*cache, version, *log)
	return qemu, k, err
}

// WaitSSH waits until every guest's SSH server greets, or a guest's QEMU
// ends, or ctx ends.
func (f *Fleet) WaitSSH(ctx context.Context) error {
	errs := make(chan error, len(f.Guests))
	for _, g := range f.Guests {
		go func() {
			for {
				if f.greets(g.Addr) {
					g.Booted = time.Since(g.start)
					errs <- nil
					return
				}
				select {
				case <-ctx.Done():
					errs <- fmt.Errorf("%s (%s): no SSH server within the time given (console:\n%s)", g.Name, g.Addr, tail(g.ConsoleText(), 2000))
					return
				case <-g.done:
					errs <- fmt.Errorf("%s: QEMU ended: %v (console:\n%s)", g.Name, g.err, tail(g.ConsoleText(), 2000))
					return
				case <-time.After(2 * time.Second):
				}
			}
		}()
	}
	var all []error
	for range f.Guests {
		all = append(all, <-errs)
	}
	return errors.Join(all...)
}

// greets reports whether addr's port 22 answers with an SSH banner, dialled
// from inside the fleet's namespace.
func (f *Fleet) greets(addr string) bool {
	ok := false
	_ = f.inNamespace(func() error {
		c, err := net.DialTimeout("tcp", net.JoinHostPort(addr, "22"), 3*time.Second)
		if err != nil {
			return err
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		b := make([]byte, 8)
		n, _ := io.ReadFull(c, b)
		ok = string(b[:n]) == "SSH-2.0-"
		return nil
	})
	return ok
}

// inNamespace runs fn on a thread inside the fleet's namespace. Sockets
// opened there stay in it.
func (f *Fleet) inNamespace(fn func() error) error { return kernel.InNetns(f.Namespace, fn) }

// Command is argv run inside the fleet's namespace (ssh, ansible-playbook).
func (f *Fleet) Command(ctx context.Context, argv ...string) *exec.Cmd {
	return exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", f.Namespace}, argv...)...)
}

// ConsoleText is what the guest's serial console showed so far.
func (g *Guest) ConsoleText() string {
	b, _ := os.ReadFile(g.Console)
	return string(bytes.ReplaceAll(b, []byte("\r\n"), []byte("\n")))
}

// Stop powers every guest off (ACPI power button, then QEMU's quit, then
// SIGKILL to QEMU's PID), deletes the namespace and the images. The disks
// are thrown away, so a guest that ignores the button loses nothing.
func (f *Fleet) Stop() {
	f.stopOnce.Do(func() {
		f.StopLoad(0)
		for _, g := range f.Guests {
			_, _ = g.mon.Command("system_powerdown")
		}
		deadline := time.Now().Add(30 * time.Second)
		for _, g := range f.Guests {
			wait := time.NewTimer(max(0, time.Until(deadline)))
			select {
			case <-g.done:
				wait.Stop()
				continue
			case <-wait.C:
			}
			_, _ = g.mon.Command("quit")
			select {
			case <-g.done:
			case <-time.After(10 * time.Second):
				_ = g.cmd.Process.Kill()
				<-g.done
			}
		}
		f.cleanupNS()
		_ = os.RemoveAll(f.dir)
	})
}

// fleetNamespace creates a namespace with the bridge br0 (FleetGateway)
// and, per guest, a tap per NIC; the first NIC's tap is on the bridge. fs
// is the host.
func fleetNamespace(fs *kernel.FS, dir string, n int, nics []NIC) (name string, taps [][]string, cleanup func(), err error) {
	name, cleanup, err = inNewNamespace(fs, "irqpfleet-", dir, func(ns string) error {
		lo, err := netlink.LinkByName("lo")
		if err != nil {
			return err
		}
		if err := netlink.LinkSetUp(lo); err != nil {
			return err
		}
		br := &netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: "br0"}}
		if err := netlink.LinkAdd(br); err != nil {
			return fmt.Errorf("bridge br0 in %s: %w", ns, err)
		}
		addr, err := netlink.ParseAddr(fmt.Sprintf("%s/%d", FleetGateway, fleetPrefix))
		if err != nil {
			return err
		}
		if err := netlink.AddrAdd(br, addr); err != nil {
			return err
		}
		if err := netlink.LinkSetUp(br); err != nil {
			return err
		}
		for g := 0; g < n; g++ {
			var mine []string
			for i, nic := range nics {
				t, err := addTap(ns, fmt.Sprintf("g%dtap%d", g, i), nic.Queues)
				if err != nil {
					return err
				}
				if i == 0 {
					if err := netlink.LinkSetMaster(t, br); err != nil {
						return err
					}
				}
				mine = append(mine, t.Name)
			}
			taps = append(taps, mine)
		}
		return nil
	})
	return name, taps, cleanup, err
}
