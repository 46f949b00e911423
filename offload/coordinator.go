package offload

import (
	"fmt"
	"slices"

	"github.com/kvlease/kvlease/kvblock"
)

// WorkID names one StoreWork or LoadWork; it is never reused.
type WorkID uint64

// StoreWork copies blocks of the primary pool into a tier: for each i, the
// KV bytes and digests of Blocks[i] (whose content has hash Hashes[i]) go
// to slot Slots[i] of tier Tier. A store hold keeps the blocks unchanged
// until the edge reports StoreDone(ID, copied). The slices are the
// caller's.
type StoreWork struct {
	ID     WorkID
	Tier   int    // index in Config.Tiers
	Medium string // MediumCPU or MediumDisk
	Blocks []kvblock.BlockID
	Hashes []kvblock.Hash
	Slots  []Slot
}

// LoadWork copies blocks from a tier into the primary pool: slot Slots[i]
// of tier Tier (a record of hash Hashes[i]) goes into Blocks[i]. A load
// hold keeps the target blocks (and the request's primary prefix) until the
// edge reports LoadDone(ID, copied). The slices are the caller's.
type LoadWork struct {
	ID     WorkID
	Tier   int
	Medium string
	// Req is the request the blocks are loaded for.
	Req    uint64
	Blocks []kvblock.BlockID
	Hashes []kvblock.Hash
	Slots  []Slot
}

// Work is what the Coordinator hands to the edge at each Take: copies to
// run (with offload/tier) and the tiers' KV events (BlockStored and
// BlockRemoved, Medium CPU or DISK) to publish. The caller owns the slices.
type Work struct {
	Stores []StoreWork
	Loads  []LoadWork
	Events []kvblock.Event
}

// Empty reports whether w holds nothing.
func (w *Work) Empty() bool { return len(w.Stores) == 0 && len(w.Loads) == 0 && len(w.Events) == 0 }

// TierStats are one tier's counters (cumulative) and figures (current),
// for kvlease_offload_*_total{medium}.
type TierStats struct {
	Medium string
	// Capacity and Blocks are the tier's slots and its blocks (ready or
	// being stored) now.
	Capacity, Blocks int
	// StoredBlocks completed successfully; StoreFailedBlocks did not.
	StoredBlocks, StoreFailedBlocks uint64
	// StoreFailures counts the failed blocks by outcome (StoreOutcomes):
	// retried, or given up after the last retry, or at a retry because
	// the block was evicted or the tier had no room.
	StoreFailures [numStoreOutcomes]uint64
	// RefusedBlocks were offered and refused by the tier (reuse filter or
	// tier full of blocks in flight); they are offered again later.
	RefusedBlocks uint64
	// HitBlocks were found ready in this tier by a lookup and planned for
	// loading (kvlease_offload_hits_total); LoadedBlocks were loaded
	// successfully, LoadFailedBlocks were not (missing or corrupt records,
	// and the copies after them).
	HitBlocks, LoadedBlocks, LoadFailedBlocks uint64
	// EvictedBlocks were evicted to make room; InvalidatedBlocks were
	// removed after a failed load.
	EvictedBlocks, InvalidatedBlocks uint64
}

