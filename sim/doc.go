// Package sim is kvlease's deterministic whole-cluster simulator.
//
// A Cluster wires prefill and decode engine cores (engine.Core with the
// model/sim executor) over a simulated network (transport/memnet), with an
// in-simulation proxy that runs each request's prefill leg, carries the
// lease to a decode engine and collects the tokens — all in one goroutine
// on a virtual clock, reproducibly from a seed. Faults (crashes, restarts,
// hangs, partitions, message delay, loss, duplication and reordering,
// client aborts) are scheduled at instants.
//
// After every instant the cluster checks every engine's invariants (pool
// accounting, no orphan hold, no lease released twice or during a read);
// an Oracle runs each request alone on one engine and every finished
// request's tokens must equal its oracle's exactly.
package sim
