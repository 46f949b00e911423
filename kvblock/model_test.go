package kvblock

// A metamorphic test of the block pool: the same random operations run
// against the real Pool and against a naive model made of maps and slices,
// and after every operation every observable of the two must agree and
// Pool.Check must pass. The model is deliberately slow and plain (linear
// scans, a slice for the LRU) so that it is obviously correct.

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/kvlease/kvlease/internal/race"
)

// model is the reference: what the pool's documentation promises, written
// the simplest way.
type model struct {
	capacity int
	bs       int
	events   bool
	medium   string

	refs   []int             // live holds naming each block (a hold naming a block twice counts twice)
	cached map[BlockID]Hash  // blocks that carry a prefix hash
	index  map[Hash]BlockID  // prefix hash -> the block carrying it
	free   []BlockID         // unheld, uncached blocks; a stack, the last element is reused first
	lru    []BlockID         // unheld, cached blocks; lru[0] is evicted first
	holds  []*mHold          // live holds, in creation order
	byID   map[HoldID]*mHold // live holds by id
	issued map[HoldID]bool   // every id NewHold ever returned
	dead   []HoldID          // some released ids, to check they stay dead

	out []Event // the outbox
}

type mHold struct {
	id     HoldID
	kind   HoldKind
	owner  uint64
	blocks []BlockID
}

func newModel(cfg Config) *model {
	m := &model{
		capacity: cfg.NumBlocks,
		bs:       cfg.BlockSizeTokens,
		events:   cfg.Events,
		medium:   cfg.Medium,
		refs:     make([]int, cfg.NumBlocks),
		cached:   map[BlockID]Hash{},
		index:    map[Hash]BlockID{},
		byID:     map[HoldID]*mHold{},
		issued:   map[HoldID]bool{},
	}
	if m.medium == "" {
		m.medium = "GPU"
	}
	// Block 0 is on top of the stack, so a fresh pool hands out 0, 1, 2...
	for b := cfg.NumBlocks - 1; b >= 0; b-- {
		m.free = append(m.free, BlockID(b))
	}
	return m
}

func (m *model) numHeld() int {
	n := 0
	for _, r := range m.refs {
		if r > 0 {
			n++
		}
	}
	return n
}

func (m *model) newHold(id HoldID, k HoldKind, owner uint64) {
	h := &mHold{id: id, kind: k, owner: owner}
	m.holds = append(m.holds, h)
	m.byID[id] = h
	m.issued[id] = true
}

// forget removes the cached hash of b; an eviction or Uncache.
func (m *model) forget(b BlockID) {
	h := m.cached[b]
	delete(m.cached, b)
	delete(m.index, h)
	if m.events {
		m.out = append(m.out, Event{Kind: BlockRemoved, Hashes: []Hash{h}, BlockSize: m.bs, Medium: m.medium})
	}
}

func (m *model) lruRemove(b BlockID) {
	i := slices.Index(m.lru, b)
	if i < 0 {
		panic(fmt.Sprintf("model: block %d is not in the LRU", b))
	}
	m.lru = slices.Delete(m.lru, i, i+1)
}

func (m *model) allocate(h *mHold, n int) bool {
	if n > len(m.free)+len(m.lru) {
		return false
	}
	for range n {
		var b BlockID
		if len(m.free) > 0 {
			b = m.free[len(m.free)-1]
			m.free = m.free[:len(m.free)-1]
		} else {
			b = m.lru[0]
			m.lru = m.lru[1:]
			m.forget(b)
		}
		m.refs[b] = 1
		h.blocks = append(h.blocks, b)
	}
	return true
}

func (m *model) share(h *mHold, blocks []BlockID) {
	for _, b := range blocks {
		if m.refs[b] == 0 {
			m.lruRemove(b) // a prefix-cache hit: no longer evictable
		}
		m.refs[b]++
		h.blocks = append(h.blocks, b)
	}
}

// drop takes one hold off each block, last to first.
func (m *model) drop(blocks []BlockID) {
	for i := len(blocks) - 1; i >= 0; i-- {
		b := blocks[i]
		m.refs[b]--
		if m.refs[b] > 0 {
			continue
		}
		if _, ok := m.cached[b]; ok {
			m.lru = append(m.lru, b)
		} else {
			m.free = append(m.free, b)
		}
	}
}