// Stats are the Coordinator's counters.
type Stats struct {
	// Policy is the store policy's name; LeaseSpill the lease spill
	// policy's (Config.LeaseSpill).
	Policy, LeaseSpill string
	Tiers              []TierStats
	// InflightStoreBlocks and InflightLoadBlocks are under store and load
	// holds now.
	InflightStoreBlocks, InflightLoadBlocks int
	// Lookups counts Lookup calls; LoadingRequests is how many of them
	// planned loads.
	Lookups, LoadingRequests uint64
	// LoadedTokens are the prompt tokens brought back from tiers and cached
	// in the primary pool (so not recomputed, if they stay until the
	// request is admitted).
	LoadedTokens uint64
	// HeldLoadBlocks are loaded prefixes held until their requests'
	// admission now. LoadHoldsExpired, LoadHoldsValved and
	// LoadHoldsBounded count the loaded prefixes not held until admission:
	// dropped after LoadHoldSteps steps, dropped by the valve (DropHeld),
	// and not held at the MaxHeldLoadBlocks bound. LoadedEvictedBlocks counts blocks of loaded
	// prefixes evicted before their request's admission (a load wasted).
	HeldLoadBlocks                                      int
	LoadHoldsExpired, LoadHoldsValved, LoadHoldsBounded uint64
	LoadedEvictedBlocks                                 uint64
	// Lease spill (lease.go): LeaseSpills and LeaseSpilledBlocks count the
	// leases whose blocks were pinned in a tier for them (their primary
	// copies may go), LeasePinnedBlocks are pinned now and
	// LeaseSpillingBlocks being stored; LeaseSpillRefusedBlocks were
	// offered and refused (no room, a bound), LeaseSpillFailedBlocks were
	// in failed spill stores. LeaseRestores counts restores started for
	// reads, LeaseRestoreHitBlocks their blocks found still cached in the
	// pool, LeaseRestoreLoadedBlocks those loaded back from a tier;
	// LeaseRestoreFailures counts restores whose load failed.
	LeaseSpills, LeaseSpilledBlocks                 uint64
	LeasePinnedBlocks, LeaseSpillingBlocks          int
	LeaseSpillRefusedBlocks, LeaseSpillFailedBlocks uint64
	LeaseRestores, LeaseRestoreHitBlocks            uint64
	LeaseRestoreLoadedBlocks                        uint64
	LeaseRestoreFailures                            uint64
	// Requests are the requests with watermarks; SpillCandidates the
	// length of the spillover policy's eviction-order mirror (of a policy
	// with a NumSpillCandidates method).
	Requests, SpillCandidates int
}

type storeJob struct {
	tier    int
	hold    kvblock.HoldID
	hashes  []kvblock.Hash
	attempt int // 1 for a first store, then one more per retry
	origin
	spill *spillJob // a lease spill's store (lease.go), or nil
}

// loadGroup is one request's loads: a load hold over its primary prefix
// (first blocks, shared) and the target blocks, and the works filling them.
type loadGroup struct {
	req     uint64
	hold    kvblock.HoldID
	first   int             // primary hit blocks at the head of hold
	hashes  []kvblock.Hash  // of the targets
	parent  kvblock.Hash    // hash before hashes[0]
	tokens  []int32         // the targets' tokens, when pool events are on
	adapter kvblock.Adapter // the request's LoRA adapter, for the events
	prefix  []kvblock.Hash  // hashes of the primary prefix (first blocks)
	ok      []bool          // per target: loaded
	pending int             // works not yet done
	gone    bool            // the request finished while loading
}

type loadJob struct {
	group  *loadGroup
	tier   int
	index  []int // target positions in group
	hashes []kvblock.Hash
}

// Coordinator connects the engine's block pool to the offload tiers: it
// owns one Manager per tier and a Policy, takes store and load holds in the
// pool, and turns the engine's hooks into copy work for the edge. It does
// no I/O: work goes out through Take, completions come back through
// StoreDone and LoadDone. See the package documentation for the calls the
// engine makes and in which order.
//
// Holds, not flags: a block being stored is under a store hold, so the
// request that computed it may drop its own hold at once (S20); blocks
// being loaded are under a load hold together with the request's primary
// prefix, so neither is evicted before the load ends.
//
// Not safe for concurrent use; it belongs to one engine core.
type Coordinator struct {
	cfg    Config
	pool   *kvblock.Pool
	bs     int
	events bool
	tiers  []*Manager
	policy Policy
	marks  watermarks

	nextID   WorkID
	stores   map[WorkID]*storeJob
	loads    map[WorkID]*loadJob
	groups   map[uint64]*loadGroup // by request
	inStore  int
	inLoad   int
	outStore []StoreWork
	outLoad  []LoadWork
	// preempted are offers deferred from Preempted to the next Take; at
	// most MaxRequests.
	preempted []preemptedOffer

	// Loaded prefixes held until admission (hold.go).
	takes      uint64 // Take calls: the clock of LoadHoldSteps
	held       map[uint64]*heldLoad
	heldOrder  []uint64 // by hold start, oldest first; stale entries skipped
	heldBlocks int
	records    map[uint64]loadedRecord

	// retries are failed stores waiting for their next attempt (retry.go);
	// at most MaxRequests.
	retries []storeRetry

	// leases is the lease spill bookkeeping (lease.go).
	leases leaseState

	stats Stats

	// version counts the changes of the state Check cross-checks against
	// the pool (stores, loads, held loads); Check skips the cross-check
	// when neither it nor the pool's version changed since the last pass.
	version, checkedVersion, checkedPool uint64
	checkedOK                            bool
	scratchHolds                         []kvblock.HoldInfo
	scratchStore, scratchLoad            map[kvblock.HoldID]bool
	scratchPending                       map[*loadGroup]int

	// scratch
	hits      []kvblock.BlockID
	tierOf    []int8
	spillB    []kvblock.BlockID
	spillH    []kvblock.Hash
	offerB    []kvblock.BlockID
	offerH    []kvblock.Hash
	perTier   [][]int
	perTierHs [][]kvblock.Hash
}

