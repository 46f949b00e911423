package kvblock

import (
	"fmt"
	"iter"
	"math"
	"slices"
)

// BlockID names a block of one pool: 0 ≤ id < capacity.
type BlockID int32

// HoldKind says what a hold is for. See docs/design.md, "Holds, not flags".
type HoldKind uint8

const (
	// HoldRequest: a running request's blocks (its block table).
	HoldRequest HoldKind = iota + 1
	// HoldLease: a finished prefill's blocks, kept for a remote decoder.
	HoldLease
	// HoldInbound: blocks a decoder allocated to receive a remote prefix.
	HoldInbound
	// HoldStore: blocks an offload store is copying out.
	HoldStore
	// HoldLoad: blocks an offload load is copying in.
	HoldLoad
	numHoldKinds
)

func (k HoldKind) String() string {
	switch k {
	case HoldRequest:
		return "request"
	case HoldLease:
		return "lease"
	case HoldInbound:
		return "inbound"
	case HoldStore:
		return "store"
	case HoldLoad:
		return "load"
	}
	return fmt.Sprintf("HoldKind(%d)", k)
}

// HoldID names a live hold. The zero HoldID is never live. A HoldID is
// never reused after release, so releasing it twice, or using it after
// release, panics instead of touching a newer hold. (An id is a slot of the
// hold table and the slot's 32-bit generation; a slot whose generation is
// exhausted is retired rather than wrapped, at the cost of one table entry
// per 2³² holds.)
type HoldID uint64

func (h HoldID) index() int             { return int(uint32(h)) - 1 }
func (h HoldID) gen() uint32            { return uint32(h >> 32) }
func mkHold(idx int, gen uint32) HoldID { return HoldID(uint64(gen)<<32 | uint64(idx+1)) }

// Config sizes a pool.
type Config struct {
	// NumBlocks is the capacity in blocks.
	NumBlocks int
	// BlockSizeTokens is the number of token slots per block.
	BlockSizeTokens int
	// BytesPerToken is the KV bytes of one token slot across all layers
	// (2 × layers × kv heads × head dim × dtype bytes). Zero selects
	// digest-only mode: no arena, only per-slot digests.
	BytesPerToken int
	// Events enables the events outbox. When false nothing is recorded.
	Events bool
	// Medium labels events ("GPU" when empty).
	Medium string
}

// Validate reports the first problem with c.
func (c Config) Validate() error {
	switch {
	case c.NumBlocks <= 0:
		return fmt.Errorf("kvblock: NumBlocks must be positive, got %d", c.NumBlocks)
	case c.BlockSizeTokens <= 0 || c.BlockSizeTokens > 1024:
		return fmt.Errorf("kvblock: BlockSizeTokens must be in [1, 1024], got %d", c.BlockSizeTokens)
	case c.BytesPerToken < 0:
		return fmt.Errorf("kvblock: BytesPerToken must not be negative, got %d", c.BytesPerToken)
	case int64(c.NumBlocks)*int64(c.BlockSizeTokens)*int64(c.BytesPerToken) > 1<<40:
		return fmt.Errorf("kvblock: arena of %d blocks × %d tokens × %d bytes is over 1 TiB", c.NumBlocks, c.BlockSizeTokens, c.BytesPerToken)
	}
	return nil
}

type hold struct {
	kind   HoldKind
	live   bool
	gen    uint32
	owner  uint64
	blocks []BlockID
}

const none int32 = -1

// EventKind names a KV cache event, with vLLM's names.
type EventKind uint8

const (
	BlockStored EventKind = iota + 1
	BlockRemoved
	AllBlocksCleared
)

func (k EventKind) String() string {
	switch k {
	case BlockStored:
		return "BlockStored"
	case BlockRemoved:
		return "BlockRemoved"
	case AllBlocksCleared:
		return "AllBlocksCleared"
	}
	return "EventKind(?)"
}

