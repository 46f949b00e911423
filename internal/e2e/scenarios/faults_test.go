package scenarios

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kvlease/kvlease/internal/e2e"
)

// The fault-injection API through real engines: one P and one D, both
// with --enable-fault-api, and for each fault kind a request that it hits
// (scoped by X-Request-Id), sent as a P/D router would send it. Each case
// checks what the router sees (the status of each leg, a lower bound of
// its time for a delay, the answer's tokens against the single engine's
// where there is one), P's lease releases by reason, D's fallbacks, the
// fault counters, and that neither engine holds a block afterwards.

const adminKey = "pdscen-admin-key"

func faultArgs() []string {
	return []string{"--enable-fault-api", "--admin-key", adminKey, "--fault-seed", "1"}
}

// addFault posts spec to e's fault API.
func (e *engine) addFault(t *testing.T, spec string) {
	t.Helper()
	status, m := e2e.PostJSON(t, e.url+"/kvlease/v1/faults", spec, "Authorization", "Bearer "+adminKey)
	if status != 200 {
		t.Fatalf("%s: POST fault %s: %d %v", e.name, spec, status, m)
	}
}

// clearFaults deletes every fault of e.
func (e *engine) clearFaults(t *testing.T) {
	t.Helper()
	req, _ := http.NewRequest("DELETE", e.url+"/kvlease/v1/faults", nil)
	req.Header.Set("Authorization", "Bearer "+adminKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("%s: DELETE faults: %d", e.name, resp.StatusCode)
	}
}

// leg is one HTTP leg as a router sees it.
type leg struct {
	status  int
	body    map[string]any
	err     error // a transport error (no answer)
	elapsed time.Duration
}

