package lab

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// The systemd guest: a Debian root file system built from Debian's
// packages with mmdebstrap (cached), put on an ext4 image with mke2fs -d
// (no loop mount), with the .deb under test installed by dpkg in a chroot.
// The busybox initramfs loads the drivers and hands over to systemd on that
// image, so units, the watchdog, udev rules and reboots are the real ones.

// rootfsPackages are what the guest has besides the minimal base.
var rootfsPackages = []string{"systemd", "systemd-sysv", "udev", "kmod", "iproute2", "procps", "ethtool"}

// rootfsSuite is the Debian release the guest runs: the host's own.
const rootfsSuite = "bookworm"

// fleetPackages are what a fleet guest has besides rootfsPackages: an SSH
// server and what Ansible's modules need on the managed host (python3-apt
// brings python3; sudo for become). A separate cached root, so that the
// single guest's root is not rebuilt for them.
// memcached is the load the fleet serves; acpid powers a guest off when
// QEMU presses its power button (there is no D-Bus, so no logind).
var fleetPackages = []string{"openssh-server", "python3-apt", "sudo", "memcached", "acpid"}

// PrepareRootfs returns the cached Debian root file system, building it
// with mmdebstrap the first time (about two minutes).
func PrepareRootfs(cache string, log io.Writer) (string, error) {
	// irqbalance: the guest stops and starts its unit through systemd.
	// The fleet's guests go without it, so nothing moves their IRQs
	// behind the plans they are given.
	pkgs := append(append([]string(nil), rootfsPackages...), "irqbalance")
	return prepareRootfs(cache, "rootfs-"+rootfsSuite, pkgs, log)
}

// PrepareFleetRootfs returns the cached root of the fleet's guests: the
// systemd guest's packages and fleetPackages.
func PrepareFleetRootfs(cache string, log io.Writer) (string, error) {
	pkgs := append(append([]string(nil), rootfsPackages...), fleetPackages...)
	return prepareRootfs(cache, "rootfs-"+rootfsSuite+"-fleet", pkgs, log)
}

// prepareRootfs builds (once) the root named name in cache with pkgs; a
// stamp file with the package list decides whether the cached one fits.
func prepareRootfs(cache, name string, pkgs []string, log io.Writer) (string, error) {
	if err := os.MkdirAll(cache, 0o755); err != nil {
		return "", err
	}
	lf, err := os.OpenFile(filepath.Join(cache, "lock"), os.O_RDWR|os.O_CREATE|unix.O_NOFOLLOW, 0o600)
	if err != nil {
		return "", err
	}
	defer lf.Close()
	if err := unix.Flock(int(lf.Fd()), unix.LOCK_EX); err != nil {
		return "", err
	}
	dir := filepath.Join(cache, name)
	stamp := filepath.Join(dir, ".irqpilot-lab-packages")
	want := strings.Join(pkgs, ",")
	if b, err := os.ReadFile(stamp); err == nil && string(b) == want {
		return dir, nil
	}
	if _, err := exec.LookPath("mmdebstrap"); err != nil {
		return "", fmt.Errorf("the systemd guest needs mmdebstrap (Debian's package): %w", err)
	}
	fmt.Fprintf(log, "lab: building the guest's Debian %s root with mmdebstrap into %s\n", rootfsSuite, dir)
	tmp := dir + ".tmp"
	_ = os.RemoveAll(tmp)
	cmd := exec.Command("mmdebstrap", "--mode=root", "--variant=minbase", "--include="+want, rootfsSuite, tmp)
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("mmdebstrap: %v\n%s", err, tail(string(out), 3000))
	}
	if err := os.WriteFile(filepath.Join(tmp, ".irqpilot-lab-packages"), []byte(want), 0o644); err != nil {
		return "", err
	}
	_ = os.RemoveAll(dir)
	return dir, os.Rename(tmp, dir)
}

// The unit that runs the lab's script once the system is up, and what it
// runs: output on the console between markers; a script that touches
// /run/lab-reboot asks for a reboot and is run again after it (its state on
// the image survives), otherwise the machine powers off.
const (
	labUnit = `[Unit]
Description=irqpilot lab script
After=multi-user.target
[Service]
Type=oneshot
ExecStart=/bin/sh /lab/wrap.sh
StandardOutput=file:/dev/ttyS0
StandardError=file:/dev/ttyS0
[Install]
WantedBy=multi-user.target
`
	labWrap = `[ -e /var/lib/lab-begun ] || { echo "@@LAB-BEGIN@@"; touch /var/lib/lab-begun; }
sh /lab/run.sh 2>&1; rc=$?
if [ -e /run/lab-reboot ]; then echo "lab: rebooting"; systemctl reboot; exit 0; fi
echo "@@LAB-END rc=$rc@@"
systemctl poweroff --no-block
`
)