// Event is one entry of the pool's outbox, shaped like vLLM's KV events so an
// edge can publish it to a KV-cache indexer.
type Event struct {
	Kind EventKind
	// Hashes are the blocks stored or removed, in chain order for BlockStored.
	Hashes []Hash
	// Parent is the hash preceding Hashes[0] in its chain (RootHash for the
	// first block of a prompt); BlockStored only.
	Parent Hash
	// Tokens are the token ids of the stored blocks; BlockStored only.
	Tokens    []int32
	BlockSize int
	// Medium is where the blocks live: "GPU" for the primary pool, "CPU" or
	// "DISK" for offload tiers.
	Medium string
	// Adapter is the LoRA adapter the stored blocks were computed under
	// (the zero Adapter for the base model); BlockStored only.
	Adapter Adapter
}

// Pool is a fixed-capacity KV block pool. Not safe for concurrent use.
type Pool struct {
	cfg        Config
	blockBytes int

	refs   []int32 // live holds naming each block
	hashed []bool
	hashes []Hash

	// LRU of evictable blocks: head is the next to evict.
	prev, next     []int32
	lruHead, lruTl int32
	numEvictable   int

	free  []BlockID // unhashed blocks with no hold; stack, last pushed is reused first
	index map[Hash]BlockID

	holds     []hold
	freeHolds []int
	numLive   [numHoldKinds]int

	arena   []byte
	digests []uint64

	events []Event

	// version counts changes of the accounting (every mutator bumps it);
	// checked is the version the last passing full check saw (valid when
	// checkedOK), so Check on an unchanged pool costs nothing.
	version   uint64
	checked   uint64
	checkedOK bool
	// chkCount and chkState are CheckFull's scratch (capacity-sized, made
	// on first use): a check allocates nothing.
	chkCount []int32
	chkState []byte
}

// New returns a pool with every block free. It panics if cfg is invalid:
// configuration is validated at the edges.
func New(cfg Config) *Pool {
	if err := cfg.Validate(); err != nil {
		panic(err)
	}
	if cfg.Medium == "" {
		cfg.Medium = "GPU"
	}
	n := cfg.NumBlocks
	p := &Pool{
		cfg:        cfg,
		blockBytes: cfg.BlockSizeTokens * cfg.BytesPerToken,
		refs:       make([]int32, n),
		hashed:     make([]bool, n),
		hashes:     make([]Hash, n),
		prev:       make([]int32, n),
		next:       make([]int32, n),
		lruHead:    none,
		lruTl:      none,
		free:       make([]BlockID, n),
		index:      make(map[Hash]BlockID),
		digests:    make([]uint64, n*cfg.BlockSizeTokens),
	}
	// Block 0 on top of the stack: allocation order starts at block 0.
	for i := range p.free {
		p.free[i] = BlockID(n - 1 - i)
		p.prev[i], p.next[i] = none, none
	}
	if p.blockBytes > 0 {
		p.arena = make([]byte, n*p.blockBytes)
	}
	return p
}

// Config returns the pool's configuration.
func (p *Pool) Config() Config { return p.cfg }

// Capacity is the number of blocks.
func (p *Pool) Capacity() int { return p.cfg.NumBlocks }

// BlockSizeTokens is the number of token slots per block.
func (p *Pool) BlockSizeTokens() int { return p.cfg.BlockSizeTokens }

// NumFree is the number of blocks with no hold and no hash.
func (p *Pool) NumFree() int { return len(p.free) }

// NumEvictable is the number of cached blocks with no hold.
func (p *Pool) NumEvictable() int { return p.numEvictable }

// NumHeld is the number of blocks with at least one hold.
func (p *Pool) NumHeld() int { return p.cfg.NumBlocks - len(p.free) - p.numEvictable }

// NumAvailable is how many blocks an allocation could take now (free plus
// evictable).
func (p *Pool) NumAvailable() int { return len(p.free) + p.numEvictable }

