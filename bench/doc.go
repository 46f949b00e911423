// Package bench is kvlease's load generator: it drives any OpenAI-compatible
// endpoint (kvlease's proxy or engines, vLLM, others) and reports
// throughput, goodput, latency percentiles and errors by kind, as a table,
// as JSON and as PNG plots.
//
// It is an EDGE package: it owns goroutines, sockets and the clock. The
// statistics are in the pure package bench/stats.
//
// # Use
//
//	res, err := bench.Run(ctx, bench.Config{URL: "http://127.0.0.1:8080", Concurrency: 32, Duration: 30 * time.Second})
//	if err != nil { ... }            // bad config, or the model could not be found
//	res.Table(os.Stdout)
//	paths, err := res.WriteDir("out") // results.json and PNG plots
//
// # Load
//
// Closed loop (Rate 0): Concurrency workers each send a request as soon as
// their previous one ends. Open loop (Rate > 0): requests arrive as a
// Poisson process of Rate per second whatever the server does, drawn from a
// *rand.Rand seeded by Seed, so the arrival schedule of a seed is the same
// on every run; at most MaxInflight are in flight, and an arrival beyond
// that is recorded as the error "dropped" instead of being delayed, which
// would hide the overload. A run ends after Requests requests or after
// Duration, whichever comes first; requests in flight at the deadline are
// waited for (each is bounded by Timeout).
//
// # Workloads
//
// Every request asks for exactly its output length: max_tokens plus
// ignore_eos, temperature 0. Prompts are words drawn from a fixed
// vocabulary, CharsPerToken characters per requested token (1 for
// kvlease's byte-level tokenizer, about 4 for BPE tokenizers); the server's
// usage figures, when it sends them, are recorded as the true counts.
//
//   - random: each request has its own prompt of InputLen tokens.
//   - shared-prefix: Groups system prompts of PrefixLen tokens; each request
//     picks a group at random and adds its own InputLen tokens.
//   - multi-turn: conversations of Turns requests; each turn sends the whole
//     conversation so far (the previous turns' prompts and the answers
//     actually received) plus a new user message of InputLen tokens. In open
//     loop Rate counts conversations; in both loops a conversation's turns
//     follow each other at once, and an error or abort ends it.
//
// The content of job n (a request, or a conversation) depends only on
// (Seed, n), never on timing or concurrency.
//
// # Aborts
//
// A share AbortRate of requests is abandoned by the client: half of them
// before the first token (at a random moment up to AbortMaxDelay after
// sending, or when the response starts, whichever is first), half
// mid-stream (after a random number of tokens, at least one and fewer than
// the output length). Abandoning cancels the request's context, which
// closes its connection, so the server sees the disconnect. Abandoned
// requests count as aborted, never as errors. Without streaming every abort
// is before the first token.
//
// # Measurements
//
// TTFT is the time from sending the request to the first chunk carrying
// generated text (a chat stream's role-only first chunk does not count).
// Inter-token latency is the gap between successive such chunks. E2E is
// the time to the end of the response. Latency percentiles cover the
// requests that completed without error; TTFT and inter-token latency need
// streaming. Goodput counts the completed requests that met every SLO set
// in Config.SLO. While the run lasts, every MetricsInterval the Prometheus
// endpoints in MetricsURLs are scraped for vllm:kv_cache_usage_perc,
// kvlease_kv_blocks{state="held"} and kvlease_leases_active.
package bench
