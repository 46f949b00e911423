// Package engine composes an engine: the block pool, the scheduler and the
// request lifecycle in Core, and the engine's event loop in Loop. Both are
// pure. Package node runs a Loop with a goroutine, the real clock, the TCP
// transport and the offload tiers; package sim runs the same Loop over a
// simulated network: one loop, two drivers.
//
// Core follows etcd raft's RawNode: inputs go in (Add, Abort, Complete),
// and Step returns one Ready value with the batch to execute, the outputs
// and the KV events. The caller executes the batch with a model.Executor
// and feeds the result back with Complete at the instant the step ends:
//
//	for {
//		rd := core.Step(now)
//		deliver(rd.Outputs); publish(rd.Events)
//		if rd.Batch != nil {
//			exec.Execute(rd.Batch, &res)
//			now = now.Add(res.Duration) // or wait that long on a real clock
//			core.Complete(now, &res)
//		}
//	}
//
// In a Loop the step is in-flight work (LoopConfig.Async): Turn hands the
// batch over (Turn.Execute), keeps turning — transport, admissions,
// aborts, offload completions, timers — and applies the result when the
// driver reports it (StepDone). The node runs a real model's forward pass
// on a goroutine of its own; the simulator completes each step at its
// modelled end. Each received message is judged on when it reached the
// engine (transport.Event.At, Core.PeerMessageArrived), not on when the
// loop handled it.
//
// Every finished request goes through one teardown sequence: its blocks are
// offered to the transfer hook (which may take a lease hold), then to the
// offload hook (which may take store holds), then the request hold is
// released. A block is freed only when its last hold goes, so no module asks
// another whether it may free. A request aborted while its step executes is
// finished at once (its output says so) but torn down when the step
// completes, so its blocks are never reused under a running step.
//
// A request with a Grammar (structured output, tool calls) is decoded under
// it: Step puts each of its sampling sequences' token masks in the batch,
// Complete advances the text's position and finishes the request once the
// text is complete (constrain.go).
//
// # Offload
//
// With Config.Offload the core owns an offload.Coordinator and calls it at
// fixed points: after each step for every request that did not finish
// (Computed: store-on-compute offers its new full blocks), from the
// scheduler's preemption hook (Preempted), in teardown between the lease
// and the release (Finished), and from the scheduler's admission hook
// (sched.Scheduler.OnAdmit): a request without blocks that is about to be
// admitted is looked up in the tiers, and if they hold blocks of its prefix
// that the pool misses, it is parked while they are loaded; while other
// loads fill the in-flight bound it waits at the head of the queue instead
// (offload.Coordinator.LookupWait, sched.Defer), so it is not admitted to
// recompute what it could load. It is looked up at admission, not at Add,
// because a prefix still cached at arrival is often evicted by the time
// the request is admitted. Each Ready carries the
// copies to run (Stores, Loads; the tiers' events join Events when pool
// events are on), and the edge reports each one back with StoreDone or
// LoadDone. When a request's loads end it rejoins the waiting queue in its
// original place (sched.Scheduler.Resume) with its loaded prefix held
// until its admission shares it (offload.Coordinator.Admitted), so no
// eviction in between wastes the load. The hold is dropped after
// offload.Config.LoadHoldSteps steps, and by a valve (DropHeld) when a
// step preempts or leaves requests waiting with seats and budget free, so
// holds never keep the head of the queue from blocks it needs. While
// requests loading or holding a loaded prefix would take every free seat,
// the head of the queue waits (sched.Defer) rather than load a prefix it
// would then hold, or lose, until a seat frees. A request is admitted at
// most once per load: if its loaded blocks are evicted again before
// admission, it recomputes them rather than loading in a loop. The Loop hands the copies
// to its Copier (the node's runs them with offload/tier, the simulator's
// with modelled tiers) and each completion comes back through Loop.Copied:
//
//	failed := copier.Copy(pool, &offload.Work{Stores: rd.Stores, Loads: rd.Loads}) // applied at once
//	... later: loop.Copied(now, engine.Copied{Store: true, ID: id, Blocks: n})
//
// Cached tokens. Loaded blocks are cached in the pool before the request
// is admitted, so the admission's prefix lookup finds them: they count in
// Usage.CachedTokens (prompt_tokens_details.cached_tokens) and in the
// scheduler's PrefixHitTokens, as vLLM counts a KV connector's external
// hits in num_cached_tokens. The offload share alone is in the
// coordinator's Stats (LoadedTokens, per tier HitBlocks and LoadedBlocks).
package engine
