package scenarios

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kvlease/kvlease/internal/e2e"
	"github.com/kvlease/kvlease/internal/llamatest"
	"github.com/kvlease/kvlease/model/llama"
	"github.com/kvlease/kvlease/wire"
)

// Issue 29: with a real model P's forward pass takes seconds; the engine
// loop hands it to the executor's goroutine and keeps serving RENEW, READ
// and RELEASE meanwhile.

// asyncModel writes, once per test process, a stories15M-shaped GGUF
// (Q8_0, random weights, a SentencePiece vocabulary) with a 2,048-token
// context: on one thread a 1,600-token prefill is a step of about a second.
var asyncModel = sync.OnceValues(func() (string, error) {
	c := llamatest.Shape15M
	c.MaxSeqLen = 2048
	w := llamatest.Random(c, 15, true)
	llamatest.Quantize(w, llama.Q8_0)
	v := llamatest.SPMVocab(c.VocabSize)
	var buf bytes.Buffer
	if err := llamatest.WriteGGUF(&buf, w, llamatest.GGUFOptions{Vocab: &v}); err != nil {
		return "", err
	}
	path := filepath.Join(tmpDir, "stories15m-q8.gguf")
	return path, os.WriteFile(path, buf.Bytes(), 0o644)
})

// modelArgs are the flags of an engine running asyncModel on one thread,
// with a lease of leaseFor. D's queue bound (--kv-max-queue-wait, 4 leases
// by default) is lifted: the tests hold a request in D's queue across more
// than four leases on purpose, to see its lease renewed while P computes.
func modelArgs(t testing.TB, leaseFor time.Duration) []string {
	t.Helper()
	path, err := asyncModel()
	if err != nil {
		t.Fatal(err)
	}
	return []string{"--model-file", path, "--threads", "1", "--num-blocks", "512", "--kv-lease", leaseFor.String(),
		"--kv-max-queue-wait", "0s"}
}

// tokenPrompt is n token ids from seed, none of them special.
func tokenPrompt(seed, n int) []int {
	p := make([]int, n)
	for i := range p {
		p[i] = 3 + (seed*7919+i*131)%31000
	}
	return p
}

// tokenBody is a completion of prompt (token ids) for max tokens, greedy,
// with extra fields (",..." or "").
func tokenBody(prompt []int, max int, extra string) string {
	p, _ := json.Marshal(prompt)
	return `{"model":"` + modelName + `","prompt":` + string(p) + `,"max_tokens":` + strconv.Itoa(max) +
		`,"temperature":0,"ignore_eos":true` + extra + `}`
}

// hammerTokens is the length of the hammer's prompts: on one thread a
// prefill step of about a second on a quiet machine (800 tokens were
// until the prompt path got faster: 0.3 s, under the 400 ms lease that
// TestE2ES31AsyncPrefillKeepsLeases needs its steps to outlast).
const hammerTokens = 1600

// hammer keeps e computing long prefills back to back (hammerTokens
// prompts, one token each, no lease) until stop is called, which returns
// their latencies; done counts those finished so far.
type hammerRun struct {
	done atomic.Int64
	stop func() []time.Duration
}

func hammer(t testing.TB, e *engine) *hammerRun {
	h := &hammerRun{}
	var lat []time.Duration
	quit, ended := make(chan struct{}), make(chan struct{})
	var failed atomic.Value
	go func() {
		defer close(ended)
		for i := 0; ; i++ {
			select {
			case <-quit:
				return
			default:
			}
			start := time.Now()
			status, m := e2e.Post(e.url+"/v1/completions", tokenBody(tokenPrompt(1000+i, hammerTokens), 1, ""))
			if status != 200 {
				failed.Store(fmt.Sprintf("long prefill %d: %d %v", i, status, m))
				return
			}
			lat = append(lat, time.Since(start))
			h.done.Add(1)
		}
	}()
	h.stop = func() []time.Duration {
		close(quit)
		<-ended
		if f := failed.Load(); f != nil {
			t.Fatal(f)
		}
		return lat
	}
	return h
}

