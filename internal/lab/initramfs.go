package lab

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"
)

// The guest's /init: mount what irqpilot reads, load the drivers in
// dependency order, bring the links up, run /lab/run.sh with its output on
// the console between markers (the kernel's messages below emergency level
// silenced meanwhile), and power off. In shell mode it starts a shell on the console instead.
const initScript = `#!/bin/busybox sh
/bin/busybox --install -s /bin
export PATH=/bin:/usr/sbin
mkdir -p /proc /sys /dev /tmp /run /var/lib /etc
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
mount -t tmpfs tmp /tmp
mount -t tmpfs run /run
mount -t debugfs debugfs /sys/kernel/debug 2>/dev/null
mount -t bpf bpf /sys/fs/bpf 2>/dev/null
while read m; do insmod /lib/modules/$m 2>>/tmp/insmod.err; done < /etc/lab-modules
# give the drivers their links before the script looks
i=0; while [ $i -lt 50 ] && [ -z "$(ls /sys/class/net | grep -v '^lo$')" ]; do sleep 0.1; i=$((i+1)); done
for d in /sys/class/net/*; do ip link set "$(basename $d)" up 2>/dev/null; done
echo lab-guest > /proc/sys/kernel/hostname
# a fleet guest's static address (lab.addr=A/N on eth0), before systemd
for a in $(cat /proc/cmdline); do case "$a" in lab.addr=*) ip addr add "${a#lab.addr=}" dev eth0;; esac; done
if grep -q lab.root /proc/cmdline; then
  # the systemd guest: its root is the disk with serial "labroot"
  for b in /sys/block/*; do [ "$(cat $b/serial 2>/dev/null)" = labroot ] && root=/dev/$(basename $b); done
  mkdir -p /newroot && mount -t ext4 "$root" /newroot || { echo "lab: no root disk" > /dev/console; poweroff -f; }
  umount /sys/kernel/debug /sys/fs/bpf 2>/dev/null
  mount --move /dev /newroot/dev
  umount /tmp /run /sys /proc
  exec switch_root /newroot /sbin/init
fi
echo "lab: $(nproc) CPUs up, drivers loaded" > /dev/console
if grep -q lab.shell /proc/cmdline; then
  echo "irqpilot lab: shell on $(nproc) CPUs; 'poweroff -f' ends the machine"
  setsid cttyhack sh
else
  # only emergencies from the kernel while the script's output is on the console
  echo 1 > /proc/sys/kernel/printk
  echo "@@LAB-BEGIN@@" > /dev/console
  sh /lab/run.sh > /dev/console 2>&1
  echo "@@LAB-END rc=$?@@" > /dev/console
fi
# let the UART drain before the machine goes away
sleep 1
poweroff -f
`

// cpioWriter writes the "newc" format the kernel unpacks into its initial
// root. Written here because no maintained Go library in this project's
// dependencies speaks it and the format is a fixed ASCII header per entry.
type cpioWriter struct {
	w   *bufio.Writer
	ino int
}

func (c *cpioWriter) entry(name string, mode uint32, data []byte) error {
	c.ino++
	hdr := fmt.Sprintf("070701%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X",
		c.ino, mode, 0, 0, 1, 0, len(data), 0, 0, 0, 0, len(name)+1, 0)
	if _, err := c.w.WriteString(hdr + name + "\x00"); err != nil {
		return err
	}
	c.pad(110 + len(name) + 1)
	if _, err := c.w.Write(data); err != nil {
		return err
	}
	c.pad(len(data))
	return nil
}

func (c *cpioWriter) pad(n int) {
	for ; n%4 != 0; n++ {
		c.w.WriteByte(0)
	}
}

func (c *cpioWriter) dir(name string) error { return c.entry(name, 0o040755, nil) }

func (c *cpioWriter) file(name string, mode uint32, data []byte) error {
	return c.entry(name, 0o100000|mode, data)
}

func (c *cpioWriter) symlink(name, target string) error {
	return c.entry(name, 0o120777, []byte(target))
}

func (c *cpioWriter) close() error {
	if err := c.entry("TRAILER!!!", 0, nil); err != nil {
		return err
	}
	return c.w.Flush()
}

// mkdirs adds every parent directory of name not added yet.
func mkdirs(c *cpioWriter, seen map[string]bool, name string) error {
	d := path.Dir(name)
	if d == "." || d == "/" || seen[d] {
		return nil
	}
	if err := mkdirs(c, seen, d); err != nil {
		return err
	}
	seen[d] = true
	return c.dir(d)
}

// guestFile is one file put into the guest.
type guestFile struct {
	name string // path in the guest, without leading /
	mode uint32
	data []byte
}

// writeInitramfs writes the guest's root: busybox, the init script, the
// kernel's modules for the shapes, irqpilot, and the extra files.
func writeInitramfs(w io.Writer, k *Kernel, busybox, irqpilot string, extra []guestFile) error {
	order, err := k.moduleOrder(guestModules)
	if err != nil {
		return err
	}
	// The guest loads them decompressed, under their plain names.
	names := make([]string, len(order))
	for i, m := range order {
		names[i] = strings.TrimSuffix(m, ".xz")
	}
	c := &cpioWriter{w: bufio.NewWriterSize(w, 1<<20)}
	seen := map[string]bool{}
	add := func(f guestFile) error {
		if err := mkdirs(c, seen, f.name); err != nil {
			return err
		}
		return c.file(f.name, f.mode, f.data)
	}
	read := func(p string) ([]byte, error) { return os.ReadFile(p) }

	bb, err := read(busybox)
	if err != nil {
		return fmt.Errorf("busybox (Debian's busybox-static): %w", err)
	}
	files := []guestFile{
		{"bin/busybox", 0o755, bb},
		{"init", 0o755, []byte(initScript)},
		{"etc/lab-modules", 0o644, []byte(strings.Join(names, "\n") + "\n")},
	}
	// A fleet's guests get irqpilot from their package only.
	if irqpilot != "" {
		ip, err := read(irqpilot)
		if err != nil {
			return fmt.Errorf("irqpilot for the guest: %w", err)
		}
		files = append(files, guestFile{"usr/sbin/irqpilot", 0o755, ip})
	}
	for i, m := range order {
		b, err := readModule(filepath.Join(k.ModDir, m))
		if err != nil {
			return err
		}
		files = append(files, guestFile{"lib/modules/" + names[i], 0o644, b})
	}
	files = append(files, extra...)
	for _, f := range files {
		if err := add(f); err != nil {
			return err
		}
	}
	if err := mkdirs(c, seen, "bin/x"); err != nil {
		return err
	}
	if err := c.symlink("bin/sh", "busybox"); err != nil {
		return err
	}
	return c.close()
}