// NewCoordinator returns a coordinator over pool. It panics if cfg is
// invalid for the pool: configuration is validated at the edges
// (Config.ValidateFor).
func NewCoordinator(cfg Config, pool *kvblock.Pool) *Coordinator {
	pc := pool.Config()
	if err := cfg.ValidateFor(pc); err != nil {
		panic(err)
	}
	largest := 0
	for _, t := range cfg.Tiers {
		n, _ := t.NumBlocks(pc) // checked by ValidateFor
		largest = max(largest, n)
	}
	cfg = cfg.resolved(pool.Capacity(), largest)
	c := &Coordinator{
		cfg:     cfg,
		pool:    pool,
		bs:      pool.BlockSizeTokens(),
		events:  pc.Events,
		marks:   newWatermarks(len(cfg.Tiers), cfg.MaxRequests),
		stores:  make(map[WorkID]*storeJob),
		loads:   make(map[WorkID]*loadJob),
		groups:  make(map[uint64]*loadGroup),
		held:    make(map[uint64]*heldLoad),
		records: make(map[uint64]loadedRecord),
	}
	for _, t := range cfg.Tiers {
		n, _ := t.NumBlocks(pc) // checked by ValidateFor
		c.tiers = append(c.tiers, NewManager(ManagerConfig{
			Medium: t.Medium, NumBlocks: n, Eviction: cfg.Eviction,
			StoreThreshold: cfg.StoreThreshold, BlockSizeTokens: c.bs,
		}))
		c.stats.Tiers = append(c.stats.Tiers, TierStats{Medium: t.Medium, Capacity: n})
	}
	env := PolicyEnv{NumTiers: len(c.tiers), PoolBlocks: pool.Capacity(), MaxRequests: cfg.MaxRequests}
	for _, m := range c.tiers {
		env.TierBlocks += int(m.numBlocks)
	}
	if cfg.NewPolicy != nil {
		c.policy = cfg.NewPolicy(env)
		if c.policy == nil {
			panic("offload: Config.NewPolicy returned nil")
		}
	} else {
		c.policy = NewPolicy(cfg.Policy, env)
	}
	c.stats.Policy = c.policy.Name()
	c.stats.LeaseSpill = cfg.LeaseSpill.String()
	c.perTier = make([][]int, len(c.tiers))
	c.perTierHs = make([][]kvblock.Hash, len(c.tiers))
	return c
}

// Config returns the configuration with defaults filled in.
func (c *Coordinator) Config() Config { return c.cfg }

// NumTiers is the number of tiers.
func (c *Coordinator) NumTiers() int { return len(c.tiers) }

// Manager returns tier i's manager (read it; do not drive it).
func (c *Coordinator) Manager(i int) *Manager { return c.tiers[i] }

// Policy returns the store policy (read it; do not drive it).
func (c *Coordinator) Policy() Policy { return c.policy }

// Watermark is request req's watermark for tier: its leading full blocks
// [0, Watermark) are in the tier as far as the coordinator knows (0 when
// the request is not tracked).
func (c *Coordinator) Watermark(req uint64, tier int) int { return c.marks.get(req, tier) }

// numFull is how many leading blocks of a request are full and computed.
func (c *Coordinator) numFull(blocks []kvblock.BlockID, hashes []kvblock.Hash, numComputed int) int {
	return max(0, min(numComputed/c.bs, len(hashes), len(blocks)))
}

