package offload

import (
	"encoding/binary"
	"fmt"
	"maps"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/kvlease/kvlease/kvblock"
)

// Short names for hashes in scripted tests.
var (
	hA, hB, hC, hD = th(0xa0), th(0xa1), th(0xa2), th(0xa3)
	hE, hF         = th(0xa4), th(0xa5)
)

// th is a test hash made from a number: distinct numbers, distinct hashes,
// none of them kvblock.RootHash.
func th(n uint64) kvblock.Hash {
	var h kvblock.Hash
	binary.LittleEndian.PutUint64(h[:], n)
	h[15] = 0x7e
	return h
}

func hs(h ...kvblock.Hash) []kvblock.Hash { return h }

func newTest(t *testing.T, cfg ManagerConfig) *Manager {
	t.Helper()
	if cfg.Medium == "" {
		cfg.Medium = MediumCPU
	}
	return NewManager(cfg)
}

func mustCheck(t *testing.T, m *Manager) {
	t.Helper()
	if err := m.Check(); err != nil {
		t.Fatal(err)
	}
}

// store stores and completes hashes, failing the test if they are not all
// accepted.
func store(t *testing.T, m *Manager, h ...kvblock.Hash) StorePlan {
	t.Helper()
	plan, ok := m.PrepareStore(h)
	if !ok || !slices.Equal(plan.Hashes, h) {
		t.Fatalf("PrepareStore(%x) = %+v, %v; want all accepted", h, plan, ok)
	}
	m.CompleteStore(plan.Hashes, true)
	mustCheck(t, m)
	return plan
}

func mustPanic(t *testing.T, want string, f func()) {
	t.Helper()
	defer func() {
		t.Helper()
		r := recover()
		if r == nil {
			t.Fatalf("no panic, want one containing %q", want)
		}
		if !strings.Contains(fmt.Sprint(r), want) {
			t.Fatalf("panic %q, want one containing %q", r, want)
		}
	}()
	f()
}

func TestConfigValidate(t *testing.T) {
	good := DefaultManagerConfig()
	good.NumBlocks = 8
	if err := good.Validate(); err != nil {
		t.Fatalf("default config: %v", err)
	}
	bad := map[string]func(*ManagerConfig){
		"Medium":          func(c *ManagerConfig) { c.Medium = "GPU" },
		"NumBlocks":       func(c *ManagerConfig) { c.NumBlocks = 0 },
		"NumBlocks large": func(c *ManagerConfig) { c.NumBlocks = maxNumBlocks + 1 },
		"Eviction":        func(c *ManagerConfig) { c.Eviction = "fifo" },
		"StoreThreshold":  func(c *ManagerConfig) { c.StoreThreshold = -1 },
		"MaxTrackerSize":  func(c *ManagerConfig) { c.MaxTrackerSize = -1 },
		"BlockSizeTokens": func(c *ManagerConfig) { c.BlockSizeTokens = -1 },
	}
	for name, f := range bad {
		c := good
		f(&c)
		err := c.Validate()
		if err == nil || !strings.Contains(err.Error(), strings.Fields(name)[0]) {
			t.Errorf("%s: Validate() = %v, want an error naming the field", name, err)
		}
	}
	mustPanic(t, "NumBlocks", func() { NewManager(ManagerConfig{Medium: MediumDisk}) })
	m := NewManager(ManagerConfig{Medium: MediumDisk, NumBlocks: 1})
	if c := m.Config(); c.Eviction != EvictionLRU || c.MaxTrackerSize != DefaultMaxTrackerSize {
		t.Fatalf("defaults not filled in: %+v", c)
	}
}

func TestLookupResults(t *testing.T) {
	m := newTest(t, ManagerConfig{NumBlocks: 8})
	check := func(in []kvblock.Hash, wantHits int, wantRes LookupResult) {
		t.Helper()
		if hits, res := m.Lookup(in); hits != wantHits || res != wantRes {
			t.Fatalf("Lookup(%x) = %d, %v; want %d, %v", in, hits, res, wantHits, wantRes)
		}
	}
	check(nil, 0, Miss)
	check(hs(hA, hB), 0, Miss)
	plan, _ := m.PrepareStore(hs(hA, hB))
	check(hs(hA, hB), 0, HitPending) // the first block is on its way
	m.CompleteStore(plan.Hashes[:1], true)
	check(hs(hA, hB, hC), 1, HitPending)
	m.CompleteStore(plan.Hashes[1:], true)
	check(hs(hA, hB, hC), 2, Hit)
	check(hs(hA, hB), 2, Hit)
	check(hs(hC, hA), 0, Miss)
	if HitPending.String() != "hit-pending" || LookupResult(9).String() != "LookupResult(9)" {
		t.Fatal("LookupResult.String")
	}
	if r, p := m.Contains(hA); !r || !p {
		t.Fatalf("Contains(A) = %v, %v", r, p)
	}
	mustCheck(t, m)
}

