package lab

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

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
	links := map[string]string{
		"etc/systemd/system/multi-user.target.wants/ssh.service": "/lib/systemd/system/ssh.service",
		"etc/systemd/system/serial-getty@ttyS0.service":          "/dev/null",
		"etc/systemd/system/getty@tty1.service":                  "/dev/null",
	}
	for p, target := range links {
		full := filepath.Join(root, p)
		_ = os.MkdirAll(filepath.Dir(full), 0o755)
		_ = os.Remove(full)
		if err := os.Symlink(target, full); err != nil {
			return nil, nil, err
		}
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
		_ = os.Remove(key)
		_ = os.Remove(key + ".pub")
		if out, err := exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", name, "-f", key).CombinedOutput(); err != nil {
			return nil, nil, fmt.Errorf("ssh-keygen: %v\n%s", err, out)
		}
		pub, err := os.ReadFile(key + ".pub")
		if err != nil {
			return nil, nil, err
		}
		f := strings.Fields(string(pub))
		if len(f) < 2 {
			return nil, nil, fmt.Errorf("ssh-keygen wrote %q", pub)
		}
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
	b, err := os.ReadFile(filepath.Join(k.ModDir, button))
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