// Computed is the after-step hook: request req's block table is blocks,
// hashes are the prefix hashes of its full blocks (sched.Request.Hashes),
// and its first numComputed positions have KV. The policy decides what to
// offer (StoreOnCompute: the full computed blocks past the request's
// watermarks). blocks must be held by the caller during the call.
func (c *Coordinator) Computed(req uint64, blocks []kvblock.BlockID, hashes []kvblock.Hash, numComputed int) {
	c.offerRequest(OnCompute, req, blocks, hashes, numComputed)
}

// Preempted is the preemption hook (sched.Scheduler.OnPreempt), called
// before the request's hold is released. The request's watermarks are kept
// (it will run again).
//
// What the policy offers (StoreOnCompute and PreemptionOnly: the full
// computed blocks past the watermarks) is not offered now: the scheduler preempts because it needs blocks
// at once, and store holds taken here would keep the victim's blocks from
// being freed, so it would preempt more and more requests. The offer is
// made at the next Take instead, over the blocks that are still cached
// then (released blocks join the eviction order at its most recent end, so
// they usually are); the watermark stops at the first one that was evicted
// (a Whole offer with a block evicted is dropped). Spillover notes the
// blocks as about to become evictable.
func (c *Coordinator) Preempted(req uint64, blocks []kvblock.BlockID, hashes []kvblock.Hash, numComputed int) {
	n := c.numFull(blocks, hashes, numComputed)
	off := c.ask(OnPreempt, req, blocks[:n], hashes[:n])
	if off.To <= 0 || len(c.preempted) >= c.cfg.MaxRequests {
		return
	}
	c.preempted = append(c.preempted, preemptedOffer{req: req, whole: off.Whole,
		blocks: append([]kvblock.BlockID(nil), blocks[:off.To]...), hashes: append([]kvblock.Hash(nil), hashes[:off.To]...)})
}

// preemptedOffer is a preempted request's blocks, offered at the next Take.
type preemptedOffer struct {
	req    uint64
	whole  bool
	blocks []kvblock.BlockID
	hashes []kvblock.Hash
}

// Finished is the teardown hook, called before the request's hold is
// released (and after the transfer module took any lease hold). Blocks
// whose stores are in flight are already under store holds, and
// StoreOnCompute offers the ones not yet accepted (taking store holds), so
// the caller may drop the request's hold at once: each block stays held
// until its store completes (S20). The policy hears of it (Spillover notes
// the blocks as about to become evictable). The request is forgotten; if it was still loading, its
// loads complete normally but LoadDone will not report it ready. Call it
// for every request the coordinator may know (a request that never held
// blocks passes nil, nil, 0).
func (c *Coordinator) Finished(req uint64, blocks []kvblock.BlockID, hashes []kvblock.Hash, numComputed int) {
	c.offerRequest(OnFinish, req, blocks, hashes, numComputed)
	c.policy.Forget(req)
	c.marks.forget(req)
	c.preempted = slices.DeleteFunc(c.preempted, func(o preemptedOffer) bool { return o.req == req })
	c.release(req, false)
	delete(c.records, req)
	if g, ok := c.groups[req]; ok {
		c.version++
		g.gone = true
		delete(c.groups, req)
	}
}

// Loading reports whether request req has loads in flight.
func (c *Coordinator) Loading(req uint64) bool {
	_, ok := c.groups[req]
	return ok
}

// StoreDone reports the end of store work id: its first copied blocks were
// written, the rest were not (the edge passes tier.Completion.Copied). The
// written blocks become loadable; the store hold is released, so blocks no
// one else holds become evictable (cached) or free. The blocks not written
// are retried after a back-off (see Config.MaxStoreRetries), and once
// given up the request they came from has its watermark lowered, so they
// are offered again at its next trigger. A StoreDone for work
// that is not in flight panics.
//
// For a lease spill's store (SpillLease) it returns the lease and whether
// the spill took: every block was written and is now pinned for the lease
// (before the store hold goes), so the caller may drop the lease's primary
// copies, or unpin them (UnpinLease) if it may not. A failed spill store
// is not retried: the lease is offered again by the next spill decision.
func (c *Coordinator) StoreDone(id WorkID, copied int) (spill SpillStored) {
	j, ok := c.stores[id]
	if !ok {
		panic(fmt.Sprintf("offload: StoreDone(%d) of no store in flight", id))
	}
	if copied < 0 || copied > len(j.hashes) {
		panic(fmt.Sprintf("offload: StoreDone(%d, %d) of a store of %d blocks", id, copied, len(j.hashes)))
	}
	delete(c.stores, id)
	c.version++
	m := c.tiers[j.tier]
	m.CompleteStore(j.hashes[:copied], true)
	if copied < len(j.hashes) {
		m.CompleteStore(j.hashes[copied:], false)
	}
	s := &c.stats.Tiers[j.tier]
	s.StoredBlocks += uint64(copied)
	s.StoreFailedBlocks += uint64(len(j.hashes) - copied)
	if j.spill != nil {
		spill = SpillStored{Lease: j.spill.lease, Spill: true, OK: c.spillStoreDone(j, copied)}
	} else if copied < len(j.hashes) {
		c.storeFailed(j, c.pool.Blocks(j.hold), copied)
	}
	c.inStore -= len(j.hashes)
	c.pool.Release(j.hold)
	return spill
}