func TestStoreFailureFreesSlots(t *testing.T) {
	m := newTest(t, ManagerConfig{NumBlocks: 2})
	plan, ok := m.PrepareStore(hs(hA, hB))
	if !ok || !slices.Equal(plan.Slots, []Slot{0, 1}) {
		t.Fatalf("PrepareStore = %+v, %v", plan, ok)
	}
	if r, p := m.Contains(hA); r || !p {
		t.Fatalf("being stored: Contains = %v, %v; want not ready, present", r, p)
	}
	m.CompleteStore(hs(hB), false)
	m.CompleteStore(hs(hA), true)
	mustCheck(t, m)
	if m.Len() != 1 || m.NumFree() != 1 {
		t.Fatalf("Len %d NumFree %d, want 1 and 1", m.Len(), m.NumFree())
	}
	if _, p := m.Contains(hB); p {
		t.Fatal("failed store left B present")
	}
	ev := m.TakeEvents()
	if len(ev) != 1 || ev[0].Kind != kvblock.BlockStored || !slices.Equal(ev[0].Hashes, hs(hA)) || ev[0].Medium != MediumCPU {
		t.Fatalf("events %+v, want one BlockStored(A) on CPU", ev)
	}
	if m.TakeEvents() != nil {
		t.Fatal("TakeEvents did not empty the outbox")
	}
}

func TestCallerBugsPanic(t *testing.T) {
	m := newTest(t, ManagerConfig{NumBlocks: 4})
	m.PrepareStore(hs(hA))
	store(t, m, hB)
	mustPanic(t, "absent", func() { m.PrepareLoad(hs(hC)) })
	mustPanic(t, "being stored", func() { m.PrepareLoad(hs(hB, hA)) })
	mustPanic(t, "no load in flight", func() { m.CompleteLoad(hs(hB)) })
	mustPanic(t, "not being stored", func() { m.CompleteStore(hs(hB), true) })
	mustPanic(t, "not being stored", func() { m.CompleteStore(hs(hC), false) })
	mustCheck(t, m) // the panics were raised before any change
	m.PrepareLoad(hs(hB))
	mustPanic(t, "more times", func() { m.CompleteLoad(hs(hB, hB)) })
}

// snapshot copies the whole state of a manager, to show an operation
// changed nothing.
func snapshot(m *Manager) Manager {
	c := *m
	c.index = maps.Clone(m.index)
	c.hash = slices.Clone(m.hash)
	c.member = slices.Clone(m.member)
	c.links = links{prev: slices.Clone(m.links.prev), next: slices.Clone(m.links.next)}
	c.pins = slices.Clone(m.pins)
	c.free = slices.Clone(m.free)
	c.freeGhost = slices.Clone(m.freeGhost)
	c.events = slices.Clone(m.events)
	t := m.tracker
	t.index = maps.Clone(t.index)
	t.hash = slices.Clone(t.hash)
	t.counts = slices.Clone(t.counts)
	t.links = links{prev: slices.Clone(t.links.prev), next: slices.Clone(t.links.next)}
	c.tracker = t
	return c
}

func assertUnchanged(t *testing.T, before Manager, m *Manager) {
	t.Helper()
	if after := snapshot(m); !reflect.DeepEqual(before, after) {
		t.Fatalf("state changed:\nbefore %+v\nafter  %+v", before, after)
	}
}