// TestE2ES31AsyncPrefillKeepsLeases (issue 29, "done when" a): real
// processes, a real model, a lease (--kv-lease 400ms: heartbeat 67 ms)
// shorter than one of P's prefill steps. While P computes long prefills
// back to back, D — its one seat taken by a long generation — holds lease A
// in its queue for several leases and renews it; P's loop answers every
// RENEW between its steps' computations, so A never expires: D pulls it
// once its seat frees and P releases it read_done, with no lease expired
// and no fallback. (Before issue 29 P handled nothing during a step, and
// the lease expired.)
func TestE2ES31AsyncPrefillKeepsLeases(t *testing.T) {
	skipShort(t)
	const leaseFor = 400 * time.Millisecond
	args := modelArgs(t, leaseFor)
	p := startP(t, args...)
	d := startD(t, "D", append(args, "--max-num-seqs", "1")...)

	// A's prefill leg, before P gets busy.
	status, m := e2e.PostJSON(t, p.url+"/v1/completions", tokenBody(tokenPrompt(1, 200), 1, `,"stream":false,"kv_transfer_params":{"do_remote_decode":true}`))
	if status != 200 || m["kv_transfer_params"] == nil {
		t.Fatalf("A's prefill: %d %v", status, m)
	}
	kv, _ := json.Marshal(m["kv_transfer_params"])

	// D's seat: a long streamed generation, sent straight to D, that the
	// test's client leaves once A has waited long enough.
	ctx, leave := context.WithCancel(context.Background())
	defer leave()
	hog := make(chan error, 1)
	go func() {
		req, _ := http.NewRequestWithContext(ctx, "POST", d.url+"/v1/completions",
			strings.NewReader(tokenBody(tokenPrompt(2, 20), 1500, `,"stream":true`)))
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			_, err = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		hog <- err
	}()
	e2e.WaitFor(t, "D to run its long generation", func() bool {
		return d.metrics(t).get("vllm:num_requests_running") == 1
	})
	// P computes long prefills back to back from now on.
	h := hammer(t, p)
	e2e.WaitFor(t, "P to compute a long prefill", func() bool {
		return p.metrics(t).get("vllm:num_requests_running") == 1
	})

	// A's decode leg waits in D's queue, renewing the lease, across
	// several leases and at least two of P's steps; then D's seat frees
	// and D pulls A from P, which is still busy.
	start := time.Now()
	type answer struct {
		status int
		m      map[string]any
	}
	ans := make(chan answer, 1)
	go func() {
		status, m := e2e.Post(d.url+"/v1/completions", tokenBody(tokenPrompt(1, 200), 8, `,"kv_transfer_params":`+string(kv)))
		ans <- answer{status, m}
	}()
	n0 := h.done.Load()
	var waited time.Duration
	if err := e2e.Poll(e2e.Timeout, func() bool {
		waited = time.Since(start)
		return h.done.Load() >= n0+2 && waited > 4*leaseFor
	}); err != nil {
		// A slow machine: the wait is bounded, what it saw is reported.
		t.Logf("after %v P finished %d long prefills", waited, h.done.Load()-n0)
	}
	leave()
	if err := <-hog; err == nil {
		t.Fatal("D's long generation ended before the client left: the test had no seat to hold A")
	}
	a := <-ans
	longs := h.stop()
	if a.status != 200 {
		t.Fatalf("A's decode leg: %d %v", a.status, a.m)
	}
	pm, dm := p.metrics(t), d.metrics(t)
	if rel := pm.released(); rel["read_done"] != 1 || len(rel) != 1 {
		t.Errorf("P's lease releases %v, want A's alone, read_done", rel)
	}
	if fb := dm.sum("kvlease_remote_prefill_fallbacks_total"); fb != 0 {
		t.Errorf("D fell back %v times", fb)
	}
	// What the test stands on: P's steps last longer than the lease, and
	// A waited at D across several of them.
	slices.Sort(longs)
	if len(longs) < 2 || longs[0] <= leaseFor || waited <= 4*leaseFor {
		t.Fatalf("P's long prefills took %v, A waited %v at D: the test needs steps over the %v lease and a wait over four leases",
			longs, waited, leaseFor)
	}
	t.Logf("A waited %v at D while P computed %d long prefills (%v to %v each) under a %v lease", waited.Round(time.Millisecond),
		len(longs), longs[0].Round(time.Millisecond), longs[len(longs)-1].Round(time.Millisecond), leaseFor)
}