// Lookup is the prefix-miss hook, called when request req (tokens, and
// hashes the prefix hashes of its full blocks) is about to be queued. It
// finds the longest prefix cached in the primary pool, then the blocks
// after it that are ready in some tier (preferring tiers in Config order),
// and plans their loads: a load hold over the primary prefix and newly
// allocated target blocks, and one LoadWork per tier, handed out by the
// next Take. It returns whether loads were planned; if so the caller keeps
// the request out of the scheduler until LoadDone reports it ready, at
// which point the loaded blocks are cached in the pool and the scheduler's
// prefix lookup finds them (and counts them as cached tokens).
//
// At most (len(tokens)-1)/blockSize blocks are looked up, so at least one
// token is left to compute. The load is shortened to what
// MaxInflightLoadBlocks and the pool's available blocks allow, except that
// with no load in flight a run the bound would cut to nothing the policy
// loads (a RequestLevel unit longer than the bound) loads whole. A request
// may have one lookup with loads in flight at a time; a second panics.
func (c *Coordinator) Lookup(req uint64, tokens []int32, hashes []kvblock.Hash) bool {
	loading, _ := c.lookup(req, tokens, hashes, kvblock.Adapter{}, false)
	return loading
}

// LookupWait is Lookup for a caller that can leave the request waiting (the
// engine keeps it at the head of its queue): when loads in flight leave too
// little of MaxInflightLoadBlocks to load every block the tiers hold for
// it, it plans nothing, changes nothing and reports wait, so the caller
// asks again after a LoadDone instead of admitting the request to
// recompute what a later lookup would load. It never waits while no load
// is in flight (a prefix longer than the bound then loads its first
// MaxInflightLoadBlocks blocks), so a caller that waits makes progress. A
// lookup that waits is not counted in Stats.Lookups.
func (c *Coordinator) LookupWait(req uint64, tokens []int32, hashes []kvblock.Hash) (loading, wait bool) {
	return c.lookup(req, tokens, hashes, kvblock.Adapter{}, true)
}

// LookupWaitAdapter is LookupWait for a request run with LoRA adapter a,
// which the loaded blocks' BlockStored event names.
func (c *Coordinator) LookupWaitAdapter(req uint64, tokens []int32, hashes []kvblock.Hash, a kvblock.Adapter) (loading, wait bool) {
	return c.lookup(req, tokens, hashes, a, true)
}

