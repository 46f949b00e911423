// Package kvblock is the KV-cache block pool: fixed capacity, typed holds,
// a chained prefix-hash index, an O(1) evictable LRU and an events outbox.
//
// A block is in exactly one of three states:
//
//   - held: at least one live hold names it;
//   - evictable: no hold, but it carries a prefix hash, so a later request
//     with the same prefix can reuse it; it sits in the LRU;
//   - free: no hold and no hash.
//
// A hold (HoldID) has a kind (request, lease, inbound, store, load) and an
// owner id, and owns an ordered list of blocks: for a request hold that list
// is the request's block table. Nobody asks anybody whether a block may be
// freed: a block becomes evictable or free exactly when its last hold is
// released. Releasing a hold that is not live panics, so a double free is a
// crash in tests instead of silent corruption in production.
//
// Allocation takes unhashed free blocks first (most recently freed first),
// then evicts the least recently used evictable block (lazy eviction: a
// cached block keeps its hash until its memory is needed). Release appends a
// hold's hashed blocks to the LRU in reverse order, so the tail of a prefix
// chain is evicted before its head.
//
// Check proves free + evictable + held == capacity and that every block's
// hold count equals the number of live holds that name it.
//
// A Pool is not safe for concurrent use; it belongs to one engine core.
package kvblock
