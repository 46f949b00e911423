package scenarios

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"

	"github.com/kvlease/kvlease/internal/e2e"
)

const pdPrompt = "Disaggregated serving moves the prompt's KV cache from a prefill engine to a decode engine."

// S1: P prefills, D pulls and decodes. D's tokens equal the single
// engine's; D pulled every block of the prompt (D runs --fallback fail, so
// a failed pull would be an error, not a silent recompute); P frees on
// read_done.
func TestE2ES01HappyPath(t *testing.T) {
	skipShort(t)
	p := startP(t)
	d := startD(t, "D", "--fallback", "fail")
	j := job{id: "s01", prompt: pdPrompt, maxTokens: 24, seed: 1}
	kv := p.prefill(t, j)
	pm := p.metrics(t)
	if pm.held() == 0 || pm.get("kvlease_leases_active") != 1 {
		t.Fatalf("P after the prefill: %v held blocks, %v leases", pm.held(), pm.get("kvlease_leases_active"))
	}
	heldByLease := pm.held()
	decodeMatches(t, d, j, kv)
	e2e.WaitFor(t, "P to free the read blocks", func() bool { return p.metrics(t).held() == 0 })
	wantReleased(t, p, map[string]float64{"read_done": 1})
	dm := d.metrics(t)
	if got := dm.get("kvlease_transfer_blocks_total", "source", "pulled"); got != heldByLease {
		t.Errorf("D pulled %v blocks, P leased %v", got, heldByLease)
	}
	if got := dm.sum("kvlease_remote_prefill_fallbacks_total"); got != 0 {
		t.Errorf("D fell back %v times", got)
	}
	checkSettled(t, p, d)
}

// rawPrefillRequest is the HTTP/1.1 request of a prefill leg, padded to
// exactly size bytes by dots at the end of its prompt; it returns the
// request and the padded prompt.
func rawPrefillRequest(id, prompt string, size int) ([]byte, string) {
	build := func(prompt string) string {
		body := prefillBody(prompt)
		return "POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n" +
			"X-Request-Id: " + id + "\r\nContent-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + body
	}
	pad := size - len(build(prompt))
	for range 3 { // the Content-Length's digits may change with the padding
		padded := prompt + strings.Repeat(".", pad)
		s := build(padded)
		if len(s) == size {
			return []byte(s), padded
		}
		pad += size - len(s)
	}
	panic("rawPrefillRequest: cannot pad to " + strconv.Itoa(size))
}