func (m *model) release(h *mHold) {
	m.drop(h.blocks)
	i := slices.Index(m.holds, h)
	m.holds = slices.Delete(m.holds, i, i+1)
	delete(m.byID, h.id)
	m.dead = append(m.dead, h.id)
	if len(m.dead) > 64 {
		m.dead = m.dead[len(m.dead)-64:]
	}
}

func (m *model) truncate(h *mHold, n int) {
	m.drop(h.blocks[n:])
	h.blocks = h.blocks[:n]
}

func (m *model) cache(b BlockID, hash Hash) bool {
	if _, ok := m.cached[b]; ok {
		return false // the generator only re-caches a block under its own hash
	}
	if _, dup := m.index[hash]; dup {
		return false
	}
	m.cached[b] = hash
	m.index[hash] = b
	return true
}

func (m *model) cacheRun(blocks []BlockID, hashes []Hash, parent Hash, tokens []int32) {
	var stored []Hash
	var toks []int32
	evParent := parent
	for i, b := range blocks {
		if !m.cache(b, hashes[i]) {
			continue
		}
		if len(stored) == 0 && i > 0 {
			evParent = hashes[i-1]
		}
		stored = append(stored, hashes[i])
		toks = append(toks, tokens[i*m.bs:(i+1)*m.bs]...)
	}
	if m.events && len(stored) > 0 {
		m.out = append(m.out, Event{Kind: BlockStored, Hashes: stored, Parent: evParent, Tokens: toks, BlockSize: m.bs, Medium: m.medium})
	}
}

func (m *model) lookup(dst []BlockID, hashes []Hash) []BlockID {
	for _, h := range hashes {
		b, ok := m.index[h]
		if !ok {
			break
		}
		dst = append(dst, b)
	}
	return dst
}

func (m *model) uncache(b BlockID) {
	if _, ok := m.cached[b]; !ok {
		return
	}
	m.forget(b)
	if m.refs[b] == 0 {
		m.lruRemove(b)
		m.free = append(m.free, b)
	}
}

func (m *model) resetCache() bool {
	if m.numHeld() > 0 {
		return false
	}
	m.free = append(m.free, m.lru...) // LRU order: the most recently used ends on top
	m.lru = nil
	clear(m.cached)
	clear(m.index)
	if m.events {
		m.out = append(m.out, Event{Kind: AllBlocksCleared, Medium: m.medium})
	}
	return true
}

// source is where the driver's choices come from: a seeded *rand.Rand in
// the random test, the fuzzer's bytes in FuzzPool.
type source interface {
	IntN(n int) int
}

// byteSource reads choices from fuzz input; once the input is used up every
// choice is 0 and done is set.
type byteSource struct {
	data []byte
	done bool
}

func (s *byteSource) IntN(n int) int {
	if n <= 1 {
		return 0
	}
	need := 1
	if n > 256 {
		need = 4
	}
	if len(s.data) < need {
		s.data, s.done = nil, true
		return 0
	}
	v := 0
	for _, c := range s.data[:need] {
		v = v<<8 | int(c)
	}
	s.data = s.data[need:]
	return v % n
}

// prompt is a token sequence with its chained block hashes.
type prompt struct {
	tokens []int32
	ex     Extras
	hashes []Hash
}

// driver runs random operations against a pool and its model.
type driver struct {
	tb   testing.TB
	src  source
	p    *Pool
	m    *model
	cfg  Config
	ops  int
	last string // the last operation, for failure messages

	prompts  []prompt
	nextHash uint64
	maxHolds int
}

func newDriver(tb testing.TB, src source, cfg Config) *driver {
	d := &driver{
		tb:       tb,
		src:      src,
		p:        New(cfg),
		m:        newModel(cfg),
		cfg:      cfg,
		nextHash: 0x5eed0000_00000000,
		maxHolds: 12,
	}
	for range 8 {
		d.prompts = append(d.prompts, d.newPrompt())
	}
	d.verify()
	return d
}

// randConfig picks a small pool so that allocation often evicts and often
// fails.
func randConfig(src source, events bool) Config {
	media := []string{"", "CPU"}
	return Config{
		NumBlocks:       1 + src.IntN(40),
		BlockSizeTokens: 1 << src.IntN(3), // 1, 2 or 4
		BytesPerToken:   src.IntN(2) * 3,
		Events:          events,
		Medium:          media[src.IntN(2)],
	}
}

