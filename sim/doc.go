// Package sim is kvlease's deterministic whole-cluster simulator.
//
// A World runs prefill and decode engines — each an engine.Loop, the
// event loop the production node runs, over an engine.Core with the
// model/synth executor, whose steps are in-flight work completing at their
// modelled end (engine.LoopConfig.Async) — over a simulated network (transport/memnet,
// reached through each engine's Port, which models read bandwidth and
// zero-copy sends), with an
// in-simulation proxy that runs each request's prefill leg, carries the
// lease to a decode engine and collects the tokens — all in one goroutine
// on a virtual clock, reproducibly from a seed. The proxy picks engines
// with the real proxy's routing policy (proxy/route, Spec.Routing) or
// takes those each request names.
//
// Faults are scheduled at instants: Crash and Restart (volatile state lost,
// same engine id), Hang (a node stops stepping; what reaches it waits in a
// backlog), Pause (a node's loop is busy while its transport runs: messages
// reach its port stamped with their arrival and wait there), Partition
// (nested partitions of a pair heal with the last),
// Drain (graceful shutdown: leases served until read or a deadline, then
// the node exits), client aborts (Abort; AbortBothLegs also tells P), and
// message faults on every engine's sends (MsgFaults: loss that breaks the
// connection, duplication, reordering, corruption of blocks) which can be
// switched off during a run. With Spec.Offload every engine has offload
// tiers, simulated in memory, whose copies take modelled time and fail
// part way (Spec.OffloadFailProb). Tests reach further with hooks: OnInstant,
// OnMessage, Intercept (corrupt or drop a message in flight), Inject (send
// a forged or replayed message on a live connection) and probes (raw peers
// that dial engines, with or without the handshake).
//
// After every instant the cluster checks the invariants of every engine
// that anything happened to (pool accounting, no orphan hold, producer,
// consumer and offload bookkeeping, per-step budgets, every streamed read
// on a live pinned lease, no lease left live past its due instant after a
// step); the producer panics on a lease released twice or during a read. An Oracle runs each request
// alone on one engine, and every finished request's tokens must equal its
// oracle's exactly.
//
// # Swarm
//
// RunSeed runs one seed of the swarm test: from sub-seeded sources it draws
// a cluster shape, a workload and a fault profile, runs a safety phase with
// faults, then a liveness phase without them, and returns a Result
// (goodput, unread lease block-seconds, early frees, fallbacks, p99 TTFT in
// simulated time, releases by reason, a trace hash) and an error naming the
// seed, the failures and the command that replays it. The same seed always
// gives the same trace hash.
//
//	res, err := sim.RunSeed(42, sim.Options{Policy: xfer.PolicyLease})
//
// go test ./sim runs a few hundred seeds; -seeds N and -seed S run more.
//
// # Fleet
//
// RunFleet runs tens of prefill and up to hundreds of decode engines
// (the same loops and cores, digest-only) under a steady load and
// per-hour rates of crashes, partitions and client aborts for simulated
// hours, and measures what leases cost (FleetResult: stranded and
// never-read lease block-seconds, pool occupancy by leases, heartbeat
// traffic, renewals, fallbacks, goodput, a time series). It drives only
// the engines with work at each instant (a heap of wake instants; swarm
// seeds can run that way too, Options.Sparse) and runs the after-instant
// checks once per FleetOptions.CheckEvery; the same seed gives the same
// result. kvlease sim --fleet runs it under every policy.
//
//	res, err := sim.RunFleet(sim.DefaultFleetOptions())
//
// # Mutation checks
//
// A simulator that cannot fail proves nothing. Built with the
// kvlease_mutation tag, package xfer has switches that break the protocol
// on purpose (an expiry sweep that stops at the first unexpired lease, a
// release that ignores an in-flight read, a consumer that skips heartbeats
// while queued, an abort that frees a finished request's blocks at once,
// a P that judges lease timing on when its loop handles a message rather
// than when it arrived, and the others xfer/mutation.go lists),
// and TestMutationsCaught requires the swarm to catch each within 200
// seeds, for the reason the break must cause:
//
//	go test -tags kvlease_mutation -run TestMutationsCaught ./sim/
package sim