// Usage is the fraction of blocks held, in [0, 1]: vLLM's
// kv_cache_usage_perc, where cached blocks with no hold count as free.
func (p *Pool) Usage() float64 { return float64(p.NumHeld()) / float64(p.cfg.NumBlocks) }

// NumHolds is the number of live holds of a kind.
func (p *Pool) NumHolds(k HoldKind) int { return p.numLive[k] }

// NewHold starts an empty hold of kind k for owner. Blocks join it through
// Allocate and Share; Release ends it.
func (p *Pool) NewHold(k HoldKind, owner uint64) HoldID {
	p.version++
	if k == 0 || k >= numHoldKinds {
		panic(fmt.Sprintf("kvblock: bad hold kind %d", k))
	}
	var idx int
	if n := len(p.freeHolds); n > 0 {
		idx = p.freeHolds[n-1]
		p.freeHolds = p.freeHolds[:n-1]
	} else {
		if uint64(len(p.holds)) >= math.MaxUint32-1 {
			panic("kvblock: hold table full") // 2³² live holds: unreachable in memory
		}
		p.holds = append(p.holds, hold{})
		idx = len(p.holds) - 1
	}
	h := &p.holds[idx]
	h.gen++
	h.kind, h.owner, h.live = k, owner, true
	h.blocks = h.blocks[:0]
	p.numLive[k]++
	return mkHold(idx, h.gen)
}

func (p *Pool) hold(id HoldID) *hold {
	// uint(index): an index of -1 (the zero HoldID) fails the bound.
	i := uint(id.index())
	if i < uint(len(p.holds)) {
		if h := &p.holds[i]; h.live && h.gen == id.gen() {
			return h
		}
	}
	panic(holdError{id, i < uint(len(p.holds))})
}

// holdError is hold's panic for an id that names no live hold; it is
// formatted only when printed, so that hold stays small enough to be
// inlined in Blocks and Len, which every step calls.
type holdError struct {
	id     HoldID
	exists bool
}

func (e holdError) Error() string {
	if !e.exists {
		return fmt.Sprintf("kvblock: hold %#x does not exist", uint64(e.id))
	}
	return fmt.Sprintf("kvblock: hold %#x is not live (released twice or used after release)", uint64(e.id))
}

// Live reports whether id names a live hold.
func (p *Pool) Live(id HoldID) bool {
	i := id.index()
	return i >= 0 && i < len(p.holds) && p.holds[i].live && p.holds[i].gen == id.gen()
}

// Kind and Owner describe a live hold.
func (p *Pool) Kind(id HoldID) HoldKind { return p.hold(id).kind }

// Owner returns the owner id given to NewHold.
func (p *Pool) Owner(id HoldID) uint64 { return p.hold(id).owner }

// Blocks returns the hold's blocks in the order they joined it. The slice is
// owned by the pool and valid until the hold next changes; do not modify it.
func (p *Pool) Blocks(id HoldID) []BlockID { return p.hold(id).blocks }

// Len is the number of blocks in the hold.
func (p *Pool) Len(id HoldID) int { return len(p.hold(id).blocks) }

// Allocate adds n new blocks to the hold, taking free blocks first and then
// evicting the least recently used cached blocks. It is all or nothing: if
// fewer than n blocks are available it changes nothing and returns false.
func (p *Pool) Allocate(id HoldID, n int) bool {
	p.version++
	h := p.hold(id)
	if n < 0 {
		panic("kvblock: negative allocation")
	}
	if n > len(p.free)+p.numEvictable {
		return false
	}
	for ; n > 0; n-- {
		var b BlockID
		if k := len(p.free); k > 0 {
			b = p.free[k-1]
			p.free = p.free[:k-1]
		} else {
			b = BlockID(p.lruHead)
			p.lruRemove(b)
			p.uncache(b)
		}
		p.refs[b] = 1
		h.blocks = append(h.blocks, b)
	}
	return true
}