// BenchmarkReadDuringPrefill (issue 29, "done when" b): a raw transfer
// client, as D, READs the blocks of an already finished prompt (200 tokens,
// 13 blocks) from P while P computes 1,600-token prefills back to back on
// one thread, and measures READ-to-first-BLOCK: p50 and p99 over b.N
// READs, one every 20-220 ms. With the loop serving reads during a step
// they start within milliseconds; with the forward pass on the loop's
// goroutine they wait for the step to end. Run it against another binary
// with KVLEASE_BINARY:
//
//	go test -run '^$' -bench BenchmarkReadDuringPrefill -benchtime 60x ./internal/e2e/scenarios/
func BenchmarkReadDuringPrefill(b *testing.B) {
	if testing.Short() {
		b.Skip("starts kvlease serve processes")
	}
	args := modelArgs(b, 10*time.Minute) // the READs keep it without renewals
	p, err := startProcess("P", append(append(pdArgs("prefill"), "--transfer-port", "0", "--kv-claim-timeout", "0s"), args...)...)
	if err != nil {
		b.Fatal(err)
	}
	defer func() { p.cmd.Process.Kill(); <-p.done }()
	status, m := e2e.Post(p.url+"/v1/completions", tokenBody(tokenPrompt(1, 200), 1, `,"stream":false,"kv_transfer_params":{"do_remote_decode":true}`))
	if status != 200 || m["kv_transfer_params"] == nil {
		b.Fatalf("prefill: %d %v", status, m)
	}
	kv, _ := json.Marshal(m["kv_transfer_params"])
	id, tok := leaseOf(b, kv)
	r := dialRaw(b, p.transfer)
	r.handshake("bench-d")
	indexes := make([]uint32, 13)
	for i := range indexes {
		indexes[i] = uint32(i)
	}
	h := hammer(b, p)
	e2e.WaitFor(b, "P to compute a long prefill", func() bool { return p.metrics(b).get("vllm:num_requests_running") == 1 })
	first := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		time.Sleep(time.Duration(20+(i*7919)%200) * time.Millisecond) // arrivals spread over P's steps
		start := time.Now()
		r.send(&wire.Read{ReadID: uint64(i + 1), Lease: id, Token: tok, Indexes: indexes})
		got := 0
		for {
			msg, err := r.recv()
			if err != nil {
				b.Fatal(err)
			}
			switch msg := msg.(type) {
			case *wire.Block:
				if got++; got == 1 {
					first = append(first, time.Since(start))
				}
			case *wire.ReadEnd:
				if msg.Status != wire.StatusOK || got != len(indexes) {
					b.Fatalf("READ %d ended %v after %d blocks", i+1, msg.Status, got)
				}
			default:
				b.Fatalf("unexpected %v", msg.Type())
			}
			if _, end := msg.(*wire.ReadEnd); end {
				break
			}
		}
	}
	b.StopTimer()
	longs := h.stop()
	slices.Sort(first)
	slices.Sort(longs)
	q := func(s []time.Duration, f float64) float64 {
		return float64(s[min(len(s)-1, int(f*float64(len(s))))]) / 1e6
	}
	b.ReportMetric(q(first, 0.5), "p50-read-ms")
	b.ReportMetric(q(first, 0.99), "p99-read-ms")
	if len(longs) > 0 {
		b.ReportMetric(q(longs, 0.5), "p50-prefill-ms")
	}
	b.ReportMetric(0, "ns/op")
}
