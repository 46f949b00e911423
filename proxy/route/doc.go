// Package route is the P/D proxy's routing policy (PURE): which prefill or
// decode engine gets the next request leg.
//
// A Picker chooses one engine among candidates described by a Load each:
// the proxy's own in-flight count, the engine's scraped queue length
// (vllm:num_requests_waiting) and KV cache usage (vllm:kv_cache_usage_perc),
// and a DownUntil instant set by the proxy when the engine could not be
// reached. Policies:
//
//   - RoundRobin takes the next candidate after the previous pick.
//   - LeastLoaded takes the candidate with the smallest InFlight + Waiting
//     (Waiting counts only while the scrape is fresh), then the smallest
//     KVUsage; ties go round robin, so equal engines share the load.
//
// Under both policies an engine that is down is passed over while any
// candidate is up; when every candidate is down the policy chooses among
// them anyway, since the alternative is failing the request and the engine
// may be back.
//
// ParseHostPorts and Match implement llm-d's x-prefiller-host-port header,
// which names the prefill engine (or a comma list of them) the endpoint
// picker chose: the proxy restricts its choice to the configured engines
// the header names.
//
// Nothing here does I/O or reads a clock; time is a clock.Instant passed in.
// A Picker is not safe for concurrent use: the proxy guards it with a mutex.
package route
