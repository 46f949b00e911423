// Package openai holds the OpenAI-compatible API of a kvlease engine:
// request types and their validation, the chat template's fields, response and
// stream encoders, errors, and vLLM's kv_transfer_params. It does no I/O;
// the HTTP edge (httpapi) reads bodies, calls the parsers, hands validated
// requests to the engine and writes what the encoders produce.
//
// # Requests
//
// ParseCompletionRequest and ParseChatCompletionRequest decode a body as
// encoding/json would and validate it, returning a typed request or an
// *Error with status 400 that names the parameter: malformed JSON (param ""), a wrong
// type ("max_tokens must be an integer, got string"), a value out of range
// (temperature in [0, 2], top_p in (0, 1], max_tokens and
// max_completion_tokens ≥ 1, 0 ≤ min_tokens ≤ max_tokens, at most MaxStop
// stop strings, n in [1, MaxN]), something kvlease does not support (echo,
// best_of, non-text content parts, and every other
// field of OpenAI's or vLLM's request that kvlease does not implement, given
// a value other than its no-op default: see fields.go and ClassifyField) or
// an invalid kv_transfer_params. Fields neither OpenAI nor vLLM define are
// ignored with a logged warning, as vLLM does, and listed in
// RequestOptions.Ignored.
// The model name and the prompt length are not checked here: the server
// knows its models and their context lengths. Field names and defaults are
// vLLM's: an absent max_tokens is 0 ("fill the context"), temperature and
// top_p default to 1, add_generation_prompt to true, and chat's
// max_completion_tokens overrides max_tokens.
//
// The decoding is done by hand, in one pass over the body, without
// reflection (requestdec.go, jsondec.go), and gives the values
// encoding/json gives: the last of a repeated field, null leaving a field
// as it is or making a pointer or slice nil, strings with their escapes
// resolved and invalid UTF-8 replaced. Every body it is not sure of
// (invalid JSON, a wrong type, a key with an escape, outside ASCII or
// matching a field only up to case, a field given twice) it leaves to
// encoding/json, which decodes it again and words the error. FuzzDecode
// compares the two on every input.
//
// A completion prompt is a string, an array of one string, an array of token
// ids (each non-negative; the server checks them against the served model's
// vocabulary) or an array of one such array. A
// chat message's content is a string or an array of {"type":"text","text"}
// parts, joined with "\n"; an assistant message may have null content.
//
// When a request fails validation after its kv_transfer_params parsed, the
// parsers still return the request with KVTransferParams set, so a decode
// engine can release the prefill engine's lease at once (RELEASE(rejected))
// instead of letting it expire.
//
// # Chat template
//
// A chat request's messages are rendered by package chat: with the
// model's Jinja template, or kvlease's fixed one for the simulated model
// (chat.RenderFixed, ChatCompletionRequest.Prompt).
//
// # kv_transfer_params
//
// KVTransferParams models vLLM's fields (do_remote_decode,
// do_remote_prefill, remote_engine_id, remote_request_id, remote_host,
// remote_port, remote_block_ids, tp_size, remote_num_tokens) and kvlease's
// lease_token and lease_expires_in_ms. remote_block_ids is accepted flat
// ([1,2]) or as vLLM's per-KV-cache-group list of lists with one group
// ([[1,2]]), normalized to a flat list and written back in the form it came
// in. Any other field is kept verbatim, in order, and written back after the
// known ones, so proxies and engines pass through what they do not know.
// Validate checks what a decode engine needs before pulling.
//
// # Responses and streams
//
// The response types mirror the JSON exactly, so clients (kvlease bench,
// the proxy, tests) can decode into them. For the server, the Append
// encoders (AppendCompletionResponse, AppendChatResponse,
// AppendCompletionChunk, AppendChatChunk, AppendUsageChunk, AppendModelList,
// AppendError) write the JSON straight into a caller's buffer without
// reflection or allocation; AppendSSE frames an event ("data: …\n\n") and
// SSEDone ends a stream. Strings are escaped as encoding/json reads them:
// quotes, backslashes and control characters are escaped and each byte of
// invalid UTF-8 becomes U+FFFD, so text cut mid-character by a byte-level
// model still yields valid JSON.
//
// A stream is: chunks with one choice each (for chat, the first chunk's
// delta carries role "assistant"), the last one with finish_reason set;
// then, with stream_options.include_usage, a chunk with no choices and the
// usage; then SSEDone. An error after the stream started is an AppendError
// body framed as an event.
//
// # Errors
//
// Error is OpenAI's error object plus the HTTP status: {"error": {"message",
// "type", "param", "code"}}, param and code null when empty. Constructors:
// BadRequest (400 invalid_request_error), NotFound and ModelNotFound (404
// not_found_error, code model_not_found), TooLarge (413), Overloaded (429
// rate_limit_exceeded with a retry hint), Unavailable (503 server_error) and
// Internal (500).
//
// Everything here is safe for concurrent use: there is no mutable package
// state.
package openai
