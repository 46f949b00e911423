package offload

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/kvlease/kvlease/internal/race"
	"github.com/kvlease/kvlease/kvblock"
)

// refModel is a naive LRU offload manager: a slice of entries searched
// linearly, recency as a logical timestamp, eviction by the smallest
// timestamp among evictable entries. It states the Manager's contract
// (package doc) as directly as possible, so the random test can compare
// the real Manager against it.
type refModel struct {
	cfg     ManagerConfig
	entries []refEntry
	free    []Slot // stack, top last: same reuse order as the Manager (part of its contract)
	clock   uint64
	tracker []refCount // least recently seen first
	events  []kvblock.Event
}

type refEntry struct {
	hash  kvblock.Hash
	slot  Slot
	ready bool
	pins  int
	stamp uint64 // when it last became evictable or was touched while evictable
}

type refCount struct {
	hash  kvblock.Hash
	count int
}

func newRefModel(cfg ManagerConfig) *refModel {
	r := &refModel{cfg: cfg}
	for s := cfg.NumBlocks - 1; s >= 0; s-- {
		r.free = append(r.free, Slot(s))
	}
	return r
}

func (r *refModel) find(h kvblock.Hash) int {
	for i := range r.entries {
		if r.entries[i].hash == h {
			return i
		}
	}
	return -1
}

func (r *refModel) filterOn() bool { return r.cfg.StoreThreshold >= 2 }

func (r *refModel) trackerSize() int {
	if r.cfg.MaxTrackerSize == 0 {
		return DefaultMaxTrackerSize
	}
	return r.cfg.MaxTrackerSize
}

func (r *refModel) count(h kvblock.Hash) int {
	for _, c := range r.tracker {
		if c.hash == h {
			return c.count
		}
	}
	return 0
}

func (r *refModel) lookup(hashes []kvblock.Hash) (int, LookupResult) {
	if r.filterOn() {
		for _, h := range hashes {
			c := r.count(h)
			r.tracker = slices.DeleteFunc(r.tracker, func(x refCount) bool { return x.hash == h })
			if c == 0 && len(r.tracker) >= r.trackerSize() {
				r.tracker = r.tracker[1:]
			}
			r.tracker = append(r.tracker, refCount{h, c + 1})
		}
	}
	for i, h := range hashes {
		j := r.find(h)
		if j < 0 {
			if i == 0 {
				return 0, Miss
			}
			return i, Hit
		}
		if !r.entries[j].ready {
			return i, HitPending
		}
	}
	if len(hashes) == 0 {
		return 0, Miss
	}
	return len(hashes), Hit
}

func (r *refModel) evictable(e refEntry) bool { return e.ready && e.pins == 0 }

func (r *refModel) prepareStore(hashes []kvblock.Hash) (StorePlan, bool) {
	var plan StorePlan
	for i, h := range hashes {
		if r.find(h) >= 0 || slices.Contains(hashes[:i], h) {
			continue
		}
		if r.filterOn() && r.count(h) < r.cfg.StoreThreshold {
			plan.Refused = append(plan.Refused, h)
		} else {
			plan.Hashes = append(plan.Hashes, h)
		}
	}
	evictable := 0
	for _, e := range r.entries {
		if r.evictable(e) {
			evictable++
		}
	}
	need := len(plan.Hashes) - len(r.free)
	if need > evictable {
		return StorePlan{}, false
	}
	for range need {
		victim := -1
		for i, e := range r.entries {
			if r.evictable(e) && (victim < 0 || e.stamp < r.entries[victim].stamp) {
				victim = i
			}
		}
		plan.Evicted = append(plan.Evicted, r.entries[victim].hash)
		r.free = append(r.free, r.entries[victim].slot)
		r.entries = slices.Delete(r.entries, victim, victim+1)
	}
	if need > 0 {
		r.events = append(r.events, kvblock.Event{Kind: kvblock.BlockRemoved, Hashes: plan.Evicted, Medium: r.cfg.Medium, BlockSize: r.cfg.BlockSizeTokens})
	}
	for _, h := range plan.Hashes {
		s := r.free[len(r.free)-1]
		r.free = r.free[:len(r.free)-1]
		plan.Slots = append(plan.Slots, s)
		r.entries = append(r.entries, refEntry{hash: h, slot: s})
	}
	return plan, true
}

func (r *refModel) completeStore(hashes []kvblock.Hash, ok bool) {
	if !ok {
		for _, h := range hashes {
			j := r.find(h)
			r.free = append(r.free, r.entries[j].slot)
			r.entries = slices.Delete(r.entries, j, j+1)
		}
		return
	}
	for i := len(hashes) - 1; i >= 0; i-- {
		j := r.find(hashes[i])
		r.clock++
		r.entries[j].ready, r.entries[j].stamp = true, r.clock
	}
	if len(hashes) > 0 {
		r.events = append(r.events, kvblock.Event{Kind: kvblock.BlockStored, Hashes: slices.Clone(hashes), Medium: r.cfg.Medium, BlockSize: r.cfg.BlockSizeTokens})
	}
}