// systemdImage builds the guest's root image in dir: the cached root, the
// .debs installed, the lab's unit and script, as ext4 from mke2fs -d.
func systemdImage(dir, rootfs string, debs []string, script string, files map[string][]byte, log io.Writer) (string, error) {
	root := filepath.Join(dir, "root")
	if out, err := exec.Command("cp", "-a", rootfs, root).CombinedOutput(); err != nil {
		return "", fmt.Errorf("copying the guest's root: %v\n%s", err, out)
	}
	for _, d := range debs {
		b, err := os.ReadFile(d)
		if err != nil {
			return "", err
		}
		in := filepath.Join("/tmp", filepath.Base(d))
		if err := os.WriteFile(filepath.Join(root, in), b, 0o644); err != nil {
			return "", err
		}
		out, err := exec.Command("chroot", root, "dpkg", "-i", in).CombinedOutput()
		if err != nil {
			return "", fmt.Errorf("installing %s in the guest: %v\n%s", filepath.Base(d), err, out)
		}
		fmt.Fprintf(log, "lab: installed %s in the guest\n", filepath.Base(d))
		_ = os.Remove(filepath.Join(root, in))
	}
	put := map[string][]byte{
		"lab/run.sh":                         []byte(script + "\n"),
		"lab/wrap.sh":                        []byte(labWrap),
		"etc/systemd/system/lab-run.service": []byte(labUnit),
		"etc/hostname":                       []byte("lab-guest\n"),
	}
	for p, b := range files {
		put[filepath.Join("lab", filepath.Clean("/"+p))] = b
	}
	for p, b := range put {
		if err := writeGuestFile(root, guestFile{p, 0o644, b}); err != nil {
			return "", err
		}
	}
	if err := enableUnit(root, "lab-run.service", "/etc/systemd/system/lab-run.service"); err != nil {
		return "", err
	}
	img := filepath.Join(dir, "root.img")
	out, err := exec.Command("mke2fs", "-q", "-t", "ext4", "-L", "irqpilot-root", "-d", root, img, "2G").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("mke2fs -d: %v\n%s", err, out)
	}
	_ = os.RemoveAll(root)
	return img, nil
}

// enableUnit links unit (its file at target) into multi-user.target and
// masks the gettys on the serial console and tty1: the console carries the
// lab's output, and nobody logs in there.
func enableUnit(root, unit, target string) error {
	links := map[string]string{
		"etc/systemd/system/multi-user.target.wants/" + unit: target,
		"etc/systemd/system/serial-getty@ttyS0.service":      "/dev/null",
		"etc/systemd/system/getty@tty1.service":              "/dev/null",
	}
	for p, target := range links {
		full := filepath.Join(root, p)
		_ = os.MkdirAll(filepath.Dir(full), 0o755)
		_ = os.Remove(full)
		if err := os.Symlink(target, full); err != nil {
			return err
		}
	}
	return nil
}

// sshdConfig: keys only, and only the host key the host knows.
const sshdConfig = `HostKey /etc/ssh/ssh_host_ed25519_key
PasswordAuthentication no
KbdInteractiveAuthentication no
PermitRootLogin no
UseDNS no
`

