// Package sched is a vLLM-style continuous-batching scheduler.
//
// A Scheduler keeps a waiting queue and a running list of Requests over one
// kvblock.Pool. Each Schedule call builds one step's batch under two budgets
// (MaxNumSeqs running requests, MaxNumBatchedTokens computed tokens):
//
//  1. Running requests first, oldest first: each gets its next tokens (one
//     for a decode, a chunk of its prompt for a chunked prefill) and the
//     blocks to hold them. When the pool runs out, the newest running request
//     (FCFS) or the lowest-priority one (priority policy) is preempted by
//     recompute: its request hold is released, its computed tokens are
//     forgotten, and it goes back to the waiting queue with the tokens it has
//     generated so far.
//  2. Then, if nothing was preempted (or the preemptions left nothing to
//     run: an empty batch would wait for an outside change that may never
//     come), waiting requests in order (arrival, or priority then
//     arrival): a prefix-cache lookup, a share of the hit blocks, new
//     blocks for the rest. The queue head that does not fit
//     blocks the queue, as in vLLM. A request without blocks that fits is
//     first offered to the OnAdmit hook, which may park it (take it out of
//     the queue while the engine loads its prefix from an offload tier,
//     and give it back later with Resume, in its original place) or defer
//     it (it blocks the queue until the next step).
//
// Update applies an executor's StepResult: computed positions advance, full
// blocks are cached under their prefix hashes, sampled tokens are appended
// and stop conditions (length, stop token ids, EOS unless ignored) finish
// requests. Length is MaxTokens, MaxModelLen or the pool's capacity in
// tokens (Scheduler.MaxLen), whichever comes first: a request never grows
// to need more blocks than the pool has, which would leave it, once
// preempted, at the head of the queue forever. Finishing only changes a request's status and removes it from
// the queues: the request's hold belongs to the caller, which runs teardown.
//
// A Scheduler is pure and not safe for concurrent use. Schedule and Update
// allocate nothing in steady state.
package sched
