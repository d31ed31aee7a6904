package lab

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/irqpilot/irqpilot/internal/kernel"
	"github.com/vishvananda/netlink"
)

// Options say what to boot and what to do in it.
type Options struct {
	Shape Shape
	// Script is run by the guest's shell; its output and exit code come
	// back in the Result. Ignored with Shell.
	Script string
	// Files are put into the guest beside the script (path → content).
	Files map[string][]byte
	// Shell gives an interactive shell on the console (stdin/stdout)
	// instead of running Script.
	Shell bool
	// Irqpilot is the binary put into the guest (static, linux/amd64).
	Irqpilot string
	// Busybox is a static busybox (default /bin/busybox from Debian's
	// busybox-static).
	Busybox string
	// Cache holds Debian's kernel package (DefaultCache()).
	Cache string
	// Kernel is the version of the Debian kernel to boot (Kernels;
	// "" = DefaultKernel).
	Kernel string
	// Timeout bounds the whole run, boot included (default 10 minutes:
	// TCG boots a 32-CPU guest in under a minute on a quiet 2-core host).
	Timeout time.Duration
	// Systemd boots a Debian root with systemd as PID 1 (built with
	// mmdebstrap and cached) instead of running the script from the
	// initramfs; the script runs from a unit once the system is up, and
	// may reboot the machine by touching /run/lab-reboot (it runs again
	// after the reboot, with what it wrote on the root kept).
	Systemd bool
	// Debs are packages installed into the systemd guest's root.
	Debs []string
	// Log receives progress lines (nil: discarded).
	Log io.Writer
	// FS is the host, the live machine (the caller's kernel.New("/")):
	// a run's owner file names a process of it.
	FS *kernel.FS
	// Host are actions the host takes when the guest asks: a line
	// "@@HOST:NAME@@" on the guest's console runs Host[NAME] with a monitor
	// of the running machine (hot-add or remove a device). The guest waits
	// for the effect itself.
	Host map[string]func(m *Monitor) error
}

// Result is what a run returned.
type Result struct {
	// Output is what the script printed (stdout and stderr).
	Output string
	// ExitCode is the script's exit status.
	ExitCode int
	// Console is the guest kernel's console.
	Console string
	// Elapsed is the whole run, boot included.
	Elapsed time.Duration
	Kernel  string
}

var reEnd = regexp.MustCompile(`@@LAB-END rc=(\d+)@@`)

// Run boots the shape, runs the script (or a shell) and powers it off.
// The guest's NICs are backed by taps in a network namespace created for
// the run and removed after it.
func Run(ctx context.Context, o Options) (*Result, error) {
	if o.FS == nil {
		return nil, errors.New("lab: no host machine (Options.FS)")
	}
	if o.Timeout == 0 {
		o.Timeout = 10 * time.Minute
	}
	qemu, k, err := prepareGuest(&o.Log, &o.Busybox, &o.Cache, o.Kernel)
	if err != nil {
		return nil, err
	}
	if _, err := ReclaimStale(o.FS, o.Log); err != nil {
		fmt.Fprintf(o.Log, "lab: %v\n", err)
	}
	dir, err := os.MkdirTemp("", "irqpilot-lab-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)

	extra := []guestFile{{"lab/run.sh", 0o755, []byte(o.Script + "\n")}}
	for p, b := range o.Files {
		extra = append(extra, guestFile{filepath.Clean("lab/" + p), 0o644, b})
	}
	initrd := filepath.Join(dir, "initrd.cpio")
	f, err := os.Create(initrd)
	if err != nil {
		return nil, err
	}
	err = writeInitramfs(f, k, o.Busybox, o.Irqpilot, extra)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, err
	}
	var rootImg string
	if o.Systemd {
		rootfs, err := PrepareRootfs(o.Cache, o.Log)
		if err != nil {
			return nil, err
		}
		if rootImg, err = systemdImage(dir, rootfs, o.Debs, o.Script, o.Files, o.Log); err != nil {
			return nil, err
		}
	}
	var disks []string
	for i := 0; i < o.Shape.disks(); i++ {
		p := filepath.Join(dir, fmt.Sprintf("disk%d.img", i))
		if err := os.WriteFile(p, nil, 0o600); err != nil {
			return nil, err
		}
		if err := os.Truncate(p, 64<<20); err != nil {
			return nil, err
		}
		disks = append(disks, p)
	}

	nics := append([]NIC(nil), o.Shape.NICs...)
	for i := 0; i < hotplugSlots; i++ {
		nics = append(nics, NIC{Model: "hotplug", Queues: 1, Node: -1})
	}
	ns, taps, cleanup, err := tapNamespace(o.FS, dir, nics)
	if err != nil {
		return nil, err
	}
	defer cleanup()

	for attempt := 1; ; attempt++ {
		res, err := boot(ctx, o, qemu, k, dir, initrd, rootImg, ns, taps, disks)
		if err == nil || o.Systemd || o.Shell || attempt == bootAttempts || !crashedBooting(res) {
			return res, err
		}
		fmt.Fprintf(o.Log, "lab: %s: the guest's kernel crashed while booting, before the script began (%s); booting it again (attempt %d of %d)\n",
			o.Shape.Name, panicLine(res.Console), attempt+1, bootAttempts)
	}
}