// TestPrepareStoreAtCapacity: at the bound PrepareStore is all or nothing.
// It refuses (and changes nothing) when the blocks that could be evicted
// are being stored or loaded, and succeeds once one is evictable again.
func TestPrepareStoreAtCapacity(t *testing.T) {
	for _, ev := range []string{EvictionLRU, EvictionARC} {
		t.Run(ev, func(t *testing.T) {
			m := newTest(t, ManagerConfig{NumBlocks: 3, Eviction: ev})
			store(t, m, hA)
			m.PrepareLoad(hs(hA))                 // pinned
			inflight, _ := m.PrepareStore(hs(hB)) // not ready
			if m.NumFree() != 1 || m.NumEvictable() != 0 {
				t.Fatalf("NumFree %d NumEvictable %d, want 1 and 0", m.NumFree(), m.NumEvictable())
			}
			m.TakeEvents()
			// Two new blocks, one free slot, nothing evictable: refused, and
			// not half-done (C does not take the free slot).
			before := snapshot(m)
			if plan, ok := m.PrepareStore(hs(hC, hD)); ok || !reflect.DeepEqual(plan, StorePlan{}) {
				t.Fatalf("PrepareStore(C, D) = %+v, %v; want refused", plan, ok)
			}
			assertUnchanged(t, before, m)
			// One new block fits in the free slot.
			if plan, ok := m.PrepareStore(hs(hA, hB, hC)); !ok || !slices.Equal(plan.Hashes, hs(hC)) || plan.Evicted != nil {
				t.Fatalf("PrepareStore(A, B, C) = %+v, %v; want C accepted, nothing evicted", plan, ok)
			}
			// Full now; D needs an eviction and nothing is evictable.
			before = snapshot(m)
			if _, ok := m.PrepareStore(hs(hD)); ok {
				t.Fatal("PrepareStore(D) accepted with a full tier of pinned and unready blocks")
			}
			assertUnchanged(t, before, m)
			// The load of A ends: A is the one block that can go.
			m.CompleteLoad(hs(hA))
			plan, ok := m.PrepareStore(hs(hD))
			if !ok || !slices.Equal(plan.Evicted, hs(hA)) || !slices.Equal(plan.Slots, []Slot{0}) {
				t.Fatalf("PrepareStore(D) = %+v, %v; want A evicted, D in slot 0", plan, ok)
			}
			if ev := m.TakeEvents(); len(ev) != 1 || ev[0].Kind != kvblock.BlockRemoved || !slices.Equal(ev[0].Hashes, hs(hA)) {
				t.Fatalf("events %+v, want BlockRemoved(A)", ev)
			}
			m.CompleteStore(inflight.Hashes, true)
			mustCheck(t, m)
		})
	}
}

