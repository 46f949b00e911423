package offload

import (
	"fmt"
	"slices"

	"github.com/kvlease/kvlease/kvblock"
)

// Trigger says why a request's blocks are being offered.
type Trigger uint8

const (
	// OnCompute: a step computed more of the request.
	OnCompute Trigger = iota + 1
	// OnPreempt: the request is about to lose its blocks to preemption.
	OnPreempt
	// OnFinish: the request finished; its hold is about to be dropped.
	OnFinish
)

func (t Trigger) String() string {
	switch t {
	case OnCompute:
		return "compute"
	case OnPreempt:
		return "preempt"
	case OnFinish:
		return "finish"
	}
	return fmt.Sprintf("Trigger(%d)", t)
}

// Policy decides which blocks are offered to the offload tiers, and when.
// It is a value the Coordinator is built with (Config.Policy names a
// built-in, Config.NewPolicy builds any other), so a new policy needs no
// change to the Coordinator, the engine or the simulator.
//
// Its inputs are the triggers — a request computed more blocks, is
// preempted, finished (Request), the primary pool is short of free blocks
// (Evicting), a lookup found blocks in the tiers (Loadable) — and the
// tiers' answers: the per-tier watermarks in each RequestEvent and Placed.
// Its outputs are the blocks to offer. The Coordinator does the rest: it
// fits offers to the tiers' room and the in-flight bounds, takes store
// holds, and keeps the watermarks, which advance only over blocks a tier
// accepted, so blocks a tier refused are offered again at the next trigger
// (docs/scenarios.md S21) whatever the policy.
//
// A Policy is called by one Coordinator only, never concurrently. Embed
// PolicyBase to leave out the methods a policy does not need.
type Policy interface {
	// Name names the policy in logs and metrics.
	Name() string
	// Request is called at each trigger of a request and returns the
	// leading blocks of it to offer now (Offer.To of ev.Hashes; the
	// Coordinator offers each tier the blocks from its watermark up to To).
	// ev's slices belong to the caller and are valid during the call only.
	Request(ev RequestEvent) Offer
	// Evicting is called at each Coordinator.Take while the primary pool
	// has fewer free blocks than Config.SpillAheadBlocks: it appends to
	// blocks and hashes up to n cached blocks of pool with no hold to offer
	// now (as pool.Cached reports them), and returns them. A candidate
	// stays the policy's to offer again until Placed names it.
	Evicting(pool *kvblock.Pool, n int, blocks []kvblock.BlockID, hashes []kvblock.Hash) ([]kvblock.BlockID, []kvblock.Hash)
	// Placed tells the policy that block b, offered by Evicting, is now in
	// every tier (stored or being stored).
	Placed(b kvblock.BlockID)
	// Loadable is called by a lookup: hashes[first:first+hits] are ready in
	// the tiers, right after the first blocks cached in the primary pool.
	// It returns how many of those hits may be loaded (≤ hits).
	Loadable(hashes []kvblock.Hash, first, hits int) int
	// Forget tells the policy that request req ended.
	Forget(req uint64)
	// Check verifies the policy's own bookkeeping.
	Check() error
}

// RequestEvent is a trigger of one request.
type RequestEvent struct {
	Trigger Trigger
	Req     uint64
	// Blocks and Hashes are the request's leading full computed blocks
	// and their prefix hashes (equal lengths).
	Blocks []kvblock.BlockID
	Hashes []kvblock.Hash
	// Marks are the request's watermark per tier: its blocks [0, Marks[t])
	// are in tier t (accepted by it, or present before). nil when the
	// Coordinator does not track the request yet (all zero).
	Marks []int
}

// Offer is a policy's answer to a RequestEvent.
type Offer struct {
	// To: offer each tier the request's blocks from its watermark up to
	// To (0: nothing).
	To int
	// Whole makes the offer all or nothing per tier: a tier that cannot
	// take every block of it up to To (room, in-flight bound, reuse
	// filter) takes none, and its watermark stays.
	Whole bool
}

// PolicyEnv is what a policy is built for.
type PolicyEnv struct {
	// NumTiers is the number of tiers; TierBlocks their total capacity.
	NumTiers, TierBlocks int
	// PoolBlocks is the primary pool's capacity (block ids are below it).
	PoolBlocks int
	// MaxRequests bounds the requests a policy needs to track.
	MaxRequests int
}

// PolicyBase is a Policy's defaults, to embed: it offers nothing on
// eviction, lets every hit load, and keeps no state.
type PolicyBase struct{}

// Evicting offers nothing.
func (PolicyBase) Evicting(_ *kvblock.Pool, _ int, b []kvblock.BlockID, h []kvblock.Hash) ([]kvblock.BlockID, []kvblock.Hash) {
	return b, h
}

// Placed does nothing.
func (PolicyBase) Placed(kvblock.BlockID) {}

// Loadable lets every hit load.
func (PolicyBase) Loadable(_ []kvblock.Hash, _, hits int) int { return hits }

// Forget does nothing.
func (PolicyBase) Forget(uint64) {}

// Check has nothing to check.
func (PolicyBase) Check() error { return nil }

// NewPolicy returns the built-in policy kind for env. It panics on bad
// arguments: configuration is validated at the edges.
func NewPolicy(kind PolicyKind, env PolicyEnv) Policy {
	if env.NumTiers < 1 || env.PoolBlocks < 1 || env.MaxRequests < 1 {
		panic(fmt.Sprintf("offload: NewPolicy(%v, %+v)", kind, env))
	}
	switch kind {
	case StoreOnCompute:
		return storeOnCompute{}
	case PreemptionOnly:
		return preemptionOnly{}
	case Spillover:
		return newSpillover(env.PoolBlocks)
	case StoreOnFinish:
		return storeOnFinish{}
	case RequestLevel:
		return newRequestLevel(env)
	}
	panic(fmt.Sprintf("offload: NewPolicy(%v)", kind))
}