// newPrompt makes a token sequence over a three-token alphabet (so that
// prefixes repeat), often extending an existing prompt, and hashes it
// incrementally.
func (d *driver) newPrompt() prompt {
	var pr prompt
	if len(d.prompts) > 0 && d.src.IntN(2) == 0 {
		base := d.prompts[d.src.IntN(len(d.prompts))]
		pr.ex = base.ex
		pr.tokens = slices.Clone(base.tokens[:d.src.IntN(len(base.tokens)+1)])
	} else {
		switch d.src.IntN(6) {
		case 0:
			pr.ex.CacheSalt = "s"
		case 1:
			pr.ex.Adapter = Adapter{Name: "a"}
		}
	}
	for n := d.src.IntN(8 * d.cfg.BlockSizeTokens); n > 0; n-- {
		pr.tokens = append(pr.tokens, int32(d.src.IntN(3)))
	}
	// Hash in two steps to exercise the incremental contract.
	cut := d.src.IntN(len(pr.tokens) + 1)
	pr.hashes = AppendHashes(nil, pr.tokens[:cut], d.cfg.BlockSizeTokens, pr.ex)
	pr.hashes = AppendHashes(pr.hashes, pr.tokens, d.cfg.BlockSizeTokens, pr.ex)
	return pr
}

func (d *driver) fatalf(format string, args ...any) {
	d.tb.Helper()
	d.tb.Fatalf("after op %d (%s): %s", d.ops, d.last, fmt.Sprintf(format, args...))
}

func (d *driver) pickHold() *mHold {
	if len(d.m.holds) == 0 {
		return nil
	}
	return d.m.holds[d.src.IntN(len(d.m.holds))]
}

// pickHeldBlock returns a block some live hold names.
func (d *driver) pickHeldBlock() (BlockID, bool) {
	var withBlocks []*mHold
	for _, h := range d.m.holds {
		if len(h.blocks) > 0 {
			withBlocks = append(withBlocks, h)
		}
	}
	if len(withBlocks) == 0 {
		return 0, false
	}
	h := withBlocks[d.src.IntN(len(withBlocks))]
	return h.blocks[d.src.IntN(len(h.blocks))], true
}

func (d *driver) freshHash() Hash {
	d.nextHash++
	return h64(d.nextHash)
}