func (c *Coordinator) lookup(req uint64, tokens []int32, hashes []kvblock.Hash, a kvblock.Adapter, canWait bool) (loading, wait bool) {
	if _, dup := c.groups[req]; dup {
		panic(fmt.Sprintf("offload: Lookup for request %d which is still loading", req))
	}
	if len(tokens) == 0 {
		c.stats.Lookups++
		return false, false
	}
	hashes = hashes[:min(len(hashes), (len(tokens)-1)/c.bs)]
	c.hits = c.pool.Lookup(c.hits[:0], hashes)
	first := len(c.hits)
	rest := hashes[first:]
	c.tierOf = c.tierOf[:0]
	for _, h := range rest {
		t := -1
		for i, m := range c.tiers {
			if ready, _ := m.Contains(h); ready {
				t = i
				break
			}
		}
		if t < 0 {
			break
		}
		c.tierOf = append(c.tierOf, int8(t))
	}
	k := c.policy.Loadable(hashes, first, len(c.tierOf))
	if k < 0 || k > len(c.tierOf) {
		panic(fmt.Sprintf("offload: policy %s lets %d of %d hits load", c.policy.Name(), k, len(c.tierOf)))
	}
	if canWait && c.inLoad > 0 && k > c.cfg.MaxInflightLoadBlocks-c.inLoad {
		return false, true
	}
	c.stats.Lookups++
	for _, m := range c.tiers {
		m.Lookup(hashes) // counts reuse for the filter
	}
	room := c.cfg.MaxInflightLoadBlocks - c.inLoad
	if c.inLoad == 0 && room < k && c.policy.Loadable(hashes, first, room) == 0 {
		// The bound would cut the run to nothing the policy lets load
		// (RequestLevel loads only runs ending at a unit's end): with no
		// load in flight the run loads whole, the only load until it is
		// done, as a store of a whole unit is.
		room = k
	}
	k = min(k, room)
	// Sharing the primary prefix takes its evictable blocks out of what an
	// allocation can use.
	avail := c.pool.NumAvailable()
	for _, b := range c.hits {
		if c.pool.Refs(b) == 0 {
			avail--
		}
	}
	k = min(k, avail)
	if k < len(c.tierOf) {
		k = c.policy.Loadable(hashes, first, max(k, 0)) // cut to what the policy lets load
	}
	if k <= 0 {
		return false, false
	}
	g := &loadGroup{
		req: req, first: first, adapter: a,
		hashes: append([]kvblock.Hash(nil), rest[:k]...),
		parent: kvblock.RootHash,
		ok:     make([]bool, k),
	}
	if first > 0 {
		g.parent = hashes[first-1]
		g.prefix = append([]kvblock.Hash(nil), hashes[:first]...)
	}
	if c.events {
		g.tokens = append([]int32(nil), tokens[first*c.bs:(first+k)*c.bs]...)
	}
	g.hold = c.pool.NewHold(kvblock.HoldLoad, req)
	c.pool.Share(g.hold, c.hits)
	if !c.pool.Allocate(g.hold, k) {
		panic("offload: allocation failed after the availability check")
	}
	targets := c.pool.Blocks(g.hold)[first:]
	for t := range c.tiers {
		c.perTier[t] = c.perTier[t][:0]
		c.perTierHs[t] = c.perTierHs[t][:0]
	}
	for i, t := range c.tierOf[:k] {
		c.perTier[t] = append(c.perTier[t], i)
		c.perTierHs[t] = append(c.perTierHs[t], g.hashes[i])
	}
	for t, m := range c.tiers {
		idx := c.perTier[t]
		if len(idx) == 0 {
			continue
		}
		hs := append([]kvblock.Hash(nil), c.perTierHs[t]...)
		m.Touch(hs) // a second use: with ARC, T1 → T2
		slots := m.PrepareLoad(hs)
		c.nextID++
		id := c.nextID
		w := LoadWork{ID: id, Tier: t, Medium: m.cfg.Medium, Req: req, Hashes: append([]kvblock.Hash(nil), hs...), Slots: slots,
			Blocks: make([]kvblock.BlockID, len(idx))}
		for i, p := range idx {
			w.Blocks[i] = targets[p]
		}
		c.loads[id] = &loadJob{group: g, tier: t, index: append([]int(nil), idx...), hashes: hs}
		g.pending++
		c.stats.Tiers[t].HitBlocks += uint64(len(idx))
		c.outLoad = append(c.outLoad, w)
	}
	c.groups[req] = g
	c.version++
	c.inLoad += k
	c.stats.LoadingRequests++
	return true, false
}

