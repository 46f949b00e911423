// Package proxy is kvlease's P/D proxy (EDGE): clients talk to one
// OpenAI-compatible endpoint, and each generation request runs as two legs
// — a prefill engine computes the prompt's KV cache and grants a lease on
// it, then a decode engine pulls that KV and generates the answer, which
// the proxy streams back. Which engine gets a leg is proxy/route's pure
// policy.
//
// # The legs
//
// POST /v1/completions and /v1/chat/completions, streaming or not, follow
// docs/protocol.md ("Roles and the two legs") and vLLM's and llm-d's proxies:
//
//  1. Prefill: the client's body with stream false, stream_options,
//     min_tokens and min_completion_tokens removed, max_tokens (and
//     max_completion_tokens when present) 1 and kv_transfer_params
//     {do_remote_decode: true, ...nulls}. The engine is chosen by the
//     policy among the prefill engines, restricted to those named by an
//     x-prefiller-host-port header when there is one.
//  2. Decode: the client's body unchanged but for kv_transfer_params,
//     which are P's answer's, verbatim. P's answer is read whole (its
//     token is discarded).
//
// Both legs carry the same X-Request-Id: a new UUID, or, when the client
// sent one, the client's with "-" and 16 random hex digits appended (cut
// to fit 256 bytes), so that two clients reusing one id are two requests to
// the engines and nothing the proxy does for one (an abort) reaches the
// other. The client gets its own id back in the answer's header (the body's
// "id" is the engine's). The
// answer's usage.prompt_tokens_details.cached_tokens (in a streamed answer,
// every event with a usage) is P's, since the prompt's KV came from P.
// Members of the body keep their order; only the edited ones are decoded.
// The prefill leg also drops n, logprobs, top_logprobs and echo: P's
// answer is only the lease, D generates the choices.
//
// Two kinds of request take another path. A completions batch (prompt as
// an array of several strings or token-id arrays; batch.go) runs each
// prompt through both legs as a request of its own (id + "-" + the
// prompt's index) and merges the answers as one engine answers a batch:
// choices renumbered (prompt i's choice j at i×n+j), usage summed, one
// usage chunk and one [DONE] closing a stream; the first failing prompt
// answers the request (or ends its stream with an error event) and the
// others are cancelled, aborting their legs. A completion with echo and
// logprobs skips the prefill leg: its prompt's tokens are scored where
// the prompt is computed, so the decode engine computes it.
//
// # Failures and aborts
//
// Whatever happens, no engine is left working or holding KV for a request
// nobody will read. Each engine has POST /kvlease/v1/requests/{id}/abort
// (AbortPath), which aborts a request by its X-Request-Id and, on a prefill
// engine, revokes its lease at once.
//
//   - The client leaves (at any moment: while P prefills, between the legs,
//     while D queues, mid-stream): the leg in flight is cancelled and the
//     abort endpoint is called on P and, once the decode leg started, on D.
//   - P answers an error: the client gets P's status and body. P cannot be
//     connected to: the next prefill engine is tried (MaxPrefillAttempts);
//     when none can, 502. P fails after it had the request, or does not
//     answer within PrefillTimeout: abort on P, then 502 or 504.
//   - D cannot be connected to, answers 429 or 5xx, or breaks before its
//     first event (before its whole answer when not streamed): the next
//     decode engine gets the same kv_transfer_params (the lease is still
//     valid; if it was not, D falls back to prefilling itself), up to
//     MaxDecodeAttempts engines. When none is left the lease is released
//     (abort on P) and the client gets 503 naming each engine's failure.
//   - D answers another 4xx: the client gets it as is; P is told to abort
//     (D releases the lease itself; the abort makes sure).
//   - D breaks or passes DecodeTimeout mid-stream: the client gets an
//     OpenAI error object as a final event, and both engines an abort.
//
// An engine that could not be connected to is passed over for DownFor
// while others are up; a scrape that succeeds puts it back at once.
//
// # Authentication
//
// With Config.APIKeys the proxy requires "Authorization: Bearer <key>" of
// its clients on every path under /v1, as an engine with --api-key does
// (401 in OpenAI's shape otherwise). Towards the engines it presents
// Config.EngineAPIKey when set, or else forwards the client's
// Authorization header as it came, on both legs, /v1/models and the abort
// calls it makes for that client's request.
//
// # Loops
//
// A proxy whose engine URLs lead back to it (its own URL in Prefill or
// Decode, or another kvlease proxy that routes to it) would forward each
// request to itself until MaxConcurrentRequests, and the client would get
// a misleading 429. As HTTP proxies do (RFC 9110, 7.6.3), the proxy appends
// its own entry to Via ("1.1 kvlease-" and 16 hex digits, random at New)
// on both legs, /v1/models and the aborts, after the client's entries; a
// request that arrives with the proxy's own entry is answered at once,
// before the concurrency limit, with 508 Loop Detected (RFC 5842) in
// OpenAI's shape naming the loop, counted as outcome loop_detected. A leg
// answered 508 is passed to the client as it came (not tried on another
// engine: none makes a loop right) and counted so too.
//
// # Bounds
//
// Request bodies (MaxRequestBytes, 413), P's answer
// (MaxPrefillResponseBytes), a non-streamed answer (MaxResponseBytes), a
// line of a stream (MaxEventBytes), error bodies passed on (64 KiB),
// concurrent requests (MaxConcurrentRequests, 429 past it), attempts per
// leg, and every leg and abort call have a limit; past it the client gets
// a clear error.
//
// # Observability
//
// GET /health answers 200 with each engine's state as the proxy sees it
// (503 once shutting down). GET /metrics: kvlease_proxy_requests_total
// {outcome} (the Outcome constants), kvlease_proxy_leg_duration_seconds{leg=prefill|
// decode_first_event|decode|total}, kvlease_proxy_retries_total{leg},
// kvlease_proxy_aborts_total{role,result}, kvlease_proxy_requests_in_flight,
// kvlease_proxy_engine_in_flight{role,engine} and
// kvlease_proxy_engine_up{role,engine}. GET /v1/models is answered by a
// decode engine.
//
// A Proxy is an http.Handler; Serve runs it on a listener with the /metrics
// scraper that feeds the least-loaded policy, and shuts it down cleanly.
package proxy