// step runs one random operation on both sides and verifies.
func (d *driver) step() {
	d.ops++
	p, m, src := d.p, d.m, d.src
	switch op := src.IntN(100); {
	case op < 8: // NewHold
		if len(m.holds) >= d.maxHolds {
			d.last = "NewHold skipped"
			break
		}
		k := HoldKind(1 + src.IntN(5))
		owner := uint64(src.IntN(1000))
		id := p.NewHold(k, owner)
		d.last = fmt.Sprintf("NewHold(%v, %d) = %#x", k, owner, uint64(id))
		if id == 0 || m.issued[id] {
			d.fatalf("NewHold returned %#x, which is zero or was issued before", uint64(id))
		}
		m.newHold(id, k, owner)

	case op < 24: // Allocate, sometimes more than is available
		h := d.pickHold()
		if h == nil {
			d.last = "Allocate skipped"
			break
		}
		avail := len(m.free) + len(m.lru)
		n := src.IntN(min(avail, 6) + 1)
		if src.IntN(5) == 0 {
			n = avail + 1 + src.IntN(3)
		}
		d.last = fmt.Sprintf("Allocate(%#x, %d) with %d available", uint64(h.id), n, avail)
		got := p.Allocate(h.id, n)
		if want := m.allocate(h, n); got != want {
			d.fatalf("Allocate = %v, model says %v", got, want)
		}

	case op < 32: // Share a cached prefix found by Lookup (evictable or held blocks)
		h := d.pickHold()
		if h == nil {
			d.last = "Share(lookup) skipped"
			break
		}
		pr := d.prompts[src.IntN(len(d.prompts))]
		hit := p.Lookup(nil, pr.hashes)
		if want := m.lookup(nil, pr.hashes); !slices.Equal(hit, want) {
			d.fatalf("Lookup = %v, model says %v", hit, want)
		}
		hit = hit[:src.IntN(len(hit)+1)]
		d.last = fmt.Sprintf("Share(%#x, %v) of a lookup hit", uint64(h.id), hit)
		p.Share(h.id, hit)
		m.share(h, hit)

	case op < 37: // Share blocks another (or the same) hold names
		h, from := d.pickHold(), d.pickHold()
		if h == nil || len(from.blocks) == 0 {
			d.last = "Share(held) skipped"
			break
		}
		i := src.IntN(len(from.blocks))
		j := i + src.IntN(len(from.blocks)-i+1)
		blocks := slices.Clone(from.blocks[i:j])
		d.last = fmt.Sprintf("Share(%#x, %v) of blocks held by %#x", uint64(h.id), blocks, uint64(from.id))
		p.Share(h.id, blocks)
		m.share(h, blocks)

	case op < 47: // Release
		h := d.pickHold()
		if h == nil {
			d.last = "Release skipped"
			break
		}
		d.last = fmt.Sprintf("Release(%#x) of %v", uint64(h.id), h.blocks)
		p.Release(h.id)
		m.release(h)

	case op < 52: // Truncate
		h := d.pickHold()
		if h == nil {
			d.last = "Truncate skipped"
			break
		}
		n := src.IntN(len(h.blocks) + 1)
		d.last = fmt.Sprintf("Truncate(%#x, %d) of %v", uint64(h.id), n, h.blocks)
		p.Truncate(h.id, n)
		m.truncate(h, n)

	case op < 60: // Cache one held block: a new hash, a duplicate, or its own again
		b, ok := d.pickHeldBlock()
		if !ok {
			d.last = "Cache skipped"
			break
		}
		var hash Hash
		if own, cached := m.cached[b]; cached {
			hash = own // caching again under the same hash is a no-op
		} else {
			switch src.IntN(3) {
			case 0:
				hash = d.freshHash()
			case 1: // a hash another block already carries, if any
				var carried []Hash // in block order: map order would break reproducibility
				for b := range m.capacity {
					if hh, ok := m.cached[BlockID(b)]; ok {
						carried = append(carried, hh)
					}
				}
				hash = d.freshHash()
				if len(carried) > 0 {
					hash = carried[src.IntN(len(carried))]
				}
			default:
				pr := d.prompts[src.IntN(len(d.prompts))]
				if len(pr.hashes) > 0 {
					hash = pr.hashes[src.IntN(len(pr.hashes))]
				} else {
					hash = d.freshHash()
				}
			}
		}
		d.last = fmt.Sprintf("Cache(%d, %x)", b, hash)
		got := p.Cache(b, hash)
		if want := m.cache(b, hash); got != want {
			d.fatalf("Cache = %v, model says %v", got, want)
		}

	case op < 74: // CacheRun of a hold's blocks under a prompt's chained hashes
		d.cacheRun()

	case op < 80: // Lookup of a prompt, a prefix of one, or garbage, appending to dst
		var hashes []Hash
		switch src.IntN(4) {
		case 0:
			hashes = []Hash{d.freshHash(), RootHash}
		default:
			pr := d.prompts[src.IntN(len(d.prompts))]
			hashes = pr.hashes[:src.IntN(len(pr.hashes)+1)]
		}
		d.last = fmt.Sprintf("Lookup(%x)", hashes)
		dst := []BlockID{-7}
		got := p.Lookup(dst, hashes)
		if want := m.lookup([]BlockID{-7}, hashes); !slices.Equal(got, want) {
			d.fatalf("Lookup = %v, model says %v", got, want)
		}

	case op < 86: // Uncache any block: free, evictable, held, cached or not
		b := BlockID(src.IntN(m.capacity))
		d.last = fmt.Sprintf("Uncache(%d)", b)
		p.Uncache(b)
		m.uncache(b)

	case op < 88: // ResetCache: fails while anything is held
		d.last = "ResetCache"
		got := p.ResetCache()
		if want := m.resetCache(); got != want {
			d.fatalf("ResetCache = %v, model says %v", got, want)
		}

	case op < 89: // release everything (verifying after each) so that ResetCache can succeed
		for len(m.holds) > 0 {
			h := m.holds[0]
			d.last = fmt.Sprintf("drain: Release(%#x)", uint64(h.id))
			p.Release(h.id)
			m.release(h)
			d.verify()
			d.ops++
		}
		d.last = "drain: ResetCache"
		got := p.ResetCache()
		if want := m.resetCache(); got != want || !got {
			d.fatalf("ResetCache = %v, model says %v, with nothing held", got, want)
		}

	default: // a new prompt
		d.last = "new prompt"
		d.prompts[src.IntN(len(d.prompts))] = d.newPrompt()
	}
	d.verify()
}