// LoadDone reports the end of load work id: its first copied blocks were
// read into the pool, the rest were not (tier.Completion.Copied). A block
// whose record turned out missing or corrupt is removed from its tier, so
// it is not offered again. When the request's last load ends, the leading
// run of loaded blocks is cached in the pool (one BlockStored event with
// medium GPU when events are on) and the load hold is released; LoadDone
// then returns the request and ready = true, unless the request finished
// in the meantime. The loaded prefix stays held, under a load hold, until
// Admitted (or Finished, or the hold is dropped: see Config.LoadHoldSteps
// and DropHeld). A LoadDone for work that is not in flight panics.
func (c *Coordinator) LoadDone(id WorkID, copied int) (req uint64, ready bool) {
	j, ok := c.loads[id]
	if !ok {
		panic(fmt.Sprintf("offload: LoadDone(%d) of no load in flight", id))
	}
	if copied < 0 || copied > len(j.hashes) {
		panic(fmt.Sprintf("offload: LoadDone(%d, %d) of a load of %d blocks", id, copied, len(j.hashes)))
	}
	delete(c.loads, id)
	c.version++
	m := c.tiers[j.tier]
	m.CompleteLoad(j.hashes)
	s := &c.stats.Tiers[j.tier]
	s.LoadedBlocks += uint64(copied)
	s.LoadFailedBlocks += uint64(len(j.hashes) - copied)
	if copied < len(j.hashes) && m.Remove(j.hashes[copied]) {
		s.InvalidatedBlocks++
	}
	g := j.group
	for _, p := range j.index[:copied] {
		g.ok[p] = true
	}
	g.pending--
	if g.pending > 0 {
		return g.req, false
	}
	n := 0
	for n < len(g.ok) && g.ok[n] {
		n++
	}
	blocks := c.pool.Blocks(g.hold)
	if n > 0 {
		var toks []int32
		if c.events {
			toks = g.tokens[:n*c.bs]
		}
		c.pool.CacheRunAdapter(blocks[g.first:g.first+n], g.hashes[:n], g.parent, toks, g.adapter)
		c.stats.LoadedTokens += uint64(n * c.bs)
	}
	c.inLoad -= len(g.hashes)
	if g.gone || n == 0 || g.first+n == 0 {
		c.pool.Release(g.hold)
	} else {
		// The loaded prefix (the primary hits and the loaded blocks) stays
		// held until the request's admission shares it: a load is not
		// wasted by an eviction in between. Targets that failed to load are
		// not kept.
		// Only the leading run cached with its hashes is kept: a loaded
		// block whose hash another block took meanwhile (CacheRun keeps
		// the first) is not found by a lookup.
		hashes := append(g.prefix, g.hashes[:n]...)
		k := 0
		for k < len(hashes) {
			if h, ok := c.pool.Cached(blocks[k]); !ok || h != hashes[k] {
				break
			}
			k++
		}
		hold := g.hold
		keep := append([]kvblock.BlockID(nil), blocks[:k]...)
		if k < len(blocks) {
			hold = c.pool.NewHold(kvblock.HoldLoad, g.req)
			c.pool.Share(hold, keep)
			c.pool.Release(g.hold)
		}
		c.holdLoaded(g.req, hold, keep, hashes[:k])
	}
	if !g.gone {
		delete(c.groups, g.req)
	}
	return g.req, !g.gone
}

// Take makes the offers deferred by Preempted, runs the spillover pass
// (under that policy), and returns the work and events produced since the
// previous Take. Call it once per engine step, after scheduling.
func (c *Coordinator) Take() Work {
	c.takes++
	c.expireHeld()
	c.runRetries()
	c.offerPreempted()
	c.spillPass()
	var w Work
	w.Stores, c.outStore = c.outStore, nil
	w.Loads, c.outLoad = c.outLoad, nil
	for _, m := range c.tiers {
		w.Events = append(w.Events, m.TakeEvents()...)
	}
	return w
}

// Stats returns the counters. The Tiers slice is a copy.
func (c *Coordinator) Stats() Stats {
	s := c.stats
	s.Tiers = append([]TierStats(nil), c.stats.Tiers...)
	for i, m := range c.tiers {
		s.Tiers[i].Blocks = m.Len()
	}
	s.InflightStoreBlocks = c.inStore
	s.InflightLoadBlocks = c.inLoad
	s.HeldLoadBlocks = c.heldBlocks
	s.LeasePinnedBlocks, s.LeaseSpillingBlocks = c.leases.pinned, c.leases.storing
	s.Requests = len(c.marks.m)
	if sp, ok := c.policy.(interface{ NumSpillCandidates() int }); ok {
		s.SpillCandidates = sp.NumSpillCandidates()
	}
	return s
}

// Idle reports whether no store or load is in flight (every hold the
// coordinator took is released, but for loaded prefixes held until their
// requests' admission: see NumHeld).
func (c *Coordinator) Idle() bool {
	return len(c.stores) == 0 && len(c.loads) == 0 && len(c.leases.loads) == 0
}