// TestScenarioS21ManagerRefusesBlocks (docs/scenarios.md S21): the manager
// refuses some blocks — the tier is full of pinned blocks, or the reuse
// threshold is not met — and reports exactly which, so the policy layer
// can keep its watermark before the first refused block and offer it again.
func TestScenarioS21ManagerRefusesBlocks(t *testing.T) {
	t.Run("tier full of pinned blocks", func(t *testing.T) {
		m := newTest(t, ManagerConfig{NumBlocks: 2})
		store(t, m, hA, hB)
		m.PrepareLoad(hs(hA, hB))
		before := snapshot(m)
		// A and B are present (accounted for); C and D cannot be placed.
		plan, ok := m.PrepareStore(hs(hA, hB, hC, hD))
		if ok || plan.Hashes != nil || plan.Slots != nil || plan.Evicted != nil {
			t.Fatalf("PrepareStore = %+v, %v; want refused with nothing accepted", plan, ok)
		}
		assertUnchanged(t, before, m)
		for _, h := range hs(hC, hD) {
			if _, present := m.Contains(h); present {
				t.Fatalf("refused block %x is present", h)
			}
		}
		// Offered again after the loads end, the same batch is accepted.
		m.CompleteLoad(hs(hA, hB))
		plan, ok = m.PrepareStore(hs(hA, hB, hC, hD))
		if !ok || !slices.Equal(plan.Hashes, hs(hC, hD)) || !slices.Equal(plan.Evicted, hs(hB, hA)) {
			t.Fatalf("retry: %+v, %v; want C, D accepted, B then A evicted", plan, ok)
		}
		mustCheck(t, m)
	})
	t.Run("reuse threshold", func(t *testing.T) {
		m := newTest(t, ManagerConfig{NumBlocks: 8, StoreThreshold: 2})
		m.Lookup(hs(hA, hB, hC))
		m.Lookup(hs(hA, hB))
		m.Lookup(hs(hA, hD))
		// Seen: A 3, B 2, C 1, D 1, E 0.
		plan, ok := m.PrepareStore(hs(hA, hB, hC, hD, hE, hC))
		if !ok || !slices.Equal(plan.Hashes, hs(hA, hB)) || !slices.Equal(plan.Refused, hs(hC, hD, hE)) {
			t.Fatalf("PrepareStore = %+v, %v; want A, B accepted and C, D, E refused", plan, ok)
		}
		for _, h := range plan.Refused {
			if _, present := m.Contains(h); present {
				t.Fatalf("refused block %x is present", h)
			}
		}
		m.CompleteStore(plan.Hashes, true)
		// B is present now, C reached the threshold, D has not.
		m.Lookup(hs(hC))
		plan, ok = m.PrepareStore(hs(hB, hC, hD))
		if !ok || !slices.Equal(plan.Hashes, hs(hC)) || !slices.Equal(plan.Refused, hs(hD)) {
			t.Fatalf("second PrepareStore = %+v, %v; want C accepted and D refused", plan, ok)
		}
		mustCheck(t, m)
	})
	t.Run("mixed", func(t *testing.T) {
		// Present, refused and accepted in one batch: every input hash is
		// in exactly one of the three.
		m := newTest(t, ManagerConfig{NumBlocks: 3, StoreThreshold: 2})
		m.Lookup(hs(hA, hB, hC))
		m.Lookup(hs(hA, hB, hC))
		store(t, m, hA)
		m.PrepareLoad(hs(hA))
		in := hs(hA, hB, hD, hC)
		plan, ok := m.PrepareStore(in)
		if !ok || !slices.Equal(plan.Hashes, hs(hB, hC)) || !slices.Equal(plan.Refused, hs(hD)) {
			t.Fatalf("PrepareStore = %+v, %v; want B, C accepted, D refused", plan, ok)
		}
		for _, h := range in {
			_, present := m.Contains(h)
			accepted := slices.Contains(plan.Hashes, h)
			refused := slices.Contains(plan.Refused, h)
			if present == refused || (accepted && refused) {
				t.Fatalf("%x: present %v, accepted %v, refused %v", h, present, accepted, refused)
			}
		}
		mustCheck(t, m)
	})
}

func TestReuseFilter(t *testing.T) {
	t.Run("off at 0 and 1", func(t *testing.T) {
		for _, th := range []int{0, 1} {
			m := newTest(t, ManagerConfig{NumBlocks: 4, StoreThreshold: th})
			if plan, ok := m.PrepareStore(hs(hA, hB)); !ok || len(plan.Hashes) != 2 || plan.Refused != nil {
				t.Fatalf("threshold %d: %+v, %v; want both accepted", th, plan, ok)
			}
		}
	})
	t.Run("counts every looked-up hash", func(t *testing.T) {
		m := newTest(t, ManagerConfig{NumBlocks: 4, StoreThreshold: 3})
		// A miss at the first block still counts the later ones: vLLM
		// counts the whole lookup. A duplicate counts twice.
		m.Lookup(hs(hA, hB, hB))
		m.Contains(hA) // does not count
		m.Lookup(hs(hA))
		plan, _ := m.PrepareStore(hs(hA, hB))
		if plan.Hashes != nil || !slices.Equal(plan.Refused, hs(hA, hB)) {
			t.Fatalf("after 2 lookups: %+v; want A, B refused", plan)
		}
		m.Lookup(hs(hA, hB))
		plan, _ = m.PrepareStore(hs(hA, hB))
		if !slices.Equal(plan.Hashes, hs(hA, hB)) {
			t.Fatalf("after 3 lookups: %+v; want A, B accepted", plan)
		}
	})
	t.Run("tracker is a bounded LRU", func(t *testing.T) {
		m := newTest(t, ManagerConfig{NumBlocks: 4, StoreThreshold: 2, MaxTrackerSize: 2})
		m.Lookup(hs(hA, hA, hB)) // A 2, B 1
		m.Lookup(hs(hA))         // A 3, most recent
		m.Lookup(hs(hC))         // full: B (least recent) is forgotten
		if got := []int{m.tracker.count(hA), m.tracker.count(hB), m.tracker.count(hC)}; !slices.Equal(got, []int{3, 0, 1}) {
			t.Fatalf("counts A, B, C = %v, want [3 0 1]", got)
		}
		m.Lookup(hs(hB, hD)) // forgets A, then C
		if n := len(m.tracker.index); n != 2 {
			t.Fatalf("tracker holds %d hashes, bound 2", n)
		}
		plan, _ := m.PrepareStore(hs(hA, hB))
		if plan.Hashes != nil || !slices.Equal(plan.Refused, hs(hA, hB)) {
			t.Fatalf("%+v: want A (forgotten) and B (count 1) refused", plan)
		}
		mustCheck(t, m)
	})
}