// bootAttempts bounds the boots of one run. With a thread per vCPU
// (IRQPILOT_LAB_TCG=multi), Debian's 6.12 kernel on many vCPUs oopsed on
// an int3 while it patched its own code, sometimes before anything of the
// lab's ran (tcgThreads). Such a boot is the emulator's fault, not the
// test's: it is booted again. A crash after the script began is never
// retried. On one thread (the default) no such crash was seen.
const bootAttempts = 3

// crashedBooting reports whether the guest's kernel panicked before the
// script began.
func crashedBooting(res *Result) bool {
	return res != nil && !strings.Contains(res.Console, "@@LAB-BEGIN@@") && strings.Contains(res.Console, "Kernel panic - not syncing")
}

// panicLine is the console's first oops or panic line, for the log.
func panicLine(console string) string {
	for _, l := range strings.Split(console, "\n") {
		if i := strings.Index(l, "Oops:"); i >= 0 {
			return strings.TrimSpace(l[i:])
		}
	}
	for _, l := range strings.Split(console, "\n") {
		if i := strings.Index(l, "Kernel panic"); i >= 0 {
			return strings.TrimSpace(l[i:])
		}
	}
	return "no oops line"
}

// boot runs QEMU once on the prepared initramfs, disks and taps.
func boot(ctx context.Context, o Options, qemu string, k *Kernel, dir, initrd, rootImg, ns string, taps, disks []string) (*Result, error) {
	console := filepath.Join(dir, "console.log")
	os.Remove(console)
	// no_timer_check: under TCG on a loaded host the kernel's check that
	// the IO-APIC timer ticks can time out and panic the boot ("IO-APIC +
	// timer doesn't work!"); the check is for real hardware.
	cmdline := "console=ttyS0 panic=-1 loglevel=4 quiet no_timer_check"
	args := append([]string{"netns", "exec", ns, qemu,
		"-nodefaults", "-no-user-config", "-display", "none",
		"-kernel", k.Vmlinuz, "-initrd", initrd},
		o.Shape.machineArgs(taps, disks)...)
	if o.Systemd {
		// A reboot restarts the machine (same kernel, initramfs and disks).
		args = append(args, "-drive", "file="+rootImg+",if=none,id=root,format=raw",
			"-device", "virtio-blk-pci,drive=root,serial=labroot,bus=pcie.0")
		// net.ifnames=0: the same interface names as the busybox guest.
		cmdline += " lab.root systemd.show_status=false net.ifnames=0"
	} else {
		args = append(args, "-no-reboot")
	}
	if o.Shell {
		cmdline += " lab.shell"
		args = append(args, "-serial", "mon:stdio")
	} else {
		args = append(args, "-serial", "file:"+console)
	}
	mon := filepath.Join(dir, "monitor.sock")
	args = append(args, "-append", cmdline, "-monitor", "unix:"+mon+",server=on,wait=off")

	parent := ctx
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	// `ip netns exec` starts QEMU in the lab's namespace with that
	// namespace's /sys: QEMU opens the taps by name there.
	cmd := exec.CommandContext(ctx, "ip", args...)
	cmd.WaitDelay = 5 * time.Second
	// If this process dies (a test binary's timeout panics), the guest
	// goes with it rather than running on unowned.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	var qerr bytes.Buffer
	if o.Shell {
		cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	} else {
		cmd.Stderr = &qerr
	}
	fmt.Fprintf(o.Log, "lab: booting %s (%d vCPUs, %d nodes) on %s under TCG\n", o.Shape.Name, o.Shape.CPUs(), o.Shape.Nodes, k.Release)
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	hostErr := make(chan error, 1)
	hostCtx, stopHost := context.WithCancel(ctx)
	if len(o.Host) > 0 && !o.Shell {
		m := &Monitor{path: mon, taps: taps[len(o.Shape.NICs):], ns: ns, nicTaps: taps[:len(o.Shape.NICs)]}
		go func() { hostErr <- serveHost(hostCtx, console, m, o.Host) }()
	} else {
		hostErr <- nil
	}
	runErr := cmd.Wait()
	stopHost()
	cancelHost := <-hostErr
	res := &Result{Elapsed: time.Since(start), Kernel: k.Release}
	cb, _ := os.ReadFile(console)
	cb = bytes.ReplaceAll(cb, []byte("\r\n"), []byte("\n")) // the tty's ONLCR
	res.Console = string(cb)
	ob := cb
	if err := stoppedErr(parent, ctx, o.Shape.Name, o.Timeout, res.Elapsed); err != nil {
		return res, fmt.Errorf("%w (console:\n%s)", err, tail(res.Console, 3000))
	}
	if runErr != nil {
		return res, fmt.Errorf("qemu: %v: %s\nconsole:\n%s", runErr, qerr.String(), tail(res.Console, 3000))
	}
	if cancelHost != nil {
		return res, fmt.Errorf("lab %s: host action: %w", o.Shape.Name, cancelHost)
	}
	if o.Shell {
		return res, nil
	}
	begin := bytes.Index(ob, []byte("@@LAB-BEGIN@@\n"))
	m := reEnd.FindSubmatchIndex(ob)
	if begin < 0 || m == nil {
		return res, fmt.Errorf("lab %s: the guest did not finish its script (console:\n%s)", o.Shape.Name, tail(res.Console, 3000))
	}
	res.Output = string(ob[begin+len("@@LAB-BEGIN@@\n") : m[0]])
	res.ExitCode, _ = strconv.Atoi(string(ob[m[2]:m[3]]))
	return res, nil
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}

