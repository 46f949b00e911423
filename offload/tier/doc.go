// Package tier holds the bytes behind an offload.Manager's slots and copies
// them asynchronously. It is an edge: it does I/O and runs goroutines; the
// Manager (package offload) decides what goes where.
//
// A Store keeps one block per slot: its per-token-slot digests and its KV
// bytes, tagged with the block's hash. Memory is a host-memory arena; Disk
// keeps one file per slot. Reads copy into caller buffers, so a load
// allocates nothing; a read whose record is missing, short, corrupt, or
// tagged with another hash is a miss (ok == false), never served. After a
// miss or an error the caller's buffers hold garbage.
//
// A Runner executes copy jobs (store: caller's buffers → tier; load: tier →
// caller's buffers) on a few worker goroutines and reports one Completion
// per job on a channel. Its admission is bounded: Submit fails with
// ErrQueueFull rather than block. The engine's node drives it like this:
//
//	r, _ := tier.NewRunner(store, tier.RunnerConfig{Workers: 2, QueueLen: 64})
//	plan, ok := mgr.PrepareStore(hashes) // pure core decides
//	err := r.Submit(tier.Job{ID: id, Kind: tier.JobStore, Copies: ...})
//	...
//	c := <-r.Completions()               // fed back into the core as an input
//	mgr.CompleteStore(hashesOf[c.JobID], c.OK)
//
// The caller keeps the buffers of a job alive and unchanged (a store hold
// on the pool's blocks, or a load hold) until its Completion arrives, and
// never runs two jobs on one slot at once unless both are loads (the
// Manager guarantees this: a slot being stored is not loadable, a slot
// being loaded is not evictable).
package tier
