package e2e

import (
	"errors"
	"testing"
	"time"
)

func TestPoll(t *testing.T) {
	calls := 0
	if err := Poll(time.Minute, func() bool { calls++; return calls == 3 }); err != nil || calls != 3 {
		t.Errorf("a condition true at the third check: %v after %d checks", err, calls)
	}
	calls = 0
	if err := Poll(20*time.Millisecond, func() bool { calls++; return false }); !errors.Is(err, ErrTimeout) || calls < 2 {
		t.Errorf("a condition never true: %v after %d checks, want ErrTimeout after several", err, calls)
	}
}