// tapNamespace creates a network namespace with a tap per NIC, for QEMU's
// NIC backends; cleanup deletes it (and so the taps). fs is the host.
func tapNamespace(fs *kernel.FS, dir string, nics []NIC) (name string, taps []string, cleanup func(), err error) {
	name, cleanup, err = inNewNamespace(fs, "irqplab-", dir, func(ns string) error {
		for i, nic := range nics {
			t, err := addTap(ns, fmt.Sprintf("tap%d", i), nic.Queues)
			if err != nil {
				return err
			}
			taps = append(taps, t.Name)
		}
		return nil
	})
	return name, taps, cleanup, err
}

// inNewNamespace creates a network namespace named prefix and a random
// suffix and runs build inside it (kernel.InNetns: what build creates —
// taps, a bridge — is created in the namespace). cleanup deletes the
// namespace and all that is in it; on an error nothing is left. The owner
// file in ownerDir names this process of fs's machine, the host.
func inNewNamespace(fs *kernel.FS, prefix, ownerDir string, build func(ns string) error) (name string, cleanup func(), err error) {
	var b [4]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", nil, err
	}
	name = prefix + hex.EncodeToString(b[:])
	if err := markOwner(fs, ownerDir, name); err != nil {
		return "", nil, err
	}
	if err := kernel.AddNetns(name); err != nil {
		return "", nil, fmt.Errorf("lab namespace: %w", err)
	}
	cleanup = func() { _ = kernel.DelNetns(name) }
	if err := kernel.InNetns(name, func() error { return build(name) }); err != nil {
		cleanup()
		return "", nil, err
	}
	return name, cleanup, nil
}

// addTap creates a persistent tap in the current namespace, multi-queue
// when queues > 1 (QEMU refuses a multi-queue tap for a single-queue
// backend, and the reverse), and sets it up.
func addTap(ns, name string, queues int) (*netlink.Tuntap, error) {
	flags := netlink.TUNTAP_NO_PI | netlink.TUNTAP_VNET_HDR
	if queues > 1 {
		flags |= netlink.TUNTAP_MULTI_QUEUE
	}
	t := &netlink.Tuntap{LinkAttrs: netlink.LinkAttrs{Name: name}, Mode: netlink.TUNTAP_MODE_TAP, Flags: flags}
	if err := netlink.LinkAdd(t); err != nil {
		return nil, fmt.Errorf("tap %s in %s: %w", name, ns, err)
	}
	return t, netlink.LinkSetUp(t)
}

// stoppedErr says why a guest was stopped before it gave a result: the
// caller's context ended (a stop signal, Ctrl-C) or the run's own timeout
// did. nil when neither.
func stoppedErr(parent, run context.Context, shape string, timeout, elapsed time.Duration) error {
	switch {
	case parent.Err() != nil:
		return fmt.Errorf("lab %s: stopped after %s, before a result (%v)", shape, elapsed.Round(time.Second), context.Cause(parent))
	case run.Err() != nil:
		return fmt.Errorf("lab %s: no result within %s", shape, timeout)
	}
	return nil
}