func (r *refModel) prepareLoad(hashes []kvblock.Hash) []Slot {
	var slots []Slot
	for _, h := range hashes {
		j := r.find(h)
		r.entries[j].pins++
		slots = append(slots, r.entries[j].slot)
	}
	return slots
}

func (r *refModel) completeLoad(hashes []kvblock.Hash) {
	for i := len(hashes) - 1; i >= 0; i-- {
		j := r.find(hashes[i])
		r.entries[j].pins--
		if r.entries[j].pins == 0 {
			r.clock++
			r.entries[j].stamp = r.clock
		}
	}
}

func (r *refModel) touch(hashes []kvblock.Hash) {
	for i := len(hashes) - 1; i >= 0; i-- {
		if j := r.find(hashes[i]); j >= 0 && r.evictable(r.entries[j]) {
			r.clock++
			r.entries[j].stamp = r.clock
		}
	}
}

func (r *refModel) remove(h kvblock.Hash) bool {
	j := r.find(h)
	if j < 0 || !r.evictable(r.entries[j]) {
		return false
	}
	r.free = append(r.free, r.entries[j].slot)
	r.entries = slices.Delete(r.entries, j, j+1)
	r.events = append(r.events, kvblock.Event{Kind: kvblock.BlockRemoved, Hashes: []kvblock.Hash{h}, Medium: r.cfg.Medium, BlockSize: r.cfg.BlockSizeTokens})
	return true
}

func (r *refModel) contains(h kvblock.Hash) (bool, bool) {
	j := r.find(h)
	if j < 0 {
		return false, false
	}
	return r.entries[j].ready, true
}

func (r *refModel) takeEvents() []kvblock.Event {
	ev := r.events
	r.events = nil
	return ev
}

// TestManagerMatchesModel drives the LRU Manager and refModel with the same
// random operations and compares every result; Check runs after every
// operation. 12 runs × 10,000 operations over several capacities and
// reuse-filter settings.
func TestManagerMatchesModel(t *testing.T) {
	type run struct {
		numBlocks, threshold, tracker int
	}
	runs := []run{
		{1, 0, 0}, {2, 0, 0}, {8, 0, 0}, {32, 0, 0},
		{8, 2, 0}, {8, 2, 6}, {16, 3, 12}, {32, 2, 40},
		{4, 1, 0}, {16, 0, 0}, {64, 2, 0}, {3, 2, 4},
	}
	opsPerRun := raceScaled(10_000)
	for i, rn := range runs {
		seed := uint64(1000 + i)
		t.Run(fmt.Sprintf("seed=%d/blocks=%d/threshold=%d/tracker=%d", seed, rn.numBlocks, rn.threshold, rn.tracker), func(t *testing.T) {
			cfg := ManagerConfig{Medium: MediumCPU, NumBlocks: rn.numBlocks, Eviction: EvictionLRU,
				StoreThreshold: rn.threshold, MaxTrackerSize: rn.tracker, BlockSizeTokens: 16}
			runModelComparison(t, rand.New(rand.NewPCG(seed, 7)), cfg, opsPerRun)
		})
	}
}

// raceScaled is n, or a quarter of it under the race detector, which slows
// these single-goroutine loops twentyfold and finds nothing in them.
func raceScaled(n int) int {
	if race.Enabled {
		return n / 4
	}
	return n
}

