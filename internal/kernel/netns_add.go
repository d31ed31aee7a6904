package kernel

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"

	"golang.org/x/sys/unix"
)

// AddNetns creates the named network namespace as `ip netns add` does: a
// file in /run/netns with the namespace bind-mounted on it, /run/netns made
// a shared mount first so that a copy of the mount in another mount
// namespace (one `ip netns exec` made) goes when DelNetns unmounts it.
//
// Written here rather than with netns.NewNamed, which switches the calling
// thread into the new namespace and, when creating or mounting the file
// fails, returns with the thread still there; nor does it make /run/netns
// shared. Here a goroutine of its own enters the namespace and ends with
// its thread locked, so the runtime discards that thread and no other
// goroutine ever runs in the wrong namespace.
func AddNetns(name string) error {
	if err := shareNetnsDir(); err != nil {
		return fmt.Errorf("namespace %s: %w", name, err)
	}
	p := filepath.Join(RunNetNSDir, name)
	f, err := os.OpenFile(p, os.O_RDONLY|os.O_CREATE|os.O_EXCL, 0o444)
	if err != nil {
		return fmt.Errorf("namespace %s: %w", name, err)
	}
	f.Close()
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread dies with the goroutine
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			errc <- fmt.Errorf("unshare: %w", err)
			return
		}
		src := fmt.Sprintf("/proc/self/task/%d/ns/net", unix.Gettid())
		if err := unix.Mount(src, p, "none", unix.MS_BIND, ""); err != nil {
			errc <- fmt.Errorf("mount on %s: %w", p, err)
			return
		}
		errc <- nil
	}()
	if err := <-errc; err != nil {
		os.Remove(p)
		return fmt.Errorf("namespace %s: %w", name, err)
	}
	return nil
}

// shareNetnsDir makes /run/netns a shared mount, binding it onto itself
// first when it is not a mount point, as iproute2 does before its first
// `ip netns add`.
func shareNetnsDir() error {
	if err := os.MkdirAll(RunNetNSDir, 0o755); err != nil {
		return err
	}
	err := unix.Mount("", RunNetNSDir, "none", unix.MS_SHARED|unix.MS_REC, "")
	if errors.Is(err, unix.EINVAL) {
		if err = unix.Mount(RunNetNSDir, RunNetNSDir, "none", unix.MS_BIND|unix.MS_REC, ""); err != nil {
			return fmt.Errorf("bind %s: %w", RunNetNSDir, err)
		}
		err = unix.Mount("", RunNetNSDir, "none", unix.MS_SHARED|unix.MS_REC, "")
	}
	if err != nil {
		return fmt.Errorf("make %s shared: %w", RunNetNSDir, err)
	}
	return nil
}

// DelNetns removes the named namespace's name; the kernel frees it (and its
// veth end, whose peer goes with it) once nothing runs in it. Unlike
// netns.DeleteNamed it removes a name that is no longer (or never was) a
// mount point, as `ip netns del` does: a creator killed between creating the file
// and mounting the namespace on it leaves one.
func DelNetns(name string) error {
	p := filepath.Join(RunNetNSDir, name)
	if err := unix.Unmount(p, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("namespace %s: unmount: %w", name, err)
	}
	if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("namespace %s: delete: %w", name, err)
	}
	return nil
}
