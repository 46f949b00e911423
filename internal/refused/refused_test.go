//go:build unix

package refused

import (
	"errors"
	"net"
	"syscall"
	"testing"
)

// TestAddrRefuses dials the address and sees ECONNREFUSED, and sees that
// a listener cannot take the port while the test holds it.
func TestAddrRefuses(t *testing.T) {
	addr := Addr(t)
	_, err := net.Dial("tcp", addr)
	if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("dial %s: %v, want connection refused", addr, err)
	}
	if ln, err := net.Listen("tcp", addr); err == nil {
		ln.Close()
		t.Fatalf("a listener took %s while it was held", addr)
	}
}