// arcList names the list holding h ("none" if absent).
func arcList(m *Manager, h kvblock.Hash) string {
	id, ok := m.index[h]
	if !ok {
		return "none"
	}
	return listNames[m.member[id]]
}

func TestARCPromotionGhostsAndTarget(t *testing.T) {
	m := newTest(t, ManagerConfig{NumBlocks: 2, Eviction: EvictionARC})
	expect := func(step string, target int, lists map[kvblock.Hash]string) {
		t.Helper()
		mustCheck(t, m)
		if m.target != target {
			t.Fatalf("%s: target %d, want %d", step, m.target, target)
		}
		for h, want := range lists {
			if got := arcList(m, h); got != want {
				t.Fatalf("%s: %x in %s, want %s", step, h, got, want)
			}
		}
	}
	storeEvict := func(h kvblock.Hash, wantEvicted kvblock.Hash) {
		t.Helper()
		plan, ok := m.PrepareStore(hs(h))
		if !ok || !slices.Equal(plan.Evicted, hs(wantEvicted)) {
			t.Fatalf("PrepareStore(%x) = %+v, %v; want %x evicted", h, plan, ok, wantEvicted)
		}
		m.Touch(hs(h)) // being stored: not a second use, stays in T1
		if arcList(m, h) != "T1" {
			t.Fatalf("touching %x while it is stored moved it to %s", h, arcList(m, h))
		}
		m.CompleteStore(plan.Hashes, true)
	}

	store(t, m, hA, hB)
	m.Touch(hs(hB))
	expect("touch promotes a ready T1 block", 0, map[kvblock.Hash]string{hA: "T1", hB: "T2"})

	storeEvict(hC, hA) // |T1| = 1 ≥ target 0: evict T1's LRU into B1
	expect("T1 eviction", 0, map[kvblock.Hash]string{hA: "B1", hB: "T2", hC: "T1"})

	m.Touch(hs(hA)) // B1 hit: target += max(1, |B2| 0 / |B1| 1) = 1
	expect("B1 hit", 1, map[kvblock.Hash]string{hA: "B1"})

	storeEvict(hD, hC) // |T1| = 1 ≥ 1
	m.Touch(hs(hA))    // target 2
	expect("second B1 hit", 2, map[kvblock.Hash]string{hA: "B1", hC: "B1", hD: "T1"})

	storeEvict(hE, hB) // |T1| = 1 < 2: evict T2's LRU into B2
	expect("T2 eviction", 2, map[kvblock.Hash]string{hB: "B2", hD: "T1", hE: "T1"})

	m.Touch(hs(hB)) // B2 hit: target -= max(1, |B1| 2 / |B2| 1) = 2
	expect("B2 hit", 0, nil)
	m.Touch(hs(hB)) // floor at 0
	expect("B2 hit at 0", 0, nil)
	m.Touch(hs(hC)) // B1 hit: += max(1, 1/2) = 1
	expect("B1 hit with a larger B1", 1, nil)
	for range 5 {
		m.Touch(hs(hC))
	}
	expect("target capped at capacity", 2, nil)

	// |T1| < target and T2's only block is pinned: evict from T1 rather
	// than fail (vLLM would return None here although D is evictable).
	m.Touch(hs(hE))
	m.PrepareLoad(hs(hE))
	expect("pinned T2", 2, map[kvblock.Hash]string{hD: "T1", hE: "T2"})
	storeEvict(hF, hD)
	expect("fallback to T1", 2, map[kvblock.Hash]string{hD: "B1", hE: "T2", hF: "T1"})

	// Ghost lists are bounded by the capacity: B1 had A, C, then D; A,
	// the oldest, is forgotten, and touching it adapts nothing.
	if m.lists[listB1].n != 2 || arcList(m, hA) != "none" {
		t.Fatalf("B1 holds %d ghosts, A in %s; want 2 and none", m.lists[listB1].n, arcList(m, hA))
	}
	m.target = 1
	m.Touch(hs(hA))
	expect("forgotten ghost", 1, nil)

	// Storing a ghost's hash again makes it a T1 block and no ghost.
	m.CompleteLoad(hs(hE))
	storeEvict(hC, hF) // |T1| = 1 ≥ 1
	expect("ghost stored again", 1, map[kvblock.Hash]string{hC: "T1", hF: "B1", hE: "T2"})
	if m.lists[listB1].n != 2 || m.count[listB1] != 2 {
		t.Fatalf("B1 %d, want D and F", m.lists[listB1].n)
	}

	// A pinned ready T1 block touched moves to T2 and is linked there when
	// its load ends.
	m.PrepareLoad(hs(hC))
	m.Touch(hs(hC))
	expect("pinned promotion", 1, map[kvblock.Hash]string{hC: "T2"})
	m.CompleteLoad(hs(hC))
	if m.lists[listT2].tail != m.index[hC] {
		t.Fatal("C is not the most recent block of T2 after its load")
	}
	mustCheck(t, m)
}