func runModelComparison(t *testing.T, rng *rand.Rand, cfg ManagerConfig, ops int) {
	t.Helper()
	m := NewManager(cfg)
	ref := newRefModel(cfg)
	universe := 3*cfg.NumBlocks + 5
	hashOf := func(i int) kvblock.Hash { return th(uint64(uint64(i+1) * 0x9e3779b97f4a7c15)) }
	// Prompts share prefixes: chains of hashes drawn from a small universe.
	chains := make([][]kvblock.Hash, 6)
	for c := range chains {
		for range 1 + rng.IntN(2*cfg.NumBlocks+2) {
			chains[c] = append(chains[c], hashOf(rng.IntN(universe)))
		}
	}
	randomHashes := func() []kvblock.Hash {
		if rng.IntN(3) > 0 {
			ch := chains[rng.IntN(len(chains))]
			from := rng.IntN(len(ch))
			if rng.IntN(2) == 0 {
				from = 0
			}
			return slices.Clone(ch[from : from+rng.IntN(len(ch)-from+1)])
		}
		var hs []kvblock.Hash
		for range rng.IntN(cfg.NumBlocks + 3) {
			hs = append(hs, hashOf(rng.IntN(universe)))
		}
		return hs
	}
	var stores, loads [][]kvblock.Hash
	takeRandom := func(list *[][]kvblock.Hash) []kvblock.Hash {
		i := rng.IntN(len(*list))
		hs := (*list)[i]
		// Sometimes complete only a part of the batch; the rest stays pending.
		if len(hs) > 1 && rng.IntN(3) == 0 {
			k := 1 + rng.IntN(len(hs)-1)
			(*list)[i] = hs[k:]
			return hs[:k]
		}
		*list = slices.Delete(*list, i, i+1)
		return hs
	}
	for op := range ops {
		var what string
		switch k := rng.IntN(100); {
		case k < 25:
			hs := randomHashes()
			what = fmt.Sprintf("Lookup(%d)", len(hs))
			gotHits, gotRes := m.Lookup(hs)
			wantHits, wantRes := ref.lookup(hs)
			if gotHits != wantHits || gotRes != wantRes {
				t.Fatalf("op %d %s = %d, %v; model %d, %v", op, what, gotHits, gotRes, wantHits, wantRes)
			}
		case k < 45:
			hs := randomHashes()
			what = fmt.Sprintf("PrepareStore(%d)", len(hs))
			got, gotOK := m.PrepareStore(hs)
			want, wantOK := ref.prepareStore(hs)
			if gotOK != wantOK || !samePlan(got, want) {
				t.Fatalf("op %d %s = %+v, %v; model %+v, %v", op, what, got, gotOK, want, wantOK)
			}
			if gotOK && len(got.Hashes) > 0 {
				stores = append(stores, got.Hashes)
			}
		case k < 60 && len(stores) > 0:
			hs := takeRandom(&stores)
			ok := rng.IntN(5) > 0
			what = fmt.Sprintf("CompleteStore(%d, %v)", len(hs), ok)
			m.CompleteStore(hs, ok)
			ref.completeStore(hs, ok)
		case k < 72:
			// Load a ready prefix of a chain, as the connector does after
			// Lookup; sometimes the same blocks twice (two requests).
			hs := randomHashes()
			n := 0
			for n < len(hs) {
				if ready, _ := ref.contains(hs[n]); !ready {
					break
				}
				n++
			}
			hs = hs[:n]
			what = fmt.Sprintf("PrepareLoad(%d)", len(hs))
			got := m.PrepareLoad(hs)
			want := ref.prepareLoad(hs)
			if !slices.Equal(got, want) {
				t.Fatalf("op %d %s = %v; model %v", op, what, got, want)
			}
			if len(hs) > 0 {
				loads = append(loads, hs)
			}
		case k < 85 && len(loads) > 0:
			hs := takeRandom(&loads)
			what = fmt.Sprintf("CompleteLoad(%d)", len(hs))
			m.CompleteLoad(hs)
			ref.completeLoad(hs)
		case k < 90:
			h := hashOf(rng.IntN(universe))
			what = fmt.Sprintf("Remove(%x)", h)
			if got, want := m.Remove(h), ref.remove(h); got != want {
				t.Fatalf("op %d %s = %v; model %v", op, what, got, want)
			}
		default:
			hs := randomHashes()
			what = fmt.Sprintf("Touch(%d)", len(hs))
			m.Touch(hs)
			ref.touch(hs)
		}
		if err := m.Check(); err != nil {
			t.Fatalf("op %d %s: %v", op, what, err)
		}
		if m.Len() != len(ref.entries) || m.NumFree() != len(ref.free) {
			t.Fatalf("op %d %s: Len %d NumFree %d; model %d %d", op, what, m.Len(), m.NumFree(), len(ref.entries), len(ref.free))
		}
		h := hashOf(rng.IntN(universe))
		gr, gp := m.Contains(h)
		wr, wp := ref.contains(h)
		if gr != wr || gp != wp {
			t.Fatalf("op %d %s: Contains(%x) = %v, %v; model %v, %v", op, what, h, gr, gp, wr, wp)
		}
		if got, want := m.TakeEvents(), ref.takeEvents(); !sameEvents(got, want) {
			t.Fatalf("op %d %s: events %+v; model %+v", op, what, got, want)
		}
	}
	// Drain everything in flight: the tier must end with every block ready
	// and evictable.
	for len(loads) > 0 {
		hs := takeRandom(&loads)
		m.CompleteLoad(hs)
		ref.completeLoad(hs)
	}
	for len(stores) > 0 {
		hs := takeRandom(&stores)
		m.CompleteStore(hs, true)
		ref.completeStore(hs, true)
	}
	if err := m.Check(); err != nil {
		t.Fatal(err)
	}
	if m.NumEvictable() != m.Len() {
		t.Fatalf("after draining, %d of %d blocks are evictable", m.NumEvictable(), m.Len())
	}
}

func samePlan(a, b StorePlan) bool {
	return slices.Equal(a.Hashes, b.Hashes) && slices.Equal(a.Slots, b.Slots) &&
		slices.Equal(a.Evicted, b.Evicted) && slices.Equal(a.Refused, b.Refused)
}

func sameEvents(a, b []kvblock.Event) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		x, y := a[i], b[i]
		if x.Kind != y.Kind || x.Medium != y.Medium || x.BlockSize != y.BlockSize || x.Parent != y.Parent ||
			!slices.Equal(x.Hashes, y.Hashes) || len(x.Tokens) != 0 || len(y.Tokens) != 0 {
			return false
		}
	}
	return true
}
