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
package offload
