// Package engine composes an engine: the block pool, the scheduler and the
// request lifecycle in Core (pure), and the goroutine that drives a Core with
// the real clock in Node (edge).
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
// Every finished request goes through one teardown sequence: its blocks are
// offered to the transfer hook (which may take a lease hold), then to the
// offload hook (which may take store holds), then the request hold is
// released. A block is freed only when its last hold goes, so no module asks
// another whether it may free. A request aborted while its step executes is
// finished at once (its output says so) but torn down when the step
// completes, so its blocks are never reused under a running step.
package engine