// send posts body to url with X-Request-Id id (and more headers) and
// times it.
func send(url, body, id string, hdr ...string) leg {
	req, _ := http.NewRequest("POST", url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Request-Id", id)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	start := time.Now()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return leg{err: err, elapsed: time.Since(start)}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	l := leg{status: resp.StatusCode, err: err, elapsed: time.Since(start)}
	json.Unmarshal(b, &l.body)
	return l
}

// decodeBody is j's decode leg with P's kv_transfer_params.
func decodeBody(j job, kv json.RawMessage) string {
	return completionBody(j, `,"kv_transfer_params":`+string(kv))
}

// completionBody is j as a client sends it (as job.params), with extra
// fields.
func completionBody(j job, extra string) string {
	p, _ := json.Marshal(j.prompt)
	return `{"model":"` + modelName + `","prompt":` + string(p) + `,"max_tokens":` + itoa(j.maxTokens) +
		`,"seed":` + itoa(j.seed) + `,"temperature":0.8,"ignore_eos":true` + extra + `}`
}

func itoa(n int64) string { b, _ := json.Marshal(n); return string(b) }

// kvOf returns a prefill leg's kv_transfer_params.
func kvOf(t *testing.T, l leg) json.RawMessage {
	t.Helper()
	if l.err != nil || l.status != 200 || l.body["kv_transfer_params"] == nil {
		t.Fatalf("prefill leg: %d %v %v", l.status, l.err, l.body)
	}
	raw, _ := json.Marshal(l.body["kv_transfer_params"])
	return raw
}

// textOf checks that a decode leg answered 200 with the single engine's
// text for j.
func textOf(t *testing.T, j job, l leg) {
	t.Helper()
	if l.err != nil || l.status != 200 {
		t.Fatalf("decode leg: %d %v %v", l.status, l.err, l.body)
	}
	want, err := reference(t).complete(context.Background(), j, "ref-"+j.id, nil)
	if err != nil {
		t.Fatal(err)
	}
	choices, _ := l.body["choices"].([]any)
	if len(choices) != 1 {
		t.Fatalf("decode leg: %v", l.body)
	}
	if got, _ := choices[0].(map[string]any)["text"].(string); got != want.Choices[0].Text {
		t.Errorf("%s: decode engine %q, single engine %q", j.id, got, want.Choices[0].Text)
	}
}

// counters is a snapshot of the series a case checks, for deltas.
type counters struct{ p, d metrics }

func snapshot(t *testing.T, p, d *engine) counters { return counters{p.metrics(t), d.metrics(t)} }

// released is P's release count of reason since c.
func (c counters) released(t *testing.T, p *engine, reason string) float64 {
	return p.metrics(t).get("kvlease_leases_released_total", "reason", reason) - c.p.get("kvlease_leases_released_total", "reason", reason)
}

// wantReleasedSince waits until P released exactly want (reason: count)
// since c, every other reason unchanged.
func (c counters) wantReleasedSince(t *testing.T, p *engine, want map[string]float64) {
	t.Helper()
	var got map[string]float64
	err := e2e.Poll(e2e.Timeout, func() bool {
		got = map[string]float64{}
		now := p.metrics(t)
		for _, r := range releaseReasons {
			if dv := now.get("kvlease_leases_released_total", "reason", r) - c.p.get("kvlease_leases_released_total", "reason", r); dv != 0 {
				got[r] = dv
			}
		}
		return mapsEqual(got, want)
	})
	if err != nil {
		t.Errorf("P released %v since the case began, want %v", got, want)
	}
}

// delta is e's series name{labels} since snapshot m.
func delta(t *testing.T, e *engine, m metrics, name string, labels ...string) float64 {
	return e.metrics(t).get(name, labels...) - m.get(name, labels...)
}

func wantInjected(t *testing.T, e *engine, m metrics, kind string, n float64) {
	t.Helper()
	if got := delta(t, e, m, "kvlease_faults_injected_total", "kind", kind); got != n {
		t.Errorf("%s: kvlease_faults_injected_total{kind=%q} rose by %v, want %v", e.name, kind, got, n)
	}
}

// wantFallbacks checks that D fell back n times since m, all for reason
// ("": n must be 0).
func wantFallbacks(t *testing.T, d *engine, m metrics, reason string, n float64) {
	t.Helper()
	all := d.metrics(t).sum("kvlease_remote_prefill_fallbacks_total") - m.sum("kvlease_remote_prefill_fallbacks_total")
	if all != n {
		t.Errorf("D fell back %v times, want %v (%q)", all, n, reason)
	}
	if reason != "" {
		if got := delta(t, d, m, "kvlease_remote_prefill_fallbacks_total", "reason", reason); got != n {
			t.Errorf("D fell back for %q %v times, want %v", reason, got, n)
		}
	}
}

// faultCase runs body as subtest name over engines (P first, then the D
// whose counters it snapshots, then any others), then checks that every
// engine settles and clears their faults.
func faultCase(t *testing.T, name string, body func(t *testing.T, c counters), engines ...*engine) {
	t.Run(name, func(t *testing.T) {
		for _, e := range engines {
			defer e.clearFaults(t)
		}
		body(t, snapshot(t, engines[0], engines[1]))
		checkSettled(t, engines...)
	})
}

func TestE2EFaultInjection(t *testing.T) {
	skipShort(t)
	p := startP(t, faultArgs()...)
	d := startD(t, "D", faultArgs()...)
	pURL, dURL := p.url+"/v1/completions", d.url+"/v1/completions"
	newJob := func(id string) job {
		return job{id: id, prompt: pdPrompt + " Case " + id + ".", maxTokens: 12, seed: 3}
	}
	run := func(name string, body func(t *testing.T, c counters)) { faultCase(t, name, body, p, d) }

	run("expire_lease", func(t *testing.T, c counters) {
		j := newJob("flt-expire")
		p.addFault(t, `{"kind":"expire_lease","after_ms":0,"scope":{"request_id":"flt-expire"}}`)
		kv := kvOf(t, send(pURL, prefillBody(j.prompt), j.id))
		textOf(t, j, send(dURL, decodeBody(j, kv), j.id)) // recomputed: still the right answer
		c.wantReleasedSince(t, p, map[string]float64{"expired": 1})
		wantFallbacks(t, d, c.d, "lease_gone", 1)
		wantInjected(t, p, c.p, "expire_lease", 1)
	})

	run("revoke_lease", func(t *testing.T, c counters) {
		j := newJob("flt-revoke")
		p.addFault(t, `{"kind":"revoke_lease","scope":{"request_id":"flt-revoke"}}`)
		kv := kvOf(t, send(pURL, prefillBody(j.prompt), j.id))
		textOf(t, j, send(dURL, decodeBody(j, kv), j.id))
		c.wantReleasedSince(t, p, map[string]float64{"aborted": 1})
		wantFallbacks(t, d, c.d, "lease_gone", 1)
		wantInjected(t, p, c.p, "revoke_lease", 1)
	})

	run("refuse_read", func(t *testing.T, c counters) {
		j := newJob("flt-refuse")
		p.addFault(t, `{"kind":"refuse_read","scope":{"request_id":"flt-*"}}`)
		kv := kvOf(t, send(pURL, prefillBody(j.prompt), j.id))
		textOf(t, j, send(dURL, decodeBody(j, kv), j.id))
		c.wantReleasedSince(t, p, map[string]float64{"fallback": 1})
		wantFallbacks(t, d, c.d, "read_internal", 1)
		if got := delta(t, d, c.d, "kvlease_transfer_failures_total", "kind", "read_internal"); got < 1 {
			t.Errorf("D counted %v refused reads", got)
		}
		wantInjected(t, p, c.p, "refuse_read", 1)
	})

	run("stall_blocks", func(t *testing.T, c counters) {
		j := newJob("flt-stallblk")
		p.addFault(t, `{"kind":"stall_blocks","delay_ms":400,"scope":{"request_id":"flt-stallblk"}}`)
		kv := kvOf(t, send(pURL, prefillBody(j.prompt), j.id))
		dl := send(dURL, decodeBody(j, kv), j.id)
		textOf(t, j, dl)
		if dl.elapsed < 400*time.Millisecond {
			t.Errorf("the decode leg took %v with P's blocks stalled 400 ms", dl.elapsed)
		}
		c.wantReleasedSince(t, p, map[string]float64{"read_done": 1})
		wantFallbacks(t, d, c.d, "", 0)
		wantInjected(t, p, c.p, "stall_blocks", 1)
	})

	run("corrupt_blocks", func(t *testing.T, c counters) {
		j := newJob("flt-corrupt")
		p.addFault(t, `{"kind":"corrupt_blocks","reads":1,"scope":{"request_id":"flt-corrupt"}}`)
		kv := kvOf(t, send(pURL, prefillBody(j.prompt), j.id))
		textOf(t, j, send(dURL, decodeBody(j, kv), j.id)) // pulled on the second read, never decoded from bad KV
		c.wantReleasedSince(t, p, map[string]float64{"read_done": 1})
		if got := delta(t, d, c.d, "kvlease_transfer_failures_total", "kind", "corrupt"); got < 1 {
			t.Errorf("D's checksum caught %v corrupt blocks", got)
		}
		wantFallbacks(t, d, c.d, "", 0)
		wantInjected(t, p, c.p, "corrupt_blocks", 1)
	})

	run("delay_prefill", func(t *testing.T, c counters) {
		j := newJob("flt-delay")
		p.addFault(t, `{"kind":"delay_prefill","delay_ms":400,"scope":{"request_id":"flt-delay"}}`)
		pl := send(pURL, prefillBody(j.prompt), j.id)
		kv := kvOf(t, pl)
		if pl.elapsed < 400*time.Millisecond {
			t.Errorf("the prefill leg took %v, delayed 400 ms", pl.elapsed)
		}
		var params struct {
			ExpiresIn int64 `json:"lease_expires_in_ms"`
		}
		json.Unmarshal(kv, &params)
		if params.ExpiresIn > (lease - 400*time.Millisecond).Milliseconds() {
			t.Errorf("lease_expires_in_ms %d after a 400 ms delay of a %v lease", params.ExpiresIn, lease)
		}
		textOf(t, j, send(dURL, decodeBody(j, kv), j.id))
		c.wantReleasedSince(t, p, map[string]float64{"read_done": 1})
		wantInjected(t, p, c.p, "delay_prefill", 1)
	})

	run("drop_response", func(t *testing.T, c counters) {
		j := newJob("flt-drop")
		p.addFault(t, `{"kind":"drop_response","scope":{"request_id":"flt-drop","count":1}}`)
		if l := send(pURL, prefillBody(j.prompt), j.id); l.err == nil {
			t.Fatalf("the dropped prefill leg was answered: %d %v", l.status, l.body)
		}
		c.wantReleasedSince(t, p, map[string]float64{"undelivered": 1})
		// The router retries the prefill (the fault ran out): P serves it
		// from its prefix cache and the request completes.
		kv := kvOf(t, send(pURL, prefillBody(j.prompt), j.id))
		textOf(t, j, send(dURL, decodeBody(j, kv), j.id))
		c.wantReleasedSince(t, p, map[string]float64{"undelivered": 1, "read_done": 1})
		wantInjected(t, p, c.p, "drop_response", 1)
	})

	run("stop_heartbeats_and_stall_pull", func(t *testing.T, c counters) {
		// Two decode legs stalled past the lease (3 s): one keeps its
		// heartbeats and pulls; the other's lease expires on P and D
		// recomputes. Both answers are right.
		stall := lease + 500*time.Millisecond
		d.addFault(t, `{"kind":"stall_pull","delay_ms":`+itoa(stall.Milliseconds())+`,"scope":{"request_id":"flt-stall*"}}`)
		d.addFault(t, `{"kind":"stop_heartbeats","scope":{"request_id":"flt-stall-nohb"}}`)
		jobs := []job{newJob("flt-stall-hb"), newJob("flt-stall-nohb")}
		kvs := []json.RawMessage{kvOf(t, send(pURL, prefillBody(jobs[0].prompt), jobs[0].id)), kvOf(t, send(pURL, prefillBody(jobs[1].prompt), jobs[1].id))}
		legs := make([]leg, 2)
		var wg sync.WaitGroup
		for i := range jobs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				legs[i] = send(dURL, decodeBody(jobs[i], kvs[i]), jobs[i].id)
			}()
		}
		wg.Wait()
		for i := range jobs {
			textOf(t, jobs[i], legs[i])
		}
		// The leg with heartbeats waited out its stall and pulled; the
		// other recomputed once the lease was gone by D's own clock (at
		// the lease's end, before the stall's).
		if legs[0].elapsed < stall {
			t.Errorf("%s took %v, its pull stalled %v", jobs[0].id, legs[0].elapsed, stall)
		}
		c.wantReleasedSince(t, p, map[string]float64{"read_done": 1, "expired": 1})
		wantFallbacks(t, d, c.d, "expired", 1)
		wantInjected(t, d, c.d, "stall_pull", 2)
		wantInjected(t, d, c.d, "stop_heartbeats", 1)
	})

	run("reject_decode", func(t *testing.T, c counters) {
		j := newJob("flt-reject")
		d.addFault(t, `{"kind":"reject_decode","status":429,"scope":{"request_id":"flt-reject"}}`)
		kv := kvOf(t, send(pURL, prefillBody(j.prompt), j.id))
		if l := send(dURL, decodeBody(j, kv), j.id); l.status != 429 {
			t.Fatalf("the rejected decode leg: %d %v %v", l.status, l.err, l.body)
		}
		c.wantReleasedSince(t, p, map[string]float64{"rejected": 1})
		wantInjected(t, d, c.d, "reject_decode", 1)
	})

	run("fallback", func(t *testing.T, c counters) {
		j := newJob("flt-fallback")
		d.addFault(t, `{"kind":"fallback","scope":{"request_id":"flt-fallback"}}`)
		kv := kvOf(t, send(pURL, prefillBody(j.prompt), j.id))
		textOf(t, j, send(dURL, decodeBody(j, kv), j.id))
		c.wantReleasedSince(t, p, map[string]float64{"fallback": 1})
		wantFallbacks(t, d, c.d, "injected", 1)
		wantInjected(t, d, c.d, "fallback", 1)
	})

	run("http_error", func(t *testing.T, c counters) {
		// On P: the prefill leg fails, no lease is granted.
		j := newJob("flt-httperr")
		p.addFault(t, `{"kind":"http_error","status":503,"scope":{"request_id":"flt-httperr"}}`)
		if l := send(pURL, prefillBody(j.prompt), j.id); l.status != 503 {
			t.Fatalf("the prefill leg: %d %v %v", l.status, l.err, l.body)
		}
		if got := delta(t, p, c.p, "kvlease_leases_granted_total"); got != 0 {
			t.Errorf("P granted %v leases to a request it failed", got)
		}
		// On D: the decode leg fails and P is told.
		p.clearFaults(t)
		d.addFault(t, `{"kind":"http_error","status":500,"scope":{"request_id":"flt-httperr"}}`)
		kv := kvOf(t, send(pURL, prefillBody(j.prompt), j.id))
		if l := send(dURL, decodeBody(j, kv), j.id); l.status != 500 {
			t.Fatalf("the decode leg: %d %v %v", l.status, l.err, l.body)
		}
		c.wantReleasedSince(t, p, map[string]float64{"rejected": 1})
		wantInjected(t, p, c.p, "http_error", 1)
		wantInjected(t, d, c.d, "http_error", 1)
	})

	run("x_return_error", func(t *testing.T, c counters) {
		j := newJob("flt-xre")
		kv := kvOf(t, send(pURL, prefillBody(j.prompt), j.id))
		if l := send(dURL, decodeBody(j, kv), j.id, "X-Return-Error", "429"); l.status != 429 {
			t.Fatalf("the decode leg with X-Return-Error 429: %d %v %v", l.status, l.err, l.body)
		}
		c.wantReleasedSince(t, p, map[string]float64{"rejected": 1})
		if l := send(dURL, `{"prompt":"x","max_tokens":1}`, "flt-xre-bad", "X-Return-Error", "soon"); l.status != 400 {
			t.Errorf("X-Return-Error soon: %d %v", l.status, l.body)
		}
		wantInjected(t, d, c.d, "http_error", 2)
	})

	run("latency", func(t *testing.T, c counters) {
		j := newJob("flt-latency")
		d.addFault(t, `{"kind":"latency","delay_ms":400,"scope":{"request_id":"flt-latency"}}`)
		kv := kvOf(t, send(pURL, prefillBody(j.prompt), j.id))
		dl := send(dURL, decodeBody(j, kv), j.id)
		textOf(t, j, dl)
		if dl.elapsed < 400*time.Millisecond {
			t.Errorf("the decode leg took %v with a 400 ms latency spike", dl.elapsed)
		}
		c.wantReleasedSince(t, p, map[string]float64{"read_done": 1})
		wantInjected(t, d, c.d, "latency", 1)
	})
}