// Share adds existing blocks to the hold: blocks another hold already names,
// or cached evictable blocks (a prefix-cache hit, which also makes them the
// most recently used). Sharing a free block panics: its content is garbage.
func (p *Pool) Share(id HoldID, blocks []BlockID) {
	p.version++
	h := p.hold(id)
	for _, b := range blocks {
		p.checkBlock(b)
		if p.refs[b] == 0 {
			if !p.hashed[b] {
				panic(fmt.Sprintf("kvblock: Share of free block %d", b))
			}
			p.lruRemove(b)
		}
		p.refs[b]++
		h.blocks = append(h.blocks, b)
	}
}

// Release ends the hold: each of its blocks loses one hold, and a block with
// no hold left becomes evictable (if cached) or free. Blocks are released
// last to first, so the tail of a prefix chain is evicted first.
func (p *Pool) Release(id HoldID) {
	p.version++
	h := p.hold(id)
	p.dropBlocks(h.blocks)
	h.blocks = h.blocks[:0]
	h.live = false
	p.numLive[h.kind]--
	if h.gen == math.MaxUint32 {
		// Its next id would wrap to one already issued: retire the slot.
		h.blocks = nil
		return
	}
	p.freeHolds = append(p.freeHolds, id.index())
}

// Truncate keeps the first n blocks of the hold and drops the hold on the
// rest (last to first).
func (p *Pool) Truncate(id HoldID, n int) {
	p.version++
	h := p.hold(id)
	if n < 0 || n > len(h.blocks) {
		panic(fmt.Sprintf("kvblock: Truncate(%d) of a hold with %d blocks", n, len(h.blocks)))
	}
	p.dropBlocks(h.blocks[n:])
	h.blocks = h.blocks[:n]
}

func (p *Pool) dropBlocks(blocks []BlockID) {
	for i := len(blocks) - 1; i >= 0; i-- {
		b := blocks[i]
		if p.refs[b] <= 0 {
			panic(fmt.Sprintf("kvblock: block %d released with no hold", b))
		}
		p.refs[b]--
		if p.refs[b] > 0 {
			continue
		}
		if p.hashed[b] {
			p.lruPushBack(b)
		} else {
			p.free = append(p.free, b)
		}
	}
}

// Cache records that held block b is full and has prefix hash hash, making
// it reusable by later requests with the same prefix. If another block
// already carries that hash, b stays uncached (block tables never change) and
// Cache returns false. Caching a block that is not held, or already cached,
// panics.
func (p *Pool) Cache(b BlockID, hash Hash) bool {
	p.version++
	p.checkBlock(b)
	if p.refs[b] == 0 {
		panic(fmt.Sprintf("kvblock: Cache of unheld block %d", b))
	}
	if p.hashed[b] {
		if p.hashes[b] == hash {
			return false
		}
		panic(fmt.Sprintf("kvblock: block %d is already cached with another hash", b))
	}
	if _, dup := p.index[hash]; dup {
		return false
	}
	p.index[hash] = b
	p.hashed[b] = true
	p.hashes[b] = hash
	return true
}

// CacheRun caches blocks[i] under hashes[i] for each i and records one
// BlockStored event for the blocks it newly cached (blocks that already
// carried their hash, or whose hash another block carries, are left out).
// parent is the hash before hashes[0]; the event's Parent is the hash before
// its first newly cached block. tokens are the blocks' token ids, blockSize
// per block (copied when events are on; ignored, and may be nil, when off).
func (p *Pool) CacheRun(blocks []BlockID, hashes []Hash, parent Hash, tokens []int32) {
	p.CacheRunAdapter(blocks, hashes, parent, tokens, Adapter{})
}

