package chaos

import (
	"context"
	"testing"
)

// TestHarnessNoFault: across namespaces, with no fault, every answer
// equals the single engine's and every lease ends read.
func TestHarnessNoFault(t *testing.T) {
	h := start(t, Options{})
	ctx := context.Background()
	var tally Tally
	for i := range 6 {
		res, err := h.Do(ctx, Request{Prompt: i % len(prompts), Seed: i % 3, Stream: i%2 == 0})
		must(t, err)
		tally.Add(res)
	}
	checkAnswers(t, &tally)
	settle(t, h)
	if got := released(t, h, "read_done"); got["read_done"] != 6 {
		t.Errorf("read_done = %v, want 6", got["read_done"])
	}
}
