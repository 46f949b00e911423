// Package offload decides what lives in a lower KV-cache tier (host memory,
// disk): a Manager per tier keeps the tier's index of block hashes, chooses
// slots and victims (LRU or ARC), pins blocks being loaded, hides blocks
// being stored, filters one-off blocks (reuse filter) and records events.
// The bytes themselves live behind the Manager's slots in offload/tier.
//
// The Manager follows vLLM's OffloadingManager (vllm/v1/kv_offload): the
// caller drives it in pairs,
//
//	hits, res := m.Lookup(hashes)        // res == HitPending: ask again later
//	slots := m.PrepareLoad(hashes[:hits]) // pinned: cannot be evicted
//	... copy tier slots → primary pool (offload/tier.Runner) ...
//	m.CompleteLoad(hashes[:hits])
//
//	plan, ok := m.PrepareStore(hashes)   // !ok: nothing changed, try later
//	... copy primary pool → plan.Slots (the pool keeps a store hold) ...
//	m.CompleteStore(plan.Hashes, copied) // ready (loadable) or removed
//
// and drains TakeEvents to publish BlockStored / BlockRemoved.
//
// Block states. A hash in the tier is either being stored (not ready: not
// loadable, not evictable) or ready; a ready block with pins (loads in
// flight) is not evictable either. Only ready, unpinned blocks are
// evictable, and PrepareStore is all or nothing: it evicts and allocates
// only if it can place every block it accepts.
//
// Recency. Evictable blocks sit in recency lists (intrusive, O(1)). A block
// enters its list at the most recent end whenever it becomes evictable:
// when its store completes, when its last load completes, and when Touch
// touches it. Blocks that are not evictable are not in the lists at all, so
// eviction never scans past pinned blocks and every operation is O(1) per
// block. (vLLM keeps pinned blocks in its OrderedDict and skips them while
// scanning; the only difference this makes is that a pinned block touched
// while pinned takes its recency from the moment it is unpinned, which is
// later and so never earlier evicted.)
//
// ARC keeps T1 (seen once) and T2 (touched again while ready) and ghost
// lists B1/B2 of recently evicted hashes, each bounded by the capacity.
// Touching a ghost adapts the target size of T1 as vLLM does. Eviction takes
// from T1 when |T1| ≥ target and T1 has an evictable block, else from T2,
// else from T1 (vLLM fails in that last case even though T1 has room; we
// do not, so PrepareStore fails only when too few blocks are evictable at
// all).
//
// Reuse filter: with StoreThreshold ≥ 2, Lookup counts how often it has seen
// each hash (a bounded LRU of MaxTrackerSize counters) and PrepareStore
// refuses hashes seen fewer than StoreThreshold times, listing them in
// StorePlan.Refused so the caller can offer them again later.
//
// A Manager is not safe for concurrent use; it belongs to one engine core.
// Caller bugs (loading a block that is not ready, completing a store that is
// not in flight) panic; outcomes (miss, tier full, refused) are values.
//
// # Policy and Coordinator
//
// A Policy (an interface) decides which blocks are offered to the tiers and
// when, from the triggers it is told of — a request computed more blocks,
// was preempted, finished; the primary pool is short of free blocks; a
// lookup found blocks in the tiers — and the tiers' answers. The built-ins,
// each in its own file: StoreOnCompute (every full block once computed),
// StoreOnFinish (a request's blocks when it finishes), PreemptionOnly (a
// preempted request's blocks), Spillover (cached blocks with no hold at
// the head of the primary pool's eviction order, while the pool is short
// of free blocks) and RequestLevel (a request's blocks as one all-or-
// nothing unit when it finishes; lookups load whole units only). Any other
// policy is passed as Config.NewPolicy. The Coordinator keeps, per request
// and tier, a watermark that advances only over blocks the Manager
// accepted; refused blocks are offered again at the next trigger
// (docs/scenarios.md S21), whatever the policy.
//
// A Coordinator owns one Manager per tier (Config.Tiers, parsed from
// --offload by ParseTiers; stores write through to every tier, loads
// prefer the first tier holding a block) and a Policy, and takes holds in
// the engine's kvblock.Pool: a store hold on the blocks of each store until
// StoreDone, and a load hold on a request's primary prefix and its target
// blocks until its last LoadDone. So a finished request's hold can be
// dropped at once: blocks still being stored stay held (S20), and nobody
// asks anybody whether a free may happen.
//
// The engine core drives it with these calls (offload/tier executes the
// work; see its Set):
//
//	sched.OnPreempt = func(r) { co.Preempted(r.ID, pool.Blocks(r.Hold), r.Hashes, r.NumComputed) }
//	// sched.OnAdmit, just before a request without a hold is admitted
//	// (engine.Core: once per admission; LookupWait's wait defers it):
//	if co.Lookup(r.ID, r.Tokens, r.Hashes) { park r until LoadDone says ready }
//	// after each step, for every request of the batch that did not finish:
//	co.Computed(r.ID, pool.Blocks(r.Hold), r.Hashes, r.NumComputed)
//	// teardown, after the transfer module took its lease, before Release:
//	co.Finished(r.ID, pool.Blocks(r.Hold), r.Hashes, r.NumComputed)
//	// each Step: the copies to run and the tiers' events
//	w := co.Take()
//	// each completion from the edge:
//	co.StoreDone(id, copied)
//	req, ready := co.LoadDone(id, copied) // ready: sched.Resume(req); its prefix is cached
//
// Lease spill (lease.go): a prefill engine's leased, unread blocks may be
// stored (SpillLease, under a store hold), pinned in their tier for the
// lease (a load's pin: not evictable) so the engine drops the lease's
// primary copies, restored for a read (RestoreLease: shared from the pool
// when it still caches them, loaded back otherwise, under a load hold),
// and unpinned when the lease ends or is restored (UnpinLease).
// Config.LeaseSpill is the policy the engine applies; MaxLeaseSpillBlocks
// bounds the tier blocks leases take.
//
// Bounds: MaxInflightStoreBlocks and MaxInflightLoadBlocks cap the blocks
// under store and load holds (at the bound, offers wait and lookups load
// less), MaxRequests the requests with watermarks, SpillAheadBlocks the
// spillover window; offers are cut to what a tier can place.
package offload
