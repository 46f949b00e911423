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
// # Invalid requests
//
// A share InvalidRate of requests is sent with min_tokens above max_tokens,
// which a server refuses with a 400. Behind a P/D proxy only the decode
// leg carries min_tokens, so the prefill runs, grants its lease, and the
// decode engine rejects the request before admitting it: how a decode-side
// rejection strands a prefill engine's blocks when nobody tells it. A
// refused one is OutcomeRejected (not an error); one the server accepts
// completes as usual. Which requests are invalid comes from a random
// stream of its own, so InvalidRate changes nothing else in a job.
//
// # Fault scenarios on a local cluster
//
// RunCluster starts a local P/D cluster (package localcluster: engines as child
// processes of the kvlease binary, the proxy in-process), runs the load
// against its proxy while doing Faults to its engines at fixed points of
// the run (kill -9 and restart, SIGSTOP and SIGCONT), scrapes every engine
// during the run, then waits for the cluster to settle — no block held
// and no lease active on any engine — and reports, in Result.Cluster, the
// faults done and the lease figures (LeaseFigures: held blocks, leases
// granted and released by reason, unread and read lease block-seconds)
// right after the load and at the end. Blocks still held at the end are a
// leak (ClusterReport.Problems). Scenario.Apply sets up the named
// scenarios: decode-crash, decode-hang, decode-reject, decode-congested,
// client-abort.
//
// A fault's point is a share of the run: of Duration elapsed or of
// Requests done. A repair (restart, resume) also falls due by the run's
// pace before the fault, so a run bounded by Requests whose clients all
// wait on a hung engine cannot wait for its own repair forever; and a
// repair is done even when the load ends before its point.
//
// # Checking outputs
//
// With RecordOutputs each completed request keeps its text. Replay sends
// the same requests (a pure function of the Config and the job and turn)
// to a reference server — one engine serving whole requests, which a P/D
// cluster must equal token for token — and CompareOutputs lists the
// differences.
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
// kvlease_kv_blocks{state="held"} and kvlease_leases_active, and (once
// before the load too) for the engine's own token counters: each engine's
// prompt tok/s is the increase of vllm:prompt_tokens_by_source_total
// {source="local_compute"} (prompt positions it computed, prefix-cache
// hits and pulled KV excluded) over the load's wall time, its generation
// tok/s that of vllm:generation_tokens_total (Result.Engines).
package bench