// S4: the client of the prefill leg disconnects in the instant P finishes,
// so the response carrying the lease token is never delivered: P frees at
// once with reason undelivered (no abort needed, no double free, no crash).
//
// How the test makes that deterministic. kvlease's HTTP server (package
// httpserver) notices a client's disconnect in two ways: its reader, which reads
// the connection all the time, gets EOF or a reset and cancels the
// request's context — P would then abort the request while it prefills
// (S3, no lease); or a failed write of the response. The reader reads
// ahead at most 64 KiB of what follows a request (a pipelined request),
// then stops until the handler is done, and with it stops watching the
// connection. The client here (1) sends the request and, in the same
// write, the start of a pipelined request longer than that read-ahead, so
// the server's reader stops with bytes still in the socket. (2) Once P
// shows the request waiting in its queue (P runs --max-num-seqs 1 and a
// long request is ahead of it), the client closes with SO_LINGER 0, which
// sends a reset at once. (3) The test aborts the long request; P
// prefills (its request's context stays alive), finishes, grants the
// lease, writes the response to the reset socket, gets an error, and
// reports the response undelivered: released{undelivered} = 1, every
// block free. The reset precedes the prefill whatever the machine's
// speed.
//
// Closing with a FIN instead (a plain close) would not do: a write to a
// peer that only sent a FIN succeeds, so P would count the response as
// delivered, and only a later abort from the proxy would release the lease
// (reason aborted) — racing with P's own record of the delivery, hence not
// deterministic.
//
// Then the same request goes through P and a D normally: P's pool serves
// it (its prompt blocks now come from P's prefix cache) and D's tokens equal
// the single engine's.
func TestE2ES04AbortAfterFinishUndelivered(t *testing.T) {
	skipShort(t)
	p := startP(t, "--max-num-seqs", "1")
	req, prompt := rawPrefillRequest("s04", pdPrompt+" ", 4096)
	// More than httpserver's 64 KiB read-ahead and its 16 KiB read.
	pipelined := "GET /health HTTP/1.1\r\nX-Filler: " + strings.Repeat("f", 160<<10)
	b := startBlocker(t, p, "s04-blocker", 8000)

	c, err := net.Dial("tcp", strings.TrimPrefix(p.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Write(append(req, pipelined...)); err != nil {
		t.Fatal(err)
	}
	e2e.WaitFor(t, "P to queue the prefill leg behind the blocker", func() bool {
		return p.metrics(t).get("vllm:num_requests_waiting") == 1
	})
	c.(*net.TCPConn).SetLinger(0)
	c.Close()
	if got := p.abort(t, b.id); got != "aborted" {
		t.Fatalf("abort of the blocker: %s; want aborted (it must still run)", got)
	}
	if err := <-b.done; err != nil {
		t.Fatalf("blocker: %v", err)
	}

	// The request ends (finished, or aborted while waiting if the server
	// noticed the disconnect), then P holds nothing (at once if
	// undelivered; at the lease's expiry if the write had succeeded).
	e2e.WaitFor(t, "P to end the request and free its blocks", func() bool {
		m := p.metrics(t)
		return m.sum("vllm:request_success_total") == 2 && m.held() == 0
	})
	pm := p.metrics(t)
	switch {
	case pm.get("vllm:request_success_total", "finished_reason", "abort") != 1: // the blocker's
		t.Fatalf("P aborted the request before its prefill (S3): the server saw the disconnect before the finish")
	case pm.get("kvlease_leases_granted_total") != 1:
		t.Fatalf("P granted %v leases, want 1", pm.get("kvlease_leases_granted_total"))
	}
	wantReleased(t, p, map[string]float64{"undelivered": 1})
	if got := pm.get("kvlease_leases_active"); got != 0 {
		t.Errorf("P has %v live leases", got)
	}

	d := startD(t, "D", "--fallback", "fail")
	j := job{id: "s04-again", prompt: prompt, maxTokens: 16, seed: 4}
	kv := p.prefill(t, j)
	decodeMatches(t, d, j, kv)
	e2e.WaitFor(t, "P to free the read blocks", func() bool { return p.metrics(t).held() == 0 })
	wantReleased(t, p, map[string]float64{"undelivered": 1, "read_done": 1})
	checkSettled(t, p, d)
}

// S7: D refuses the request before admitting it — unknown model, invalid
// field, too long, queue full — the client gets the right status, and D's
// RELEASE(rejected) makes P free the blocks at once (reason rejected, long
// before the 3 s lease could expire). D then serves a valid request whose
// tokens equal the single engine's.
func TestE2ES07RejectionReleasesAtOnce(t *testing.T) {
	skipShort(t)
	p := startP(t)
	d := startD(t, "D", "--max-num-seqs", "1", "--max-waiting", "1", "--fallback", "fail")
	body := func(model string, maxTokens int, extra string) string {
		b, _ := json.Marshal(pdPrompt)
		return `{"model":"` + model + `","prompt":` + string(b) + `,"max_tokens":` + strconv.Itoa(maxTokens) + extra
	}
	cases := []struct {
		name   string
		body   string
		status int
		setup  func(t *testing.T) func() // returns the undo
	}{
		{name: "unknown model", body: body("other-model", 8, ""), status: 404},
		{name: "invalid field", body: body(modelName, 8, `,"top_p":7`), status: 400},
		{name: "too long", body: body(modelName, 100000, ""), status: 400},
		{name: "queue full", body: body(modelName, 8, ""), status: 429, setup: func(t *testing.T) func() {
			// One request running (--max-num-seqs 1) and one waiting
			// (--max-waiting 1): the queue is full.
			b := startBlocker(t, d, "s07-blocker", 8000)
			filler := make(chan error, 1)
			go func() {
				_, err := d.complete(context.Background(), job{id: "s07-filler", prompt: "Wait.", maxTokens: 4, seed: 1}, "s07-filler", nil)
				filler <- err
			}()
			e2e.WaitFor(t, "D's queue to fill", func() bool { return d.metrics(t).get("vllm:num_requests_waiting") == 1 })
			return func() {
				d.abort(t, "s07-filler")
				d.abort(t, b.id)
				if err := <-b.done; err != nil {
					t.Errorf("blocker: %v", err)
				}
				if err := <-filler; err != nil {
					t.Errorf("filler: %v", err)
				}
			}
		}},
	}
	for i, tc := range cases {
		undo := func() {}
		if tc.setup != nil {
			undo = tc.setup(t)
		}
		kv := p.prefill(t, job{id: fmt.Sprintf("s07-%d", i), prompt: pdPrompt})
		if p.metrics(t).held() == 0 {
			t.Fatalf("%s: P holds nothing for the lease", tc.name)
		}
		status, m := e2e.PostJSON(t, d.url+"/v1/completions", tc.body+`,"kv_transfer_params":`+string(kv)+`}`,
			"X-Request-Id", fmt.Sprintf("s07-%d", i))
		if status != tc.status || m["error"] == nil {
			t.Errorf("%s: D answered %d %v, want %d and an error", tc.name, status, m, tc.status)
		}
		e2e.WaitFor(t, tc.name+": P to free the rejected lease", func() bool { return p.metrics(t).held() == 0 })
		wantReleased(t, p, map[string]float64{"rejected": float64(i + 1)})
		undo()
	}
	j := job{id: "s07-ok", prompt: pdPrompt, maxTokens: 16, seed: 7}
	decodeMatches(t, d, j, p.prefill(t, j))
	e2e.WaitFor(t, "P to free the read blocks", func() bool { return p.metrics(t).held() == 0 })
	wantReleased(t, p, map[string]float64{"rejected": float64(len(cases)), "read_done": 1})
	// A notice not acknowledged within D's retry interval is sent again
	// (P counts it once): at least one per rejection.
	if got := d.metrics(t).get("kvlease_releases_sent_total", "reason", "rejected"); got < float64(len(cases)) {
		t.Errorf("D sent %v rejection notices, want at least %d", got, len(cases))
	}
	checkSettled(t, p, d)
}

// S9: D is congested (--max-num-seqs 1, a long request ahead): the P/D
// request waits in D's queue for more than 3 × the 3 s lease. D's batched
// heartbeats keep the lease alive — P holds the blocks all along, no
// release of any reason — then D pulls (--fallback fail: no silent
// recompute) and its tokens equal the single engine's.
//
// The engines run the llama-8b profile (digest-only: checksums instead of
// 2 MiB blocks), whose decode step is ≥ 6.5 ms: the modelled step time is a
// lower bound of the wall time, so the blocker's 8000 steps would keep D
// busy for ≥ 52 s. The test does not wait for that: once the request has
// waited 3 × the lease with P holding everything, it aborts the blocker,
// and D runs the request. So the wait is as long as the scenario needs,
// however slow or loaded the machine.
func TestE2ES09CongestedDecodeKeepsLease(t *testing.T) {
	skipShort(t)
	slow := []string{"--profile", "llama-8b", "--digest-only"}
	p := startP(t, slow...)
	d := startD(t, "D", append([]string{"--max-num-seqs", "1", "--fallback", "fail"}, slow...)...)
	b := startBlocker(t, d, "s09-blocker", 8000)
	j := job{id: "s09", prompt: pdPrompt, maxTokens: 16, seed: 9, modelArgs: slow}
	kv := p.prefill(t, j)
	leased := p.metrics(t).held()

	type result struct {
		c   *openai.Completion
		err error
	}
	res := make(chan result, 1)
	go func() {
		c, err := d.complete(context.Background(), j, j.id, kv)
		res <- result{c, err}
	}()
	e2e.WaitFor(t, "D to queue the request", func() bool {
		return d.metrics(t).get("kvlease_remote_prefill_requests", "state", "waiting") == 1
	})
	queued := time.Now()
	// While D's request waits, P must keep every leased block and release
	// nothing — not at the lease's first deadline, nor at any later one.
	// After 3 × the lease of that, the blocker is aborted and D pulls.
	var r result
	var waited time.Duration
	for done := false; !done; {
		select {
		case r = <-res:
			done = true
		case <-time.After(50 * time.Millisecond):
			if waited > 0 {
				continue // unblocked: D runs the request
			}
			elapsed := time.Since(queued) // before the look at P, so P held all along elapsed
			m := p.metrics(t)
			if m.held() != leased || len(m.released()) != 0 {
				t.Fatalf("P freed early, %v after D queued the request: %v held (leased %v), released %v",
					elapsed.Round(time.Millisecond), m.held(), leased, m.released())
			}
			if elapsed >= 3*lease {
				waited = elapsed
				if got := d.abort(t, b.id); got != "aborted" {
					t.Fatalf("abort of the blocker after %v: %s; want aborted (it must still run)", elapsed, got)
				}
			}
		}
	}
	if waited == 0 {
		t.Fatalf("D answered the request after %v in its queue, while the blocker still ran: %+v, %v",
			time.Since(queued).Round(time.Millisecond), r.c, r.err)
	}
	if r.err != nil {
		t.Fatalf("decode: %v", r.err)
	}
	if err := <-b.done; err != nil {
		t.Fatalf("blocker: %v", err)
	}
	t.Logf("the request waited %v in D's queue (lease %v)", waited.Round(time.Millisecond), lease)
	matchesReference(t, j, r.c)
	e2e.WaitFor(t, "P to free the read blocks", func() bool { return p.metrics(t).held() == 0 })
	wantReleased(t, p, map[string]float64{"read_done": 1})
	dm := d.metrics(t)
	// A heartbeat every lease/6 while waiting; ask for a third of them.
	if got, min := dm.get("kvlease_lease_renewals_sent_total"), float64(3*lease/(lease/6))/3; got < min {
		t.Errorf("D sent %v heartbeats over %v, want at least %v", got, waited, min)
	}
	if got := dm.get("kvlease_transfer_blocks_total", "source", "pulled"); got != leased {
		t.Errorf("D pulled %v blocks, P leased %v", got, leased)
	}
	checkSettled(t, p, d)
}

// S10: D is killed (SIGKILL) after admitting the request and renewing its
// lease, before pulling. P frees the blocks once the connection is gone and
// the peer grace (lease/15) has passed: reason peer_lost, which P gives
// only when the loss precedes the lease's deadline. A restarted D handed
// the same kv_transfer_params finds the lease gone and recomputes: its
// tokens still equal the single engine's.
func TestE2ES10DecodeKilledPeerLost(t *testing.T) {
	skipShort(t)
	p := startP(t)
	d := startD(t, "D", "--max-num-seqs", "1")
	startBlocker(t, d, "s10-blocker", 8000)
	j := job{id: "s10", prompt: pdPrompt, maxTokens: 16, seed: 10}
	kv := p.prefill(t, j)
	gone := make(chan error, 1)
	go func() {
		_, err := d.complete(context.Background(), j, j.id, kv)
		gone <- err
	}()
	// Two heartbeats sent: the first reached P a heartbeat interval ago and
	// bound the lease to D's session.
	e2e.WaitFor(t, "D to queue the request and renew its lease", func() bool {
		m := d.metrics(t)
		return m.get("kvlease_remote_prefill_requests", "state", "waiting") == 1 && m.get("kvlease_lease_renewals_sent_total") >= 2
	})
	if m := p.metrics(t); m.held() == 0 || len(m.released()) != 0 {
		t.Fatalf("P before the kill: %v held, released %v", m.held(), m.released())
	}
	d.kill9(t)
	killed := time.Now()
	if err := <-gone; err == nil {
		t.Errorf("the request to the killed D succeeded")
	}
	e2e.WaitFor(t, "P to release the lease of the lost peer", func() bool {
		m := p.metrics(t)
		return m.held() == 0 && len(m.released()) > 0
	})
	t.Logf("P freed the blocks within %v of the kill", time.Since(killed).Round(time.Millisecond))
	wantReleased(t, p, map[string]float64{"peer_lost": 1})

	d2 := startD(t, "D2")
	decodeMatches(t, d2, j, kv)
	if got := d2.metrics(t).sum("kvlease_remote_prefill_fallbacks_total"); got != 1 {
		t.Errorf("the restarted D fell back %v times, want 1", got)
	}
	wantReleased(t, p, map[string]float64{"peer_lost": 1})
	checkSettled(t, p, d2)
}