// cacheRun caches a run of a hold's blocks under a prompt's hashes, as the
// scheduler does when blocks fill up. Blocks already cached under their own
// hash, and hashes already carried by another block, must be left out of
// the BlockStored event.
func (d *driver) cacheRun() {
	h := d.pickHold()
	pr := d.prompts[d.src.IntN(len(d.prompts))]
	if h == nil {
		d.last = "CacheRun skipped"
		return
	}
	n := min(len(h.blocks), len(pr.hashes))
	i := d.src.IntN(n + 1)
	k := d.src.IntN(n - i + 1)
	// Stop before the first block that Cache would refuse with a panic:
	// one cached under another hash (possibly earlier in this very run).
	tentative := map[BlockID]Hash{}
	for j := i; j < i+k; j++ {
		b := h.blocks[j]
		own, ok := d.m.cached[b]
		if t, ok2 := tentative[b]; ok2 {
			own, ok = t, true
		}
		if ok && own != pr.hashes[j] {
			k = j - i
			break
		}
		if !ok {
			if _, dup := d.m.index[pr.hashes[j]]; !dup {
				tentative[b] = pr.hashes[j]
			}
		}
	}
	blocks := slices.Clone(h.blocks[i : i+k])
	hashes := pr.hashes[i : i+k]
	parent := RootHash
	if i > 0 {
		parent = pr.hashes[i-1]
	}
	bs := d.cfg.BlockSizeTokens
	tokens := pr.tokens[i*bs : (i+k)*bs]
	d.last = fmt.Sprintf("CacheRun(%v, %x, parent %x)", blocks, hashes, parent)
	d.p.CacheRun(blocks, hashes, parent, tokens)
	d.m.cacheRun(blocks, hashes, parent, tokens)
}

// verify compares every observable of the pool with the model.
func (d *driver) verify() {
	d.tb.Helper()
	p, m := d.p, d.m
	if err := p.Check(); err != nil {
		d.fatalf("Check: %v", err)
	}
	if got, want := p.NumFree(), len(m.free); got != want {
		d.fatalf("NumFree = %d, model %d", got, want)
	}
	if got, want := p.NumEvictable(), len(m.lru); got != want {
		d.fatalf("NumEvictable = %d, model %d", got, want)
	}
	held := m.numHeld()
	if got := p.NumHeld(); got != held {
		d.fatalf("NumHeld = %d, model %d", got, held)
	}
	if got, want := p.NumAvailable(), len(m.free)+len(m.lru); got != want {
		d.fatalf("NumAvailable = %d, model %d", got, want)
	}
	if got, want := p.Usage(), float64(held)/float64(m.capacity); got != want {
		d.fatalf("Usage = %v, model %v", got, want)
	}
	for b := range m.capacity {
		id := BlockID(b)
		if got, want := p.Refs(id), m.refs[b]; got != want {
			d.fatalf("Refs(%d) = %d, model %d", b, got, want)
		}
		gotH, gotOK := p.Cached(id)
		wantH, wantOK := m.cached[id]
		if gotH != wantH || gotOK != wantOK {
			d.fatalf("Cached(%d) = %x, %v; model %x, %v", b, gotH, gotOK, wantH, wantOK)
		}
	}
	var kinds [6]int
	for _, h := range m.holds {
		kinds[h.kind]++
		if !p.Live(h.id) {
			d.fatalf("hold %#x is not live", uint64(h.id))
		}
		if got := p.Blocks(h.id); !slices.Equal(got, h.blocks) {
			d.fatalf("Blocks(%#x) = %v, model %v", uint64(h.id), got, h.blocks)
		}
		if p.Len(h.id) != len(h.blocks) || p.Kind(h.id) != h.kind || p.Owner(h.id) != h.owner {
			d.fatalf("hold %#x: Len %d Kind %v Owner %d, model %d %v %d", uint64(h.id),
				p.Len(h.id), p.Kind(h.id), p.Owner(h.id), len(h.blocks), h.kind, h.owner)
		}
	}
	for k := HoldRequest; k <= HoldLoad; k++ {
		if got := p.NumHolds(k); got != kinds[k] {
			d.fatalf("NumHolds(%v) = %d, model %d", k, got, kinds[k])
		}
	}
	infos := p.LiveHolds(nil)
	if len(infos) != len(m.holds) {
		d.fatalf("LiveHolds has %d holds, model %d", len(infos), len(m.holds))
	}
	for _, in := range infos {
		h := m.byID[in.ID]
		if h == nil || in.Kind != h.kind || in.Owner != h.owner || in.Blocks != len(h.blocks) {
			d.fatalf("LiveHolds reports %+v, model %+v", in, h)
		}
	}
	i := 0
	for in := range p.Holds() {
		if i >= len(infos) || in != infos[i] {
			d.fatalf("Holds yields %+v at %d, LiveHolds %+v", in, i, infos)
		}
		i++
	}
	if i != len(infos) {
		d.fatalf("Holds yields %d holds, LiveHolds %d", i, len(infos))
	}
	for _, id := range m.dead {
		if p.Live(id) {
			d.fatalf("released hold %#x is live again", uint64(id))
		}
	}
	// The index, entry by entry: every cached hash finds its block...
	for h, b := range m.index {
		if got := p.Lookup(nil, []Hash{h}); len(got) != 1 || got[0] != b {
			d.fatalf("Lookup(%x) = %v, model [%d]", h, got, b)
		}
	}
	// ...and every prompt finds its longest cached prefix.
	for _, pr := range d.prompts {
		if got, want := p.Lookup(nil, pr.hashes), m.lookup(nil, pr.hashes); !slices.Equal(got, want) {
			d.fatalf("Lookup(prompt %v) = %v, model %v", pr.tokens, got, want)
		}
	}
	got := p.TakeEvents()
	if !eventsEqual(got, m.out) {
		d.fatalf("events:\n got  %s\n want %s", fmtEvents(got), fmtEvents(m.out))
	}
	m.out = nil
}

