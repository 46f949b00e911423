//go:build unix

// Package refused gives tests a loopback TCP address that refuses every
// connection for as long as the test runs.
//
// The usual trick (listen on port 0, note the port, close) leaves the port
// free: anything else listening meanwhile, a server of the same test
// included, can be handed that port, and the "dead" engine answers. A
// socket bound to the port but never listening keeps it taken, and the
// kernel refuses connections to it.
package refused

import (
	"net"
	"strconv"
	"syscall"
	"testing"
)

// Addr returns "127.0.0.1:PORT" for a port bound, not listening, and held
// until t ends: dialing it fails with "connection refused".
func Addr(t testing.TB) string {
	t.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Fatalf("refused: socket: %v", err)
	}
	t.Cleanup(func() { syscall.Close(fd) })
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatalf("refused: bind: %v", err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		t.Fatalf("refused: getsockname: %v", err)
	}
	in, ok := sa.(*syscall.SockaddrInet4)
	if !ok {
		t.Fatalf("refused: getsockname gave %T", sa)
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(in.Port))
}
