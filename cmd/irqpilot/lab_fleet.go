package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"time"

	"github.com/irqpilot/irqpilot/internal/kernel"
	"github.com/irqpilot/irqpilot/internal/lab"
)

// runFleet starts a fleet, says how to reach it and keeps it up until
// interrupted (or --timeout).
func (o *labOptions) runFleet(ctx context.Context, out, errw io.Writer) error {
	if os.Geteuid() != 0 {
		return fmt.Errorf("lab needs root: it creates a network namespace for the guests' NICs")
	}
	for _, c := range []string{"ssh-keygen", "mke2fs", "mmdebstrap"} {
		if _, err := exec.LookPath(c); err != nil {
			return fmt.Errorf("--fleet needs %s: %w", c, err)
		}
	}
	dir := o.dir
	if dir == "" {
		var err error
		if dir, err = os.MkdirTemp("", "irqpilot-fleet-ctl-"); err != nil {
			return err
		}
	} else if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	key := filepath.Join(dir, "id_ed25519")
	pub, err := lab.SSHKey(key, "irqpilot-lab-fleet", false)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(ctx, stopSignals...)
	defer stop()
	f, err := lab.StartFleet(ctx, lab.FleetOptions{FS: kernel.New("/"), N: o.fleet, AuthorizedKey: pub, Log: errw})
	if err != nil {
		return err
	}
	defer f.Stop()
	wctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	if err := f.WaitSSH(wctx); err != nil {
		return err
	}
	kh := filepath.Join(dir, "known_hosts")
	if err := copyFile(f.KnownHosts, kh); err != nil {
		return err
	}
	inv := fmt.Sprintf("all:\n  vars:\n    ansible_user: %s\n    ansible_ssh_private_key_file: %s\n"+
		"    ansible_ssh_common_args: \"-o UserKnownHostsFile=%s -o StrictHostKeyChecking=yes\"\n"+
		"    ansible_python_interpreter: /usr/bin/python3\n  children:\n    irqpilot:\n      hosts:\n", lab.FleetUser, key, kh)
	for _, g := range f.Guests {
		inv += fmt.Sprintf("        %s:\n          ansible_host: %s\n", g.Name, g.Addr)
	}
	if err := os.WriteFile(filepath.Join(dir, "hosts.yml"), []byte(inv), 0o644); err != nil {
		return err
	}
	fmt.Fprintf(out, "fleet of %d up; the guests are reachable only from the namespace %s\n", len(f.Guests), f.Namespace)
	for _, g := range f.Guests {
		fmt.Fprintf(out, "  %s  %s  (up %s)\n", g.Name, g.Addr, g.Booted.Round(time.Second))
	}
	fmt.Fprintf(out, "ssh:     ip netns exec %s ssh -i %s -o UserKnownHostsFile=%s %s@%s\n", f.Namespace, key, kh, lab.FleetUser, f.Guests[0].Addr)
	fmt.Fprintf(out, "ansible: ip netns exec %s ansible-playbook -i %s deploy/ansible/site.yml -e irqpilot_deb=$PWD/dist/irqpilot_<version>_amd64.deb\n", f.Namespace, filepath.Join(dir, "hosts.yml"))
	fmt.Fprintf(out, "Ctrl-C powers the fleet off and deletes the namespace and the guests' disks.\n")
	<-ctx.Done()
	fmt.Fprintf(errw, "lab: stopping the fleet\n")
	return nil
}

func copyFile(from, to string) error {
	b, err := os.ReadFile(from)
	if err != nil {
		return err
	}
	return os.WriteFile(to, b, 0o644)
}