// CacheRunAdapter is CacheRun for blocks computed under adapter a, which
// the event reports (lora_name, lora_id).
func (p *Pool) CacheRunAdapter(blocks []BlockID, hashes []Hash, parent Hash, tokens []int32, a Adapter) {
	if len(blocks) != len(hashes) {
		panic("kvblock: CacheRun with mismatched blocks and hashes")
	}
	bs := p.cfg.BlockSizeTokens
	var ev Event
	stored := false
	for i, b := range blocks {
		// The event is built from Cache's own answer: re-deriving "newly
		// cached" from the pool state afterwards would also report blocks
		// that were cached before this call.
		if !p.Cache(b, hashes[i]) || !p.cfg.Events {
			continue
		}
		if !stored {
			stored = true
			ev = Event{Kind: BlockStored, BlockSize: bs, Medium: p.cfg.Medium, Parent: parent, Adapter: a}
			if i > 0 {
				ev.Parent = hashes[i-1]
			}
		}
		ev.Hashes = append(ev.Hashes, hashes[i])
		ev.Tokens = append(ev.Tokens, tokens[i*bs:(i+1)*bs]...)
	}
	if stored {
		p.events = append(p.events, ev)
	}
}

// Uncache removes b's hash from the index (for example after a failed load
// left it with bad content). An evictable block becomes free.
func (p *Pool) Uncache(b BlockID) {
	p.version++
	p.checkBlock(b)
	if !p.hashed[b] {
		return
	}
	if p.refs[b] == 0 {
		p.lruRemove(b)
		p.uncache(b)
		p.free = append(p.free, b)
		return
	}
	p.uncache(b)
}

func (p *Pool) uncache(b BlockID) {
	h := p.hashes[b]
	if p.index[h] == b {
		delete(p.index, h)
	}
	p.hashed[b] = false
	if p.cfg.Events {
		p.events = append(p.events, Event{Kind: BlockRemoved, Hashes: []Hash{h}, Medium: p.cfg.Medium, BlockSize: p.cfg.BlockSizeTokens})
	}
}

// ResetCache drops every cached hash. It succeeds only when no block is
// held (vLLM's reset_prefix_cache), and records AllBlocksCleared.
func (p *Pool) ResetCache() bool {
	p.version++
	if p.NumHeld() > 0 {
		return false
	}
	for p.lruHead != none {
		b := BlockID(p.lruHead)
		p.lruRemove(b)
		p.hashed[b] = false
		p.free = append(p.free, b)
	}
	clear(p.index)
	if p.cfg.Events {
		p.events = append(p.events, Event{Kind: AllBlocksCleared, Medium: p.cfg.Medium})
	}
	return true
}

// Lookup appends to dst the blocks caching the longest prefix of hashes and
// returns it. It does not take a hold: Share the result to keep it.
func (p *Pool) Lookup(dst []BlockID, hashes []Hash) []BlockID {
	for _, h := range hashes {
		b, ok := p.index[h]
		if !ok {
			break
		}
		dst = append(dst, b)
	}
	return dst
}

// Cached reports whether b carries a prefix hash, and which. The hash is
// zero when b carries none (a block keeps its last hash in memory after it
// is evicted or uncached; that stale value must not leak out).
func (p *Pool) Cached(b BlockID) (Hash, bool) {
	if !p.hashed[b] {
		return Hash{}, false
	}
	return p.hashes[b], true
}

// Refs is the number of live holds naming b.
func (p *Pool) Refs(b BlockID) int { return int(p.refs[b]) }

// Bytes is b's KV memory (nil in digest-only mode). The slice aliases the
// arena: valid for the pool's life, its content changes when the block is
// reallocated and written.
func (p *Pool) Bytes(b BlockID) []byte {
	if p.blockBytes == 0 {
		return nil
	}
	return p.arena[int(b)*p.blockBytes : (int(b)+1)*p.blockBytes]
}

// Arena is the KV memory of every block, block 0 first (nil in digest-only
// mode): for the edge that asks the operating system to back it with large
// pages or to fault it in before the first request (node.PrepareKV). It
// aliases the blocks' bytes.
func (p *Pool) Arena() []byte { return p.arena }

