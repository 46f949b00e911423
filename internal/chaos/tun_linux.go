package chaos

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"

	"golang.org/x/sys/unix"
)

// tunName is the TUN device inside every node's namespace.
const tunName = "kvtun"

// inNamespace runs fn on an OS thread that has entered the network
// namespace ns: sockets and TUN devices fn creates belong to ns, and stay
// usable from any goroutine afterwards. If the thread cannot go back to
// the harness's namespace, its goroutine exits locked and the runtime
// discards the thread.
func inNamespace(ns string, fn func() error) error {
	ch := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		back, err := enterAndRun(ns, fn)
		if back {
			runtime.UnlockOSThread()
		}
		ch <- err
	}()
	return <-ch
}

// enterAndRun runs on a locked thread; back reports whether the thread
// is in its own namespace again.
func enterAndRun(ns string, fn func() error) (back bool, err error) {
	self, err := os.Open("/proc/thread-self/ns/net")
	if err != nil {
		return true, err
	}
	defer self.Close()
	target, err := os.Open(filepath.Join("/run/netns", ns))
	if err != nil {
		return true, err
	}
	defer target.Close()
	if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
		return true, fmt.Errorf("chaos: setns %s: %w", ns, err)
	}
	err = fn()
	if e := unix.Setns(int(self.Fd()), unix.CLONE_NEWNET); e != nil {
		return false, errors.Join(err, fmt.Errorf("chaos: leaving namespace %s: %w", ns, e))
	}
	return true, err
}

// openTun creates a TUN device (IFF_TUN|IFF_NO_PI: one IP packet per read
// and write) named tunName inside the network namespace ns and returns
// the file this process holds it by. The device lives as long as the
// file: when the harness dies, however it dies, the kernel removes it.
// It also turns reverse-path filtering off in ns (a packet from a node
// whose route just moved off the TUN device is still let in) and IPv6 off
// on the device (nothing but the forwarded IPv4 goes through it).
func openTun(ns string) (*os.File, error) {
	var f *os.File
	err := inNamespace(ns, func() error {
		fd, err := unix.Open("/dev/net/tun", unix.O_RDWR|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
		if err != nil {
			return fmt.Errorf("chaos: /dev/net/tun: %w", err)
		}
		ifr, err := unix.NewIfreq(tunName)
		if err != nil {
			unix.Close(fd)
			return err
		}
		ifr.SetUint16(unix.IFF_TUN | unix.IFF_NO_PI)
		if err := unix.IoctlIfreq(fd, unix.TUNSETIFF, ifr); err != nil {
			unix.Close(fd)
			return fmt.Errorf("chaos: TUNSETIFF in %s: %w", ns, err)
		}
		// /proc/sys/net is the namespace of the thread that opens it.
		// The effective rp_filter is the larger of "all" and the
		// device's.
		for _, s := range []struct{ path, v string }{
			{"/proc/sys/net/ipv4/conf/all/rp_filter", "0"},
			{"/proc/sys/net/ipv4/conf/" + tunName + "/rp_filter", "0"},
			{"/proc/sys/net/ipv6/conf/" + tunName + "/disable_ipv6", "1"},
		} {
			if err := os.WriteFile(s.path, []byte(s.v), 0); err != nil && !errors.Is(err, os.ErrNotExist) {
				unix.Close(fd)
				return fmt.Errorf("chaos: %s in %s: %w", s.path, ns, err)
			}
		}
		// Non-blocking, so reads wait in Go's poller and Close ends them.
		f = os.NewFile(uintptr(fd), ns+"/"+tunName)
		return nil
	})
	return f, err
}