func eventsEqual(a, b []Event) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		x, y := a[i], b[i]
		if x.Kind != y.Kind || x.Parent != y.Parent || x.BlockSize != y.BlockSize || x.Medium != y.Medium ||
			!slices.Equal(x.Hashes, y.Hashes) || !slices.Equal(x.Tokens, y.Tokens) {
			return false
		}
	}
	return true
}

func fmtEvents(evs []Event) string {
	var sb strings.Builder
	for _, e := range evs {
		fmt.Fprintf(&sb, "{%v %x parent %x tokens %v bs %d %s} ", e.Kind, e.Hashes, e.Parent, e.Tokens, e.BlockSize, e.Medium)
	}
	return sb.String()
}

// TestPoolAgainstModel runs at least 100,000 random operations per seed
// (25,000 under the race detector, which slows this single-goroutine loop
// twentyfold), with Check and a full comparison after each.
func TestPoolAgainstModel(t *testing.T) {
	opsPerSeed := 100_000
	if race.Enabled {
		opsPerSeed = 25_000
	}
	seeds := []uint64{1, 2, 3, 4}
	if testing.Short() {
		seeds = seeds[:1]
	}
	for _, seed := range seeds {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 0x6b76626c6f636b))
			cfg := randConfig(rng, seed%2 == 1)
			d := newDriver(t, rng, cfg)
			total, reshapeAt := 0, 20_000
			for total+d.ops < opsPerSeed {
				d.step()
				// Change the pool's shape now and then, so one seed covers
				// several sizes, block sizes and event settings.
				if d.ops >= reshapeAt {
					total += d.ops
					d = newDriver(t, rng, randConfig(rng, rng.IntN(2) == 0))
				}
			}
			t.Logf("seed %d: %d operations", seed, total+d.ops)
		})
	}
}

// FuzzPool interprets the input as a sequence of the same operations: the
// first bytes choose the pool's shape, every later byte (or four) one choice.
func FuzzPool(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{3, 1, 0, 1, 0, 1, 10, 2, 20, 5, 60, 3, 70, 0, 80, 1, 44})
	rng := rand.New(rand.NewPCG(7, 7))
	for range 8 {
		seed := make([]byte, 200)
		for i := range seed {
			seed[i] = byte(rng.IntN(256))
		}
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		// 256 choices make up to ~150 operations; long runs are
		// TestPoolAgainstModel's job. Longer inputs made the fuzzer spend
		// tens of seconds minimizing each new interesting input.
		if len(data) > 256 {
			data = data[:256]
		}
		src := &byteSource{data: data}
		cfg := randConfig(src, src.IntN(2) == 0)
		d := newDriver(t, src, cfg)
		for !src.done {
			d.step()
		}
	})
}