// TestARCRandom drives ARC managers with random operations, checks
// invariants after every operation and, independently of the manager's
// own bookkeeping, that no pinned or unready block is ever evicted and that
// PrepareStore refuses exactly when too few blocks are evictable.
func TestARCRandom(t *testing.T) {
	for i, numBlocks := range []int{1, 3, 8, 32} {
		seed := uint64(2000 + i)
		t.Run(fmt.Sprintf("seed=%d/blocks=%d", seed, numBlocks), func(t *testing.T) {
			runARCRandom(t, rand.New(rand.NewPCG(seed, 11)), numBlocks, raceScaled(10_000))
		})
	}
}

func runARCRandom(t *testing.T, rng *rand.Rand, numBlocks, ops int) {
	m := newTest(t, ManagerConfig{NumBlocks: numBlocks, Eviction: EvictionARC, StoreThreshold: rng.IntN(3)})
	type state struct {
		ready bool
		pins  int
	}
	present := map[kvblock.Hash]*state{}
	universe := 4*numBlocks + 4
	randomHashes := func() []kvblock.Hash {
		var out []kvblock.Hash
		for range rng.IntN(numBlocks + 2) {
			out = append(out, th(uint64(1+rng.IntN(universe))))
		}
		return out
	}
	var stores, loads [][]kvblock.Hash
	evictions, refusals, targetMoves := 0, 0, 0
	for op := range ops {
		target := m.target
		switch k := rng.IntN(100); {
		case k < 20:
			m.Lookup(randomHashes())
		case k < 45:
			in := randomHashes()
			evictable, fresh := 0, map[kvblock.Hash]bool{}
			for _, s := range present {
				if s.ready && s.pins == 0 {
					evictable++
				}
			}
			for _, h := range in {
				if present[h] == nil && (m.threshold == 0 || m.tracker.count(h) >= m.threshold) {
					fresh[h] = true
				}
			}
			before := snapshot(m)
			plan, ok := m.PrepareStore(in)
			if !ok {
				refusals++
				if len(fresh)-(numBlocks-len(present)) <= evictable {
					t.Fatalf("op %d: refused %d new blocks with %d free and %d evictable", op, len(fresh), numBlocks-len(present), evictable)
				}
				assertUnchanged(t, before, m)
				continue
			}
			if len(plan.Hashes) != len(fresh) {
				t.Fatalf("op %d: accepted %d of %d eligible new blocks", op, len(plan.Hashes), len(fresh))
			}
			if len(fresh)-(numBlocks-len(present)) > evictable {
				t.Fatalf("op %d: accepted %d blocks with %d free and %d evictable", op, len(fresh), numBlocks-len(present), evictable)
			}
			for _, h := range plan.Evicted {
				s := present[h]
				if s == nil || !s.ready || s.pins != 0 {
					t.Fatalf("op %d: evicted %x in state %+v", op, h, s)
				}
				delete(present, h)
				evictions++
			}
			for _, h := range plan.Hashes {
				if present[h] != nil {
					t.Fatalf("op %d: accepted %x which is present", op, h)
				}
				present[h] = &state{}
			}
			if len(plan.Hashes) > 0 {
				stores = append(stores, plan.Hashes)
			}
		case k < 60 && len(stores) > 0:
			i := rng.IntN(len(stores))
			batch := stores[i]
			stores = slices.Delete(stores, i, i+1)
			ok := rng.IntN(4) > 0
			m.CompleteStore(batch, ok)
			for _, h := range batch {
				if ok {
					present[h].ready = true
				} else {
					delete(present, h)
				}
			}
		case k < 72:
			var batch []kvblock.Hash
			for _, h := range randomHashes() {
				if s := present[h]; s != nil && s.ready {
					batch = append(batch, h)
					s.pins++
				}
			}
			m.PrepareLoad(batch)
			if len(batch) > 0 {
				loads = append(loads, batch)
			}
		case k < 84 && len(loads) > 0:
			i := rng.IntN(len(loads))
			m.CompleteLoad(loads[i])
			for _, h := range loads[i] {
				present[h].pins--
			}
			loads = slices.Delete(loads, i, i+1)
		case k < 88:
			h := th(uint64(1 + rng.IntN(universe)))
			s := present[h]
			want := s != nil && s.ready && s.pins == 0
			if got := m.Remove(h); got != want {
				t.Fatalf("op %d: Remove(%x) = %v with state %+v", op, h, got, s)
			}
			if want {
				delete(present, h)
			}
		default:
			m.Touch(randomHashes())
		}
		if m.target != target {
			targetMoves++
		}
		if err := m.Check(); err != nil {
			t.Fatalf("op %d: %v", op, err)
		}
		if m.Len() != len(present) {
			t.Fatalf("op %d: Len %d, test counts %d", op, m.Len(), len(present))
		}
		for h, s := range present {
			if ready, p := m.Contains(h); !p || ready != s.ready {
				t.Fatalf("op %d: Contains(%x) = %v, %v; test has %+v", op, h, ready, p, s)
			}
		}
	}
	if evictions == 0 || targetMoves == 0 || (numBlocks > 1 && refusals == 0) {
		t.Fatalf("weak run: %d evictions, %d refusals, %d target moves", evictions, refusals, targetMoves)
	}
}