// storeOnCompute offers every full block of a request as soon as it is
// computed, and again, if a tier refused it, at every later step, at
// preemption and at teardown. It stores the most, earliest: every block a
// later request may want is in the tiers before anybody evicts it, at the
// cost of copying blocks nobody reads again. It keeps no state.
type storeOnCompute struct{ PolicyBase }

func (storeOnCompute) Name() string { return StoreOnCompute.String() }

func (storeOnCompute) Request(ev RequestEvent) Offer { return Offer{To: len(ev.Hashes)} }

// preemptionOnly offers a request's computed full blocks when it is
// preempted, so that its recomputation can load them back; nothing else
// reaches the tiers. It copies the least, and helps only preempted
// requests. It keeps no state.
type preemptionOnly struct{ PolicyBase }

func (preemptionOnly) Name() string { return PreemptionOnly.String() }

func (preemptionOnly) Request(ev RequestEvent) Offer {
	if ev.Trigger != OnPreempt {
		return Offer{}
	}
	return Offer{To: len(ev.Hashes)}
}

// storeOnFinish offers a request's computed full blocks once, when it
// finishes (vLLM's ON_FINISH store policy, vllm-project/vllm#50087: the
// store frontier does not move while the request runs, then every
// storable block goes at once). Stores never compete with the running
// request for copy bandwidth or hold its blocks while it runs, and a
// request aborted early stores what it computed; a block refused at finish
// is not offered again (the request is gone), and a preempted request's
// blocks are not stored. It keeps no state.
type storeOnFinish struct{ PolicyBase }

func (storeOnFinish) Name() string { return StoreOnFinish.String() }

func (storeOnFinish) Request(ev RequestEvent) Offer {
	if ev.Trigger != OnFinish {
		return Offer{}
	}
	return Offer{To: len(ev.Hashes)}
}

// watermarks are the Coordinator's record of the tiers' answers: for each
// request and tier, the request's leading full blocks [0, watermark) are in
// that tier (accepted by its Manager, or already present). A watermark
// advances only over blocks the Manager accepted: when the Manager refuses
// a block (reuse threshold not met) the watermark stops before it, and
// when it refuses the whole batch (tier full of blocks being stored or
// loaded) the watermark stays, so the refused blocks are offered again at
// the next trigger (S21). Block indexes name prefix positions, and a
// request's full blocks never change, so a watermark survives preemption.
type watermarks struct {
	numTiers    int
	maxRequests int
	m           map[uint64][]int // per request: watermark per tier
}

func newWatermarks(numTiers, maxRequests int) watermarks {
	return watermarks{numTiers: numTiers, maxRequests: maxRequests, m: make(map[uint64][]int)}
}

// track returns req's watermarks, tracking it if needed; nil at the
// MaxRequests bound for an untracked request (it is offered nothing).
func (w *watermarks) track(req uint64) []int {
	m, ok := w.m[req]
	if !ok {
		if len(w.m) >= w.maxRequests {
			return nil
		}
		m = make([]int, w.numTiers)
		w.m[req] = m
	}
	return m
}

// offered records the Manager's answer to an offer of hashes (request
// req's blocks [from, from+len(hashes)) ) to tier: ok and plan are
// PrepareStore's results. The watermark advances to just before the first
// block the tier does not hold after the call — refused, or evicted by the
// call itself to make room — or past all of them; without ok it stays. It
// returns the new watermark. It costs O(len(hashes) × (refused + evicted)),
// and the refused and evicted lists are short unless the tier thrashes.
func (w *watermarks) offered(req uint64, tier, from int, hashes []kvblock.Hash, plan StorePlan, ok bool) int {
	w.checkTier(tier)
	m, tracked := w.m[req]
	if !tracked {
		panic(fmt.Sprintf("offload: offered for untracked request %d", req))
	}
	if m[tier] != from {
		panic(fmt.Sprintf("offload: request %d offered from block %d but its tier %d watermark is %d", req, from, tier, m[tier]))
	}
	if !ok {
		return m[tier]
	}
	// Stop at the first block the tier does not hold now: refused, or
	// present before the call but evicted by it to make room (PrepareStore
	// does not protect present input blocks).
	to := from + len(hashes)
	if len(plan.Refused) > 0 || len(plan.Evicted) > 0 {
		for i, h := range hashes {
			if slices.Contains(plan.Refused, h) || slices.Contains(plan.Evicted, h) {
				to = from + i
				break
			}
		}
	}
	m[tier] = to
	return to
}

// get is request req's watermark for tier (0 when untracked).
func (w *watermarks) get(req uint64, tier int) int {
	w.checkTier(tier)
	if m, ok := w.m[req]; ok {
		return m[tier]
	}
	return 0
}

func (w *watermarks) forget(req uint64) { delete(w.m, req) }

func (w *watermarks) checkTier(tier int) {
	if tier < 0 || tier >= w.numTiers {
		panic(fmt.Sprintf("offload: tier %d of %d", tier, w.numTiers))
	}
}

func (w *watermarks) check() error {
	if len(w.m) > w.maxRequests {
		return fmt.Errorf("offload: %d requests with watermarks, bound %d", len(w.m), w.maxRequests)
	}
	return nil
}
