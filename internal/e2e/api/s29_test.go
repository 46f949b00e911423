package api

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/kvlease/kvlease/engine"
)

// streamCompletion streams a completion under X-Request-Id id with c and
// returns the number of chunks with text and the last finish_reason. When
// cancelAfter > 0 the client leaves after that many chunks.
func streamCompletion(ctx context.Context, c openai.Client, id, prompt string, maxTokens int64, cancelAfter int) (chunks int, finish string, err error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	p := completion(prompt, maxTokens)
	s := c.Completions.NewStreaming(ctx, p, option.WithHeader("X-Request-Id", id),
		option.WithJSONSet("ignore_eos", true))
	defer s.Close()
	for s.Next() {
		ck := s.Current()
		for _, ch := range ck.Choices {
			if ch.Text != "" {
				chunks++
			}
			if ch.FinishReason != "" {
				finish = string(ch.FinishReason)
			}
		}
		if cancelAfter > 0 && chunks >= cancelAfter {
			cancel()
			return chunks, finish, nil
		}
	}
	return chunks, finish, s.Err()
}

// TestE2ES29ReusedRequestID: two clients use one X-Request-Id at the same
// time. Through the proxy both are served (the engines see two requests),
// and one client leaving aborts only its own request and lease. Directly on
// an engine the second is refused while the first is in flight (a
// duplicate), and once it is accepted the first's departure cannot reach it.
func TestE2ES29ReusedRequestID(t *testing.T) {
	ctx := context.Background()
	t.Run("proxy", func(t *testing.T) {
		p := startEngine(t, engineOpts{role: engine.RolePrefill})
		d := startEngine(t, engineOpts{role: engine.RoleDecode})
		c := sdkClient(startProxy(t, p, d, nil), "unused")
		for round := range 3 {
			var wg sync.WaitGroup
			var bChunks int
			var bFinish string
			var bErr error
			wg.Go(func() {
				bChunks, bFinish, bErr = streamCompletion(ctx, c, "dup", "Client B keeps going.", 60, 0)
			})
			// A leaves after two chunks, while B (same id) streams.
			_, _, aErr := streamCompletion(ctx, c, "dup", "Client A leaves early.", 60, 2)
			wg.Wait()
			if aErr != nil && !errors.Is(aErr, context.Canceled) {
				t.Fatalf("round %d: A: %v", round, aErr)
			}
			if bErr != nil || bFinish != "length" || bChunks == 0 {
				t.Fatalf("round %d: B got %d chunks, finish %q, %v: A's departure reached B", round, bChunks, bFinish, bErr)
			}
		}
		waitForEngines(t, p, d)
		if got := p.metric(t, `kvlease_leases_released_total{model_name="`+modelName+`",reason="read_done"}`); got < 3 {
			t.Errorf("P released %v leases read_done, want B's 3 at least", got)
		}
	})
	t.Run("direct", func(t *testing.T) {
		// The slow profile keeps A running (400 steps of 25 ms) while B is
		// refused, however loaded the machine; A's client leaves after.
		e := startEngine(t, engineOpts{profile: "slow"})
		c := e.client()
		aCtx, aLeave := context.WithCancel(ctx)
		aStarted := make(chan struct{})
		aDone := make(chan error, 1)
		go func() {
			p := completion("Client A, directly.", 400)
			s := c.Completions.NewStreaming(aCtx, p, option.WithHeader("X-Request-Id", "dup"), option.WithJSONSet("ignore_eos", true))
			defer s.Close()
			if s.Next() {
				close(aStarted)
			}
			for s.Next() {
			}
			aDone <- s.Err()
		}()
		<-aStarted
		// B while A is in flight: refused as a duplicate.
		_, err := c.Completions.New(ctx, completion("Client B, too early.", 4), option.WithHeader("X-Request-Id", "dup"))
		var apiErr *openai.Error
		if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusBadRequest {
			t.Fatalf("B while A is in flight: %v, want 400", err)
		}
		aLeave()
		<-aDone
		// B once A is gone: accepted (retrying while A's abort lands),
		// and served to its end.
		deadline := time.Now().Add(10 * time.Second)
		for {
			chunks, finish, err := streamCompletion(ctx, c, "dup", "Client B, in time.", 40, 0)
			if errors.As(err, &apiErr) && apiErr.StatusCode == http.StatusBadRequest && time.Now().Before(deadline) {
				continue
			}
			if err != nil || finish != "length" || chunks == 0 {
				t.Fatalf("B: %d chunks, finish %q, %v", chunks, finish, err)
			}
			break
		}
		waitForEngines(t, e)
	})
}

// waitForEngines waits until no engine holds a block (every request and
// lease ended).
func waitForEngines(t *testing.T, engines ...*testEngine) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for _, e := range engines {
		for e.held(t) != 0 {
			if time.Now().After(deadline) {
				t.Fatalf("%s still holds %v blocks", e.url, e.held(t))
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
}
