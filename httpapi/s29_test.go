package httpapi

import (
	"bufio"
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/kvlease/kvlease/engine"
	"github.com/kvlease/kvlease/sched"
	"github.com/kvlease/kvlease/wire"
)

// takeoverWriter is client A's side of S29: its first write calls takeover
// (which lets client B take A's X-Request-Id once A's request has finished
// in the engine) and then fails, as a write to a client that has gone does.
type takeoverWriter struct {
	h        http.Header
	takeover func()
	writes   int
}

func (w *takeoverWriter) Header() http.Header {
	if w.h == nil {
		w.h = http.Header{}
	}
	return w.h
}
func (w *takeoverWriter) WriteHeader(int) {}
func (w *takeoverWriter) Flush()          {}
func (w *takeoverWriter) Write(b []byte) (int, error) {
	if w.writes++; w.writes == 1 {
		w.takeover()
	}
	return 0, io.ErrClosedPipe
}

// postUntilAccepted sends body under X-Request-Id id until the engine stops
// refusing it as a duplicate of a live request (400), within a deadline.
func postUntilAccepted(t *testing.T, url, body, id string) *http.Response {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp := post(t, url, body, "X-Request-Id", id)
		if resp.StatusCode != http.StatusBadRequest {
			return resp
		}
		msg, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if !bytes.Contains(msg, []byte("already in progress")) || time.Now().After(deadline) {
			t.Fatalf("B refused: %s", msg)
		}
		time.Sleep(time.Millisecond) // polling for A's end, bounded above
	}
}

// TestS29HandlerAddressesItsOwnRequest: when A's handler acts after A's
// request finished in the engine and B took its X-Request-Id, the action
// reaches A's request and lease only.
func TestS29HandlerAddressesItsOwnRequest(t *testing.T) {
	// A's client is gone when the handler writes A's first event; by then A
	// has finished and B streams under the same id. The handler aborts A's
	// stream (it has not read A's finish yet): B runs to its end.
	t.Run("abort", func(t *testing.T) {
		n := newNode(t, nodeOpts{profile: "tiny"})
		s, url := newServer(t, n, nil)
		var bEvents *bufio.Reader
		var bBody io.Closer
		w := &takeoverWriter{takeover: func() {
			resp := postUntilAccepted(t, url+"/v1/completions", `{"prompt":"client B","max_tokens":100,"ignore_eos":true,"stream":true}`, "dup")
			bEvents, bBody = bufio.NewReader(resp.Body), resp.Body
			if line, err := bEvents.ReadString('\n'); err != nil || !strings.HasPrefix(line, "data: ") {
				t.Fatalf("B's first event: %q, %v", line, err)
			}
		}}
		req := httptest.NewRequest("POST", "/v1/completions",
			strings.NewReader(`{"prompt":"client A","max_tokens":2,"ignore_eos":true,"stream":true}`))
		req.Header.Set("X-Request-Id", "dup")
		s.ServeHTTP(w, req)
		if bEvents == nil {
			t.Fatal("A's handler never wrote")
		}
		defer bBody.Close()
		evs := events(t, bEvents)
		if len(evs) < 2 || evs[len(evs)-1] != "[DONE]" || !strings.Contains(evs[len(evs)-2], `"finish_reason":"length"`) {
			t.Fatalf("B's stream ended %q: A's handler reached B's request", evs[max(0, len(evs)-2):])
		}
		if st := n.Stats(); st.Finished[sched.FinishedAborted] != 0 {
			t.Fatalf("finished %v: a request was aborted", st.Finished)
		}
	})
	// On a prefill engine: A's answer (with its lease token) cannot be
	// written, after B, under the same id, was granted its own lease. A's
	// lease is released as undelivered; B's lives on; B's grant did not
	// release A's.
	t.Run("delivered", func(t *testing.T) {
		n := newNode(t, nodeOpts{role: engine.RolePrefill})
		s, url := newServer(t, n, nil)
		w := &takeoverWriter{takeover: func() {
			resp := postUntilAccepted(t, url+"/v1/completions", prefillBody, "dup")
			if m := readJSON(t, resp); m["kv_transfer_params"] == nil {
				t.Fatalf("B's prefill answer has no lease: %v", m)
			}
		}}
		req := httptest.NewRequest("POST", "/v1/completions", strings.NewReader(prefillBody))
		req.Header.Set("X-Request-Id", "dup")
		s.ServeHTTP(w, req)
		if w.writes == 0 {
			t.Fatal("A's handler never wrote")
		}
		waitFor(t, "A's undelivered lease to be released", func() bool {
			return n.Stats().Producer.Released[wire.ReasonUndelivered] == 1
		})
		st := n.Stats()
		if st.Producer.Active != 1 || st.Producer.Released[wire.ReasonAborted] != 0 {
			t.Fatalf("leases active %d, released %v: want B's lease alone live", st.Producer.Active, st.Producer.Released)
		}
	})
}
