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
// shared. Here a goroutine of its own enters the new namespace and goes
// back to the one it came from on every path: the thread may be the
// process's first, whose namespace /proc/self/ns/net shows. Only if going
// back fails does the goroutine end with its thread locked, so that the
// runtime retires the thread instead of running other goroutines on it.
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
	err = onOwnThread(func() error {
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			return fmt.Errorf("unshare: %w", err)
		}
		if err := unix.Mount(fmt.Sprintf("/proc/self/task/%d/ns/net", unix.Gettid()), p, "none", unix.MS_BIND, ""); err != nil {
			return fmt.Errorf("mount on %s: %w", p, err)
		}
		return nil
	})
	if err != nil {
		DelNetns(name)
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

// InNetns runs fn on a thread inside the named network namespace (name ""
// runs it where this process is), for what binds to the namespace it is
// made in: sockets, netlink handles, ethtool ioctls, taps. fn runs on a
// goroutine of its own whose thread goes back to the namespace it came
// from afterwards; if it cannot, the goroutine ends with the thread locked,
// so the runtime retires it rather than run other goroutines in the wrong
// namespace.
//
// Written here rather than with netns.Set on the caller's thread: the
// caller's goroutine may hold other locked state, and the thread may be
// the process's first, whose namespace /proc/self/ns/net shows.
func InNetns(name string, fn func() error) error {
	if name == "" {
		return fn()
	}
	target, err := os.Open(filepath.Join(RunNetNSDir, name))
	if err != nil {
		return fmt.Errorf("namespace %s: %w", name, err)
	}
	defer target.Close()
	var ferr error
	err = onOwnThread(func() error {
		if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
			return fmt.Errorf("enter: %w", err)
		}
		ferr = fn()
		return nil
	})
	if err != nil {
		return errors.Join(ferr, fmt.Errorf("namespace %s: %w", name, err))
	}
	return ferr
}

// onOwnThread runs work on a goroutine of its own, locked to its thread,
// and then puts that thread back into the network namespace it started
// in (work may leave it elsewhere). If that fails, the goroutine ends with
// the thread still locked, so the runtime retires it.
func onOwnThread(work func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := os.Open(fmt.Sprintf("/proc/self/task/%d/ns/net", unix.Gettid()))
		if err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("this thread's namespace: %w", err)
			return
		}
		defer orig.Close()
		werr := work()
		if err := unix.Setns(int(orig.Fd()), unix.CLONE_NEWNET); err != nil {
			errc <- errors.Join(werr, fmt.Errorf("back to the original namespace: %w", err))
			return // still locked: the thread is retired
		}
		runtime.UnlockOSThread()
		errc <- werr
	}()
	return <-errc
}