// TestRemove: only a ready block with no load in flight can be removed; a
// removed block is gone (a miss, its slot reusable, one BlockRemoved event)
// and with ARC leaves no ghost.
func TestRemove(t *testing.T) {
	for _, ev := range []string{EvictionLRU, EvictionARC} {
		t.Run(ev, func(t *testing.T) {
			m := newTest(t, ManagerConfig{NumBlocks: 3, Eviction: ev, BlockSizeTokens: 16})
			store(t, m, hA, hB)
			m.TakeEvents()
			if _, ok := m.PrepareStore(hs(hC)); !ok {
				t.Fatal("PrepareStore(C) refused")
			}
			m.PrepareLoad(hs(hB))
			for _, h := range hs(hC, hB, hD) {
				if m.Remove(h) {
					t.Fatalf("Remove(%x) = true for a block being stored, loaded or absent", h)
				}
			}
			if !m.Remove(hA) || m.Remove(hA) {
				t.Fatal("Remove(A) twice: want true then false")
			}
			if _, present := m.Contains(hA); present || m.NumFree() != 1 {
				t.Fatalf("after Remove(A): present %v, %d free slots", present, m.NumFree())
			}
			if hits, res := m.Lookup(hs(hA)); hits != 0 || res != Miss {
				t.Fatalf("Lookup(A) after Remove = %d, %v", hits, res)
			}
			want := []kvblock.Event{{Kind: kvblock.BlockRemoved, Hashes: hs(hA), Medium: MediumCPU, BlockSize: 16}}
			if got := m.TakeEvents(); !sameEvents(got, want) {
				t.Fatalf("events %+v, want %+v", got, want)
			}
			if _, ghost := m.index[hA]; ghost {
				t.Fatal("removed hash left a ghost")
			}
			m.CompleteLoad(hs(hB))
			m.CompleteStore(hs(hC), true)
			if !m.Remove(hB) {
				t.Fatal("Remove(B) after its load = false")
			}
			mustCheck(t, m)
		})
	}
}
