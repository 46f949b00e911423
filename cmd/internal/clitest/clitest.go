// Package clitest holds what the tests of the kvlease binaries' commands
// share: a buffer a command writes while the test reads it, and a wait for
// a line in it.
package clitest

import (
	"bytes"
	"regexp"
	"sync"
	"testing"
	"time"
)

// Buffer is a bytes.Buffer safe for a writer and a reader in two
// goroutines.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *Buffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *Buffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// WaitFor polls out until re matches and returns the match, or fails the
// test when the command exits first (its code on exited) or after a
// deadline.
func WaitFor(t *testing.T, out *Buffer, re *regexp.Regexp, exited <-chan int) []string {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		if m := re.FindStringSubmatch(out.String()); m != nil {
			return m
		}
		select {
		case code := <-exited:
			t.Fatalf("exited %d before printing %v:\n%s", code, re, out.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %v in output:\n%s", re, out.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
}