// SlotBytes is the KV memory of one token slot of b (nil in digest-only mode).
func (p *Pool) SlotBytes(b BlockID, slot int) []byte {
	if p.blockBytes == 0 {
		return nil
	}
	off := int(b)*p.blockBytes + slot*p.cfg.BytesPerToken
	return p.arena[off : off+p.cfg.BytesPerToken]
}

// Digests are b's per-slot content digests, one per token slot. Whoever
// writes a slot's KV writes its digest; whoever reads KV reads them. The
// slice aliases the pool's memory.
func (p *Pool) Digests(b BlockID) []uint64 {
	n := p.cfg.BlockSizeTokens
	return p.digests[int(b)*n : (int(b)+1)*n]
}

// TakeEvents returns the outbox and empties it. The caller owns the slice.
func (p *Pool) TakeEvents() []Event {
	ev := p.events
	p.events = nil
	return ev
}

func (p *Pool) checkBlock(b BlockID) {
	if b < 0 || int(b) >= p.cfg.NumBlocks {
		panic(fmt.Sprintf("kvblock: block %d out of range [0, %d)", b, p.cfg.NumBlocks))
	}
}

func (p *Pool) lruPushBack(b BlockID) {
	i := int32(b)
	p.prev[i], p.next[i] = p.lruTl, none
	if p.lruTl != none {
		p.next[p.lruTl] = i
	} else {
		p.lruHead = i
	}
	p.lruTl = i
	p.numEvictable++
}

func (p *Pool) lruRemove(b BlockID) {
	i := int32(b)
	pr, nx := p.prev[i], p.next[i]
	if pr != none {
		p.next[pr] = nx
	} else {
		p.lruHead = nx
	}
	if nx != none {
		p.prev[nx] = pr
	} else {
		p.lruTl = pr
	}
	p.prev[i], p.next[i] = none, none
	p.numEvictable--
}

// HoldInfo describes a live hold, for invariant checks and debugging.
type HoldInfo struct {
	ID     HoldID
	Kind   HoldKind
	Owner  uint64
	Blocks int
}

// Holds yields every live hold, in slab order (deterministic), without
// allocating. The pool must not change during the iteration.
func (p *Pool) Holds() iter.Seq[HoldInfo] {
	return func(yield func(HoldInfo) bool) {
		for i := range p.holds {
			h := &p.holds[i]
			if h.live && !yield(HoldInfo{ID: mkHold(i, h.gen), Kind: h.kind, Owner: h.owner, Blocks: len(h.blocks)}) {
				return
			}
		}
	}
}

// LiveHolds appends every live hold to dst, in slab order (deterministic).
func (p *Pool) LiveHolds(dst []HoldInfo) []HoldInfo {
	n := 0
	for _, k := range p.numLive {
		n += k
	}
	dst = slices.Grow(dst, n) // one allocation at most
	for i := range p.holds {
		h := &p.holds[i]
		if h.live {
			dst = append(dst, HoldInfo{ID: mkHold(i, h.gen), Kind: h.kind, Owner: h.owner, Blocks: len(h.blocks)})
		}
	}
	return dst
}

// Version counts the changes of the pool's accounting: equal versions mean
// the holds, the free stack, the LRU and the index are as they were.
func (p *Pool) Version() uint64 { return p.version }

// Check verifies the pool's accounting, as CheckFull does, when it changed
// since the last check that passed; on an unchanged pool it returns nil at
// once. Every method that changes the accounting counts a version, so the
// answer is CheckFull's: the state it would verify is the one that already
// passed. (Only a write into a slice the pool lent out, which its contract
// forbids, could change the state unseen; CheckFull catches that too.) A
// simulator can so check every pool after every instant at the cost of the
// instants that changed it.
func (p *Pool) Check() error {
	if p.checkedOK && p.checked == p.version {
		return nil
	}
	if err := p.CheckFull(); err != nil {
		p.checkedOK = false
		return err
	}
	p.checked, p.checkedOK = p.version, true
	return nil
}