// fleetImages copies the cached root once, adds FleetUser with the
// authorized key and sudo, and writes one ext4 image per guest with its
// own host name and SSH host key (made here with ssh-keygen, so that the
// host can check it). Returns the images and the host public keys.
func fleetImages(dir, rootfs string, k *Kernel, n int, authorized string, log io.Writer) (imgs, hostKeys []string, err error) {
	root := filepath.Join(dir, "root")
	defer os.RemoveAll(root)
	if out, err := exec.Command("cp", "-a", rootfs, root).CombinedOutput(); err != nil {
		return nil, nil, fmt.Errorf("copying the guest's root: %v\n%s", err, out)
	}
	if out, err := exec.Command("chroot", root, "useradd", "--create-home", "--shell", "/bin/bash", FleetUser).CombinedOutput(); err != nil {
		return nil, nil, fmt.Errorf("useradd %s in the guest's root: %v\n%s", FleetUser, err, out)
	}
	put := []guestFile{
		{"home/" + FleetUser + "/.ssh/authorized_keys", 0o600, []byte(strings.TrimSpace(authorized) + "\n")},
		{"etc/sudoers.d/lab", 0o440, []byte(FleetUser + " ALL=(ALL:ALL) NOPASSWD: ALL\n")},
		{"etc/ssh/sshd_config.d/lab.conf", 0o644, []byte(sshdConfig)},
		{"etc/acpi/events/lab-powerbtn", 0o644, []byte(acpiPowerButton)},
	}
	for _, p := range put {
		if err := writeGuestFile(root, p); err != nil {
			return nil, nil, err
		}
	}
	if out, err := exec.Command("chroot", root, "chown", "-R", FleetUser+":"+FleetUser, "/home/"+FleetUser).CombinedOutput(); err != nil {
		return nil, nil, fmt.Errorf("chown in the guest's root: %v\n%s", err, out)
	}
	if err := os.Chmod(filepath.Join(root, "home", FleetUser, ".ssh"), 0o700); err != nil {
		return nil, nil, err
	}
	if err := fleetGuestExtras(root, k); err != nil {
		return nil, nil, err
	}
	// The package's keys were made once for the cached root: every guest
	// would share them. Each gets its own below.
	old, _ := filepath.Glob(filepath.Join(root, "etc/ssh/ssh_host_*"))
	for _, p := range old {
		_ = os.Remove(p)
	}
	if err := enableUnit(root, "ssh.service", "/lib/systemd/system/ssh.service"); err != nil {
		return nil, nil, err
	}
	key := filepath.Join(root, "etc/ssh/ssh_host_ed25519_key")
	for i := 0; i < n; i++ {
		name := fmt.Sprintf("fleet%d", i+1)
		if err := writeGuestFile(root, guestFile{"etc/hostname", 0o644, []byte(name + "\n")}); err != nil {
			return nil, nil, err
		}
		if err := writeGuestFile(root, guestFile{"etc/hosts", 0o644, []byte("127.0.0.1 localhost\n127.0.1.1 " + name + "\n")}); err != nil {
			return nil, nil, err
		}
		if err := writeGuestFile(root, guestFile{"etc/udev/rules.d/70-lab-addr.rules", 0o644, []byte(fmt.Sprintf(addrRule, FleetAddr(i), fleetPrefix))}); err != nil {
			return nil, nil, err
		}
		pub, err := SSHKey(key, name, true)
		if err != nil {
			return nil, nil, err
		}
		f := strings.Fields(pub)
		img := filepath.Join(dir, name+".img")
		if out, err := exec.Command("mke2fs", "-q", "-t", "ext4", "-L", "irqpilot-root", "-d", root, img, "2G").CombinedOutput(); err != nil {
			return nil, nil, fmt.Errorf("mke2fs -d: %v\n%s", err, out)
		}
		imgs = append(imgs, img)
		hostKeys = append(hostKeys, f[0]+" "+f[1])
		fmt.Fprintf(log, "lab: image for %s (%s) written\n", name, FleetAddr(i))
	}
	return imgs, hostKeys, nil
}

// acpiPowerButton makes acpid power the guest off when QEMU presses the
// power button (system_powerdown): without D-Bus there is no logind to do it.
const acpiPowerButton = "event=button[ /]power\naction=/usr/bin/systemctl poweroff\n"

// addrRule gives eth0 the guest's address again when the NIC comes back
// after a hot-unplug (the initramfs sets it only at boot).
const addrRule = `ACTION=="add", SUBSYSTEM=="net", KERNEL=="eth0", RUN+="/sbin/ip addr replace %s/%d dev eth0", RUN+="/sbin/ip link set eth0 up"
`

// fleetGuestExtras prepares the shared root for the fleet's faults and
// load: the kernel's ACPI button driver where udev finds it (so that the
// power button reaches acpid), and memcached listening on every address
// (Debian's default is loopback only), the load the fleet is driven with.
func fleetGuestExtras(root string, k *Kernel) error {
	rel := filepath.Base(k.ModDir)
	const button = "kernel/drivers/acpi/button.ko"
	b, err := readModule(filepath.Join(k.ModDir, button))
	if errors.Is(err, fs.ErrNotExist) {
		// Debian's kernels from 6.6 on: compressed, put in plain.
		b, err = readModule(filepath.Join(k.ModDir, button+".xz"))
	}
	if err != nil {
		return fmt.Errorf("the ACPI button driver: %w", err)
	}
	if err := writeGuestFile(root, guestFile{filepath.Join("lib/modules", rel, button), 0o644, b}); err != nil {
		return err
	}
	if out, err := exec.Command("chroot", root, "depmod", rel).CombinedOutput(); err != nil {
		return fmt.Errorf("depmod in the guest's root: %v\n%s", err, out)
	}
	conf := filepath.Join(root, "etc/memcached.conf")
	c, err := os.ReadFile(conf)
	if err != nil {
		return fmt.Errorf("memcached in the guest's root: %w", err)
	}
	c = []byte(strings.ReplaceAll(string(c), "\n-l 127.0.0.1", "\n-l 0.0.0.0"))
	return os.WriteFile(conf, c, 0o644)
}

func writeGuestFile(root string, f guestFile) error {
	full := filepath.Join(root, f.name)
	if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(full, f.data, os.FileMode(f.mode)); err != nil {
		return err
	}
	return os.Chmod(full, os.FileMode(f.mode))
}
