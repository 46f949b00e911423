// Package plainsock is the plain-TCP baseline of the transfer benchmarks
// (transport/tcp's BenchmarkTransfer, internal/e2e/pd's
// BenchmarkRealKVTransfer42M): a connected loopback socket pair that moves
// the same bytes as the transfer being measured, in the same process run,
// with no framing, no sealing and no copy beyond the kernel's. Tests only.
package plainsock

import (
	"io"
	"net"
	"testing"
)

// Pair returns a connected loopback TCP pair: w writes, r reads. Both are
// closed when tb ends.
func Pair(tb testing.TB) (w, r net.Conn) {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		accepted <- c
	}()
	w, err = net.Dial("tcp", ln.Addr().String())
	if err != nil {
		tb.Fatal(err)
	}
	r = <-accepted
	if r == nil {
		tb.Fatal("accept failed")
	}
	tb.Cleanup(func() { w.Close(); r.Close() })
	return w, r
}

// Stream writes n copies of data on w (one Write each, from another
// goroutine) and reads them from r into readBuf (len(data) bytes, reused),
// and returns when all are read.
func Stream(tb testing.TB, w, r net.Conn, data, readBuf []byte, n int) {
	tb.Helper()
	writeErr := make(chan error, 1)
	go func() {
		for range n {
			if _, err := w.Write(data); err != nil {
				writeErr <- err
				return
			}
		}
		writeErr <- nil
	}()
	for range n {
		if _, err := io.ReadFull(r, readBuf); err != nil {
			tb.Fatal(err)
		}
	}
	if err := <-writeErr; err != nil {
		tb.Fatal(err)
	}
}