// CheckFull verifies the pool's accounting: free + evictable + held ==
// capacity; every block's hold count equals the number of live holds naming
// it; the free stack holds exactly the unheld uncached blocks; the LRU holds
// exactly the unheld cached blocks; the index maps exactly every cached
// block's hash to it. It costs O(capacity + blocks in holds), allocates
// nothing after its first call, and returns the first violation.
func (p *Pool) CheckFull() error {
	n := p.cfg.NumBlocks
	if got := len(p.free) + p.numEvictable + p.NumHeld(); got != n {
		return fmt.Errorf("kvblock: free %d + evictable %d + held %d != capacity %d", len(p.free), p.numEvictable, p.NumHeld(), n)
	}
	if p.chkCount == nil {
		p.chkCount, p.chkState = make([]int32, n), make([]byte, n)
	}
	count := p.chkCount
	clear(count)
	var live [numHoldKinds]int
	for i := range p.holds {
		h := &p.holds[i]
		if !h.live {
			if len(h.blocks) != 0 {
				return fmt.Errorf("kvblock: released hold %d still names %d blocks", i, len(h.blocks))
			}
			continue
		}
		live[h.kind]++
		for _, b := range h.blocks {
			count[b]++
		}
	}
	if live != p.numLive {
		return fmt.Errorf("kvblock: live hold counts %v, recorded %v", live, p.numLive)
	}
	state := p.chkState // 1 free, 2 evictable
	clear(state)
	for _, b := range p.free {
		if state[b] != 0 {
			return fmt.Errorf("kvblock: block %d twice in the free stack", b)
		}
		state[b] = 1
	}
	seen := 0
	for i, prev := p.lruHead, none; i != none; prev, i = i, p.next[i] {
		if p.prev[i] != prev {
			return fmt.Errorf("kvblock: LRU link broken at block %d", i)
		}
		if state[i] != 0 {
			return fmt.Errorf("kvblock: block %d in the LRU twice or also free", i)
		}
		state[i] = 2
		if seen++; seen > n {
			return fmt.Errorf("kvblock: LRU has a cycle")
		}
	}
	if seen != p.numEvictable {
		return fmt.Errorf("kvblock: LRU has %d blocks, counted %d", seen, p.numEvictable)
	}
	for b := 0; b < n; b++ {
		if count[b] != p.refs[b] {
			return fmt.Errorf("kvblock: block %d has %d holds recorded, %d live holds name it", b, p.refs[b], count[b])
		}
		switch {
		case p.refs[b] > 0 && state[b] != 0:
			return fmt.Errorf("kvblock: held block %d is also free or evictable", b)
		case p.refs[b] == 0 && p.hashed[b] && state[b] != 2:
			return fmt.Errorf("kvblock: unheld cached block %d is not in the LRU", b)
		case p.refs[b] == 0 && !p.hashed[b] && state[b] != 1:
			return fmt.Errorf("kvblock: unheld uncached block %d is not free", b)
		}
	}
	// Every cached block is found under its hash, and the index has no
	// other entry: equal sizes, since distinct blocks found under their
	// hashes are distinct entries. (One lookup per cached block; cheaper
	// than ranging over the map.)
	numHashed := 0
	for b := 0; b < n; b++ {
		if !p.hashed[b] {
			continue
		}
		numHashed++
		if got, ok := p.index[p.hashes[b]]; !ok || int(got) != b {
			return fmt.Errorf("kvblock: cached block %d is not in the index under its hash %x", b, p.hashes[b])
		}
	}
	if len(p.index) != numHashed {
		return fmt.Errorf("kvblock: %d blocks are cached but the index has %d entries (an entry names no block carrying it)", numHashed, len(p.index))
	}
	return nil
}
