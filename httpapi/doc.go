// Package httpapi is the HTTP server of an engine (EDGE): OpenAI's API over
// an node.Node, with vLLM's extensions and P/D fields, so OpenAI SDKs,
// vLLM's and llm-d's proxies, benchmark tools and Prometheus work against
// kvlease unchanged.
//
// # Endpoints
//
//	POST /v1/completions                     completions, whole or streamed
//	POST /v1/chat/completions                chat completions, whole or streamed
//	GET  /v1/models                          the served model, then its LoRA adapters
//	POST /v1/load_lora_adapter               load a LoRA adapter (Config.LoRA.RuntimeUpdates)
//	POST /v1/unload_lora_adapter             unload one
//	GET  /health                             200; 503 once the engine drains
//	GET  /version                            {"version": "..."}
//	GET  /metrics                            Prometheus text (package metrics)
//	POST /kvlease/v1/requests/{id}/abort     abort a request by X-Request-Id
//	POST|GET|DELETE /kvlease/v1/faults[/{id}] the fault-injection API (Config.Faults)
//
// With Config.LoRA set (kvlease serve --enable-lora, --lora-modules), a
// request names a LoRA adapter as its model (lora.go): it runs with the
// adapter, and the response names it.
//
// With Config.Faults set (kvlease serve --enable-fault-api), FaultsPath
// adds, lists and deletes injected faults (package faultapi decides which
// requests they hit; faultapi.go carries them out), guarded by its own admin
// key, and X-Return-Error answers a generation request with the status it
// names, as llm-d's simulator. Without it FaultsPath answers 404 and the
// header is ignored.
//
// With Config.APIKeys set (kvlease serve --api-key), every path under /v1
// and the abort endpoint require "Authorization: Bearer <key>", as vLLM's
// --api-key: the key is compared in constant time, and a request without a
// valid one gets 401 (OpenAI's shape, code invalid_api_key, WWW-Authenticate
// Bearer) before anything else is looked at. /health, /version and /metrics
// stay open for probes and scrapers.
//
// Request bodies are parsed and validated by package openai; this package
// adds what needs the engine: the model name, the prompt against the
// context, the engine's answer, and the P/D transfer fields.
//
// # Generation
//
// The request id is the client's X-Request-Id (printable ASCII without
// space, '/', '?', '#' or '%', at most MaxRequestIDBytes), or a new one; it
// is echoed in X-Request-Id and is the engine's id for the request, so
// the abort endpoint and a P/D proxy name requests by it. Response ids are
// "cmpl-" or "chatcmpl-" followed by it. Prompts are tokenized with the
// byte-level tokenizer; chat messages go through openai's template. An
// absent max_tokens (max_completion_tokens for chat) fills what the
// context leaves after the prompt.
//
// A non-streaming answer is written once the request finishes. A streaming
// answer is a sequence of server-sent events, "data: {chunk}" each: for
// chat, a first chunk whose delta has role "assistant"; then chunks with
// the new text (one per batch of tokens the engine produced, never cutting
// a UTF-8 sequence or showing text that may belong to a stop string); the
// last with finish_reason; then, with stream_options.include_usage, a chunk
// with usage and no choices; then "data: [DONE]". With
// stream_options.continuous_usage_stats every content chunk carries the
// usage so far. Nothing is written before the first event, so a request
// that fails before producing anything gets a plain HTTP error. Events are
// pushed to the client as soon as the server has caught up with the
// engine: with a model slower than the HTTP layer that is every step;
// with a faster one (the zero profile) the tokens that arrived while an
// event was written share the next write, so a stream does not cost one
// system call per token.
//
// A request with several choices — a completions batch (prompt as an
// array of strings or of token-id arrays) or n > 1 — is answered by
// multi.go: each choice is an engine request of its own (id: the
// request's for choice 0, the request's + "-" + the index for the
// others), prompt i's choice j at index i×n+j with seed + j; a prompt's
// later choices start once its choice 0 produced a token, so they hit the
// prompt's cached blocks instead of computing them. Streamed, each chunk
// carries one choice's text under its index; one usage chunk and [DONE]
// end the stream, which starts once every choice produced output, so a
// refused choice still makes the request's HTTP error (a 429 a router can
// retry). A refusal or failure of any choice aborts the others.
//
// logprobs (completions' count, chat's logprobs and top_logprobs) come
// from the executor's raw distribution with each token (openai's
// completions and chat shapes); echo puts the prompt first, and with
// logprobs asks the engine for the prompt's scores (the request then
// computes its whole prompt, so a decode engine refuses it with a remote
// prefix). Penalties and logit_bias go to the engine in model.Sampling.
//
// finish_reason is "stop" (EOS, a stop string, a stop token id: stop_reason
// says which string or id), "length" (max_tokens or the context) or "abort"
// (the engine shut down under the request). Stop strings are applied here,
// not in the engine: when one matches the request is stopped in the engine
// at once (node.Stream.Stop: it counts as finished_reason stop, not abort,
// in vllm:request_success_total), its text ends before the stop string (unless
// include_stop_str_in_output) and completion_tokens counts the tokens up
// to the one that completed it. usage.prompt_tokens_details.cached_tokens
// counts the prompt tokens whose KV came from the prefix cache, or, on a
// decode engine, from the prefill engine.
//
// A client that disconnects, before or during its answer, aborts its
// request at once: the engine frees its blocks. kvlease serve's HTTP server
// (package httpserver) ends the request's context as soon as the connection closes
// or resets, also while the handler waits, and a write to it fails.
//
// # Errors
//
// Errors have OpenAI's shape ({"error": {"message", "type", "param",
// "code"}}) and these statuses:
//
//   - 400: malformed JSON, wrong types, values out of range, unsupported
//     parameters (best_of > 1, ...), a prompt with no room for
//     one generated token or prompt + max_tokens over the context (param
//     "prompt"/"messages" or "max_tokens"), a bad X-Request-Id or one
//     already in progress, bad kv_transfer_params, do_remote_decode with
//     stream true; the message names the parameter and param holds it;
//   - 401: API keys are configured and the request carries none of them
//     (code invalid_api_key);
//   - 404: a model other than the served one (code model_not_found), an
//     unknown path, an unknown id at the abort endpoint;
//   - 405: a known path with the wrong method (Allow says which);
//   - 413: a body over Config.MaxBodyBytes;
//   - 429 with Retry-After: the engine's waiting queue is full;
//   - 500: a decode engine could not get its remote prefix under the fail
//     policy;
//   - 503: the engine is shutting down.
//
// # P/D
//
// On an engine with a transfer producer (role prefill, or both with a
// cluster secret), a request with kv_transfer_params.do_remote_decode true
// keeps its prompt's blocks under a lease when it finishes, and its answer
// carries kv_transfer_params: do_remote_prefill true, do_remote_decode
// false, remote_engine_id, remote_request_id, remote_host and remote_port
// (Config.AdvertiseHost and AdvertisePort), remote_block_ids, tp_size 1,
// remote_num_tokens, lease_token (32 hex digits), lease_expires_in_ms and
// lease_id (16 hex digits; see LeaseIDField). After writing that answer
// the server reports to the engine whether the write succeeded
// (node.Stream.Delivered): a token that never reached the client frees the
// blocks at once. Such a request must not stream.
//
// On an engine with a transfer consumer (role decode, or both with a
// cluster secret), a request whose kv_transfer_params has do_remote_prefill
// true and those fields is submitted with the remote prefix to pull. Every
// refusal before admission, whatever its cause (malformed body, invalid
// parameters, unknown model, prompt too long, queue full, shutting down),
// tells the prefill engine at once (RELEASE rejected), so its blocks do not
// wait for the lease to expire; the notice needs a lease id and token that
// parsed. Engines without the side in question ignore the fields and serve
// the request whole, as vLLM does without a KV connector.
//
// # Abort endpoint
//
// POST /kvlease/v1/requests/{id}/abort (the id path-escaped; X-Request-Id
// is used when the segment is empty) is what a proxy calls when its client
// leaves. Answers:
//
//   - 200 {"id": id, "result": "aborted"}: the request was live and is
//     now aborted; its blocks are freed (on a decode engine waiting for a
//     remote prefix, the prefill engine is told: RELEASE aborted);
//   - 200 {"id": id, "result": "already_finished"}: it had finished. On a
//     prefill engine under the lease policy its lease, if any, is revoked
//     (after a read in flight ends), or released at once if its response
//     was never delivered;
//   - 404 (OpenAI error, param "id"): the engine does not know the id;
//   - 400: a malformed id.
//
// Aborting twice is harmless.
package httpapi
