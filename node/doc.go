// Package node runs an engine: the goroutine, the real clock, the TCP
// transfer transport and the offload tiers around engine.Loop.
//
// Everything the running engine decides is in engine.Loop (pure): the order
// in which inputs reach the core, when it steps, how P streams its reads and
// how long they pin their leases, the drain and shutdown sequence. The
// simulator (package sim) runs that same loop over a simulated network, so
// what it proves under faults is what production runs. A Node adds only the
// waiting, etcd raft's node.go around its RawNode:
//
//	for {
//		apply queued submissions, aborts and stats requests (loop.Add, ...)
//		feed finished offload copies (loop.Copied)
//		t := loop.Turn(now)     // transport events, completion, step, streaming
//		if t.Execute { hand t.Batch to the executor goroutine }
//		route t.Outputs to the request streams
//		if !t.Again {
//			wait for a submission, the transport, an offload completion,
//			the executor's result (loop.StepDone) or loop.NextWake
//		}
//	}
//
// The transport is reached through tcp.Port, which turns the zero-copy
// send's completion callbacks into events the loop polls; the offload tiers
// through an engine.Copier over offload/tier's Set. Submit, Start, Abort,
// Stop, Reject, Delivered, Stats, Drain, DrainBy, WaitIdle and WaitDrained
// are safe for concurrent use; each request's outputs come through its
// Stream.
package node
