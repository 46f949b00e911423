package offload

import (
	"fmt"

	"github.com/kvlease/kvlease/kvblock"
)

// Slot is a tier-local block index in [0, NumBlocks): where a block's bytes
// live in the tier (offload/tier), chosen by the Manager.
type Slot int32

// LookupResult qualifies the hit count of Lookup.
type LookupResult uint8

const (
	// Miss: no block of the prefix is ready, and the first one is not
	// being stored.
	Miss LookupResult = iota
	// Hit: the first hits blocks are ready, and the next one (if any) is
	// absent, so the hit will not grow by waiting.
	Hit
	// HitPending: the block after the ready prefix is being stored; asking
	// again after its store completes may give a longer hit.
	HitPending
)

func (r LookupResult) String() string {
	switch r {
	case Miss:
		return "miss"
	case Hit:
		return "hit"
	case HitPending:
		return "hit-pending"
	}
	return fmt.Sprintf("LookupResult(%d)", r)
}

// Media and eviction policies accepted by ManagerConfig.
const (
	MediumCPU  = "CPU"
	MediumDisk = "DISK"

	EvictionLRU = "lru"
	EvictionARC = "arc"

	// DefaultMaxTrackerSize bounds the reuse filter's counters (vLLM's
	// max_tracker_size default).
	DefaultMaxTrackerSize = 64000

	maxNumBlocks      = 1 << 28 // node ids of ARC (3 × NumBlocks) fit in int32
	maxTrackerSize    = 1 << 24
	maxStoreThreshold = 1 << 20
)

// ManagerConfig configures one tier's Manager.
type ManagerConfig struct {
	// Medium labels events: MediumCPU or MediumDisk.
	Medium string
	// NumBlocks is the tier's capacity in blocks (slots 0..NumBlocks-1).
	NumBlocks int
	// Eviction is EvictionLRU (default when empty) or EvictionARC.
	Eviction string
	// StoreThreshold enables the reuse filter when ≥ 2: a hash is stored
	// only after Lookup has seen it at least StoreThreshold times. 0 and 1
	// disable it.
	StoreThreshold int
	// MaxTrackerSize bounds the reuse filter's counters (least recently
	// looked-up hashes are forgotten first). 0 selects
	// DefaultMaxTrackerSize.
	MaxTrackerSize int
	// BlockSizeTokens only labels events (Event.BlockSize); 0 leaves it
	// unset.
	BlockSizeTokens int
}

// DefaultManagerConfig is an LRU host-memory tier with the reuse filter
// off. NumBlocks must still be set.
func DefaultManagerConfig() ManagerConfig {
	return ManagerConfig{Medium: MediumCPU, Eviction: EvictionLRU, MaxTrackerSize: DefaultMaxTrackerSize}
}

// Validate reports the first problem with c.
func (c ManagerConfig) Validate() error {
	switch {
	case c.Medium != MediumCPU && c.Medium != MediumDisk:
		return fmt.Errorf("offload: Medium must be %q or %q, got %q", MediumCPU, MediumDisk, c.Medium)
	case c.NumBlocks <= 0 || c.NumBlocks > maxNumBlocks:
		return fmt.Errorf("offload: NumBlocks must be in [1, %d], got %d", maxNumBlocks, c.NumBlocks)
	case c.Eviction != "" && c.Eviction != EvictionLRU && c.Eviction != EvictionARC:
		return fmt.Errorf("offload: Eviction must be %q or %q, got %q", EvictionLRU, EvictionARC, c.Eviction)
	case c.StoreThreshold < 0 || c.StoreThreshold > maxStoreThreshold:
		return fmt.Errorf("offload: StoreThreshold must be in [0, %d], got %d", maxStoreThreshold, c.StoreThreshold)
	case c.MaxTrackerSize < 0 || c.MaxTrackerSize > maxTrackerSize:
		return fmt.Errorf("offload: MaxTrackerSize must be in [0, %d] (0 = default %d), got %d", maxTrackerSize, DefaultMaxTrackerSize, c.MaxTrackerSize)
	case c.BlockSizeTokens < 0:
		return fmt.Errorf("offload: BlockSizeTokens must not be negative, got %d", c.BlockSizeTokens)
	}
	return nil
}

// StorePlan is the outcome of a successful PrepareStore. The caller owns its
// slices.
type StorePlan struct {
	// Hashes are the accepted hashes, in input order, without duplicates.
	// Each is now being stored: the caller copies it to Slots[i] and then
	// calls CompleteStore.
	Hashes []kvblock.Hash
	// Slots[i] is the tier slot of Hashes[i].
	Slots []Slot
	// Evicted are the blocks evicted to make room (a BlockRemoved event
	// was recorded for them). It may include a hash of the input that was
	// already present: present hashes are not stored again and PrepareStore
	// does not protect them (Touch them first to make that unlikely).
	Evicted []kvblock.Hash
	// Refused are the input hashes the reuse filter rejected (not present,
	// seen fewer than StoreThreshold times), in input order, without
	// duplicates. They are neither stored nor present; offer them again
	// later. Every input hash is in exactly one of: already present,
	// Hashes, Refused.
	Refused []kvblock.Hash
}

// list membership of a node.
type listID uint8

const (
	listNone listID = iota
	listT1          // LRU: the only list
	listT2
	listB1
	listB2
	numLists
)

var listNames = [numLists]string{"none", "T1", "T2", "B1", "B2"}

const (
	nilNode  int32 = -1
	notReady int32 = -1 // pins value of a block being stored
)

// Manager is the index and replacement policy of one offload tier. See the
// package documentation. Not safe for concurrent use.
type Manager struct {
	cfg       ManagerConfig
	arc       bool
	threshold int // 0 when the reuse filter is off

	// version counts the changes of the state; checked is the version the
	// last passing check saw (Check skips an unchanged manager).
	version, checked uint64
	checkedOK        bool
	scratchFree      []bool // CheckFull's, reused
	scratchLinked    []bool
	numBlocks        int32

	// Nodes 0..numBlocks-1 are slots (present blocks); with ARC, nodes
	// numBlocks..3·numBlocks-1 are ghosts of B1 and B2.
	index  map[kvblock.Hash]int32 // present hash → slot, ghost hash → ghost node
	hash   []kvblock.Hash         // per node
	member []listID               // per node: T1/T2 for present, B1/B2 for ghosts
	links  links                  // per node; linked iff evictable or a ghost
	pins   []int32                // per slot: notReady, or loads in flight
	lists  [numLists]list         // linked nodes
	count  [numLists]int          // members, linked or not
	target int                    // ARC: adaptive target size of T1

	free      []Slot  // stack of free slots; the top is reused first
	freeGhost []int32 // stack of unused ghost nodes

	tracker tracker
	seen    map[kvblock.Hash]struct{} // PrepareStore's duplicate filter; empty between calls
	events  []kvblock.Event
}

// NewManager returns an empty manager. It panics if cfg is invalid:
// configuration is validated at the edges.
func NewManager(cfg ManagerConfig) *Manager {
	if err := cfg.Validate(); err != nil {
		panic(err)
	}
	if cfg.Eviction == "" {
		cfg.Eviction = EvictionLRU
	}
	if cfg.MaxTrackerSize == 0 {
		cfg.MaxTrackerSize = DefaultMaxTrackerSize
	}
	n := cfg.NumBlocks
	nodes := n
	m := &Manager{
		cfg:       cfg,
		arc:       cfg.Eviction == EvictionARC,
		numBlocks: int32(n),
		index:     make(map[kvblock.Hash]int32),
		pins:      make([]int32, n),
		free:      make([]Slot, n),
		seen:      make(map[kvblock.Hash]struct{}),
	}
	if m.arc {
		nodes = 3 * n
		m.freeGhost = make([]int32, 2*n)
		for i := range m.freeGhost {
			m.freeGhost[i] = int32(3*n - 1 - i)
		}
	}
	m.hash = make([]kvblock.Hash, nodes)
	m.member = make([]listID, nodes)
	m.links = newLinks(nodes)
	for i := range m.lists {
		m.lists[i] = emptyList
	}
	// Slot 0 on top of the stack: allocation starts at slot 0.
	for i := range m.free {
		m.free[i] = Slot(n - 1 - i)
	}
	if cfg.StoreThreshold >= 2 {
		m.threshold = cfg.StoreThreshold
		m.tracker = newTracker(cfg.MaxTrackerSize)
	}
	return m
}

// Config returns the manager's configuration, with defaults filled in.
func (m *Manager) Config() ManagerConfig { return m.cfg }

// Len is the number of blocks in the tier, ready or being stored.
func (m *Manager) Len() int { return int(m.numBlocks) - len(m.free) }

// NumFree is the number of unallocated slots.
func (m *Manager) NumFree() int { return len(m.free) }

// NumEvictable is the number of ready blocks with no load in flight.
func (m *Manager) NumEvictable() int { return m.lists[listT1].n + m.lists[listT2].n }

// Contains reports whether h is in the tier (present) and whether it is
// ready to load. It changes nothing (not even the reuse filter).
func (m *Manager) Contains(h kvblock.Hash) (ready, present bool) {
	s, ok := m.slotOf(h)
	if !ok {
		return false, false
	}
	return m.pins[s] != notReady, true
}

// slotOf returns the slot of a present hash (ghosts are not present).
func (m *Manager) slotOf(h kvblock.Hash) (int32, bool) {
	id, ok := m.index[h]
	if !ok || id >= m.numBlocks {
		return 0, false
	}
	return id, true
}

func (m *Manager) evictable(s int32) bool { return m.pins[s] == 0 }

// Lookup returns the length of the longest prefix of hashes whose blocks
// are ready, and whether the block after it is being stored (HitPending).
// With the reuse filter on, it also counts every hash of the input as seen
// once more (vLLM's FilterReusedOffloadingManager).
func (m *Manager) Lookup(hashes []kvblock.Hash) (hits int, result LookupResult) {
	if m.threshold > 0 {
		m.version++ // the reuse counts change
		for _, h := range hashes {
			m.tracker.see(h)
		}
	}
	for i, h := range hashes {
		s, ok := m.slotOf(h)
		if !ok {
			return i, hitOrMiss(i)
		}
		if m.pins[s] == notReady {
			return i, HitPending
		}
	}
	return len(hashes), hitOrMiss(len(hashes))
}

func hitOrMiss(hits int) LookupResult {
	if hits > 0 {
		return Hit
	}
	return Miss
}

// PrepareLoad pins every block of hashes against eviction until
// CompleteLoad and returns their slots (the caller owns the slice). A hash
// may appear more than once; each occurrence is one pin. Loading a block
// that is absent or not ready panics: the caller must Lookup first, in the
// same step.
func (m *Manager) PrepareLoad(hashes []kvblock.Hash) []Slot {
	m.version++
	slots := make([]Slot, len(hashes))
	for i, h := range hashes {
		s, ok := m.slotOf(h)
		if !ok {
			panic(fmt.Sprintf("offload: PrepareLoad of absent block %x", h))
		}
		if m.pins[s] == notReady {
			panic(fmt.Sprintf("offload: PrepareLoad of block %x which is still being stored", h))
		}
		slots[i] = Slot(s)
	}
	for _, s := range slots {
		if m.pins[s] == 0 {
			m.unlink(int32(s))
		}
		m.pins[s]++
	}
	return slots
}

// CompleteLoad drops the pins PrepareLoad took. A block whose last pin goes
// becomes evictable at the most recent end, the first block of hashes most
// recent of all. Completing a load that is not in flight panics.
func (m *Manager) CompleteLoad(hashes []kvblock.Hash) {
	m.version++
	for _, h := range hashes {
		s, ok := m.slotOf(h)
		if !ok || m.pins[s] <= 0 {
			panic(fmt.Sprintf("offload: CompleteLoad of block %x with no load in flight", h))
		}
	}
	for i := len(hashes) - 1; i >= 0; i-- {
		s, _ := m.slotOf(hashes[i])
		if m.pins[s] <= 0 {
			panic(fmt.Sprintf("offload: CompleteLoad of block %x more times than PrepareLoad", hashes[i]))
		}
		m.pins[s]--
		if m.pins[s] == 0 {
			m.link(s)
		}
	}
}

// Touch marks the blocks as used, the first block of hashes most recent of
// all. With ARC, a ready block of T1 moves to T2, and a hash in a ghost list
// adapts T1's target size. Blocks that are not evictable keep no order (they
// become most recent when they become evictable); absent hashes are ignored.
func (m *Manager) Touch(hashes []kvblock.Hash) {
	m.version++
	for i := len(hashes) - 1; i >= 0; i-- {
		id, ok := m.index[hashes[i]]
		if !ok {
			continue
		}
		if id >= m.numBlocks {
			m.touchGhost(id)
			continue
		}
		if m.pins[id] == notReady {
			continue // just prepared for storing: not a second use (vLLM)
		}
		linked := m.evictable(id)
		if linked {
			m.unlink(id)
		}
		if m.arc && m.member[id] == listT1 {
			m.count[listT1]--
			m.count[listT2]++
			m.member[id] = listT2
		}
		if linked {
			m.link(id)
		}
	}
}

// touchGhost adapts ARC's target: a hit in B1 means T1 was too small, a hit
// in B2 means T2 was. The ghost stays where it is (vLLM).
func (m *Manager) touchGhost(id int32) {
	b1, b2 := m.lists[listB1].n, m.lists[listB2].n
	switch m.member[id] {
	case listB1:
		m.target = min(m.target+max(1, b2/b1), int(m.numBlocks))
	case listB2:
		m.target = max(m.target-max(1, b1/b2), 0)
	default:
		panic(fmt.Sprintf("offload: ghost node %d is in list %s", id, listNames[m.member[id]]))
	}
}

// PrepareStore accepts the hashes of the input that are neither present nor
// refused by the reuse filter (duplicates count once), makes room for them
// by evicting ready unpinned blocks if needed, and allocates their slots.
// Accepted blocks are being stored — not loadable, not evictable — until
// CompleteStore. If it cannot free enough slots it returns false and
// changes nothing. See StorePlan for how every input hash is accounted for.
func (m *Manager) PrepareStore(hashes []kvblock.Hash) (StorePlan, bool) {
	return m.prepareStore(hashes, true)
}

// prepareStore is PrepareStore; without filter the reuse filter refuses
// nothing (a lease spill stores what it must move, seen or not).
func (m *Manager) prepareStore(hashes []kvblock.Hash, filter bool) (StorePlan, bool) {
	var plan StorePlan
	for _, h := range hashes {
		if _, ok := m.slotOf(h); ok {
			continue
		}
		if _, dup := m.seen[h]; dup {
			continue
		}
		m.seen[h] = struct{}{}
		if filter && m.threshold > 0 && m.tracker.count(h) < m.threshold {
			plan.Refused = append(plan.Refused, h)
			continue
		}
		plan.Hashes = append(plan.Hashes, h)
	}
	for _, h := range hashes {
		delete(m.seen, h)
	}
	need := len(plan.Hashes) - len(m.free)
	if need > m.NumEvictable() {
		return StorePlan{}, false
	}
	m.version++ // a refusal changes nothing
	if need > 0 {
		plan.Evicted = make([]kvblock.Hash, 0, need)
		for range need {
			plan.Evicted = append(plan.Evicted, m.evictOne())
		}
		m.events = append(m.events, m.event(kvblock.BlockRemoved, plan.Evicted))
	}
	if len(plan.Hashes) > 0 {
		plan.Slots = make([]Slot, len(plan.Hashes))
	}
	for i, h := range plan.Hashes {
		s := m.free[len(m.free)-1]
		m.free = m.free[:len(m.free)-1]
		if g, ok := m.index[h]; ok {
			m.dropGhost(g) // stored again: no longer a ghost
		}
		m.hash[s] = h
		m.pins[s] = notReady
		m.member[s] = listT1
		m.count[listT1]++
		m.index[h] = int32(s)
		plan.Slots[i] = s
	}
	return plan, true
}

// wouldRefuse reports whether PrepareStore(hashes) would refuse some of
// them by the reuse filter (a hash not present, seen fewer than
// StoreThreshold times). It changes nothing.
func (m *Manager) wouldRefuse(hashes []kvblock.Hash) bool {
	if m.threshold == 0 {
		return false
	}
	for _, h := range hashes {
		if _, ok := m.slotOf(h); !ok && m.tracker.count(h) < m.threshold {
			return true
		}
	}
	return false
}

// evictOne evicts the next victim and returns its hash. The caller has
// checked that some block is evictable.
func (m *Manager) evictOne() kvblock.Hash {
	from := listT1
	if m.arc {
		t1, t2 := m.lists[listT1].n, m.lists[listT2].n
		switch {
		case m.count[listT1] >= m.target && t1 > 0:
		case t2 > 0:
			from = listT2
		}
	}
	s := m.lists[from].head
	if s == nilNode {
		panic("offload: evictOne with nothing evictable")
	}
	h := m.hash[s]
	m.unlink(s)
	m.count[from]--
	m.member[s] = listNone
	delete(m.index, h)
	m.free = append(m.free, Slot(s))
	if m.arc {
		ghost := listB1
		if from == listT2 {
			ghost = listB2
		}
		m.addGhost(ghost, h)
	}
	return h
}

// addGhost remembers an evicted hash in B1 or B2, forgetting that list's
// oldest ghost if it is at capacity.
func (m *Manager) addGhost(l listID, h kvblock.Hash) {
	if m.lists[l].n >= int(m.numBlocks) {
		m.dropGhost(m.lists[l].head)
	}
	g := m.freeGhost[len(m.freeGhost)-1]
	m.freeGhost = m.freeGhost[:len(m.freeGhost)-1]
	m.hash[g] = h
	m.member[g] = l
	m.count[l]++
	m.links.pushBack(&m.lists[l], g)
	m.index[h] = g
}

func (m *Manager) dropGhost(g int32) {
	l := m.member[g]
	m.links.remove(&m.lists[l], g)
	m.count[l]--
	m.member[g] = listNone
	delete(m.index, m.hash[g])
	m.freeGhost = append(m.freeGhost, g)
}

// CompleteStore ends the stores of hashes (a StorePlan's Hashes, or part of
// them). With ok, the blocks become ready and evictable, the first block
// most recent, and one BlockStored event lists them in input order. Without
// ok, they are removed and their slots freed, with no event (nothing was
// announced). Completing a block that is not being stored panics.
func (m *Manager) CompleteStore(hashes []kvblock.Hash, ok bool) {
	m.version++
	for _, h := range hashes {
		s, present := m.slotOf(h)
		if !present || m.pins[s] != notReady {
			panic(fmt.Sprintf("offload: CompleteStore of block %x which is not being stored", h))
		}
	}
	if !ok {
		for _, h := range hashes {
			s, present := m.slotOf(h)
			if !present {
				panic(fmt.Sprintf("offload: CompleteStore of block %x twice in one call", h))
			}
			m.count[m.member[s]]--
			m.member[s] = listNone
			m.pins[s] = 0
			delete(m.index, h)
			m.free = append(m.free, Slot(s))
		}
		return
	}
	for i := len(hashes) - 1; i >= 0; i-- {
		s, _ := m.slotOf(hashes[i])
		if m.pins[s] != notReady {
			panic(fmt.Sprintf("offload: CompleteStore of block %x twice in one call", hashes[i]))
		}
		m.pins[s] = 0
		m.link(s)
	}
	if len(hashes) > 0 {
		m.events = append(m.events, m.event(kvblock.BlockStored, append([]kvblock.Hash(nil), hashes...)))
	}
}

// Remove drops a ready block with no load in flight from the tier and
// records a BlockRemoved event for it: the caller found its record missing
// or corrupt (a failed load), so a later Lookup must not offer it again. It
// returns false and changes nothing when h is absent, being stored or being
// loaded. With ARC the hash does not become a ghost: losing a record says
// nothing about the access pattern.
func (m *Manager) Remove(h kvblock.Hash) bool {
	m.version++
	s, ok := m.slotOf(h)
	if !ok || !m.evictable(s) {
		return false
	}
	m.unlink(s)
	m.count[m.member[s]]--
	m.member[s] = listNone
	delete(m.index, h)
	m.free = append(m.free, Slot(s))
	m.events = append(m.events, m.event(kvblock.BlockRemoved, []kvblock.Hash{h}))
	return true
}

func (m *Manager) event(k kvblock.EventKind, hashes []kvblock.Hash) kvblock.Event {
	// Like vLLM's offloading events, these carry no tokens and no parent:
	// the tier knows hashes only.
	return kvblock.Event{Kind: k, Hashes: hashes, BlockSize: m.cfg.BlockSizeTokens, Medium: m.cfg.Medium}
}

// TakeEvents returns the recorded events and empties the outbox. The caller
// owns the slice.
func (m *Manager) TakeEvents() []kvblock.Event {
	ev := m.events
	m.events = nil
	return ev
}

// link appends an evictable slot at the most recent end of its list.
func (m *Manager) link(s int32) { m.links.pushBack(&m.lists[m.member[s]], s) }

func (m *Manager) unlink(s int32) { m.links.remove(&m.lists[m.member[s]], s) }

// Check verifies the manager's state, as CheckFull does, when it changed
// since the last check that passed; on an unchanged manager it returns nil
// at once (every method that changes the state counts a version, as
// kvblock.Pool.Check does). A simulator can so check every tier after
// every instant at the cost of the instants that changed it.
func (m *Manager) Check() error {
	if m.checkedOK && m.checked == m.version {
		return nil
	}
	m.checkedOK = false
	if err := m.CheckFull(); err != nil {
		return err
	}
	m.checked, m.checkedOK = m.version, true
	return nil
}

// CheckFull verifies the manager's bookkeeping: the free stack and the present
// blocks partition the slots; the index names exactly the present blocks
// and ghosts; each list is well linked and holds exactly the evictable
// blocks (ready, no pins) of its kind, so no pinned or unready block can be
// evicted; membership counts match; ghost lists and the ARC target are
// within capacity; the reuse tracker is within its bound. It costs
// O(NumBlocks + MaxTrackerSize) and returns the first violation.
func (m *Manager) CheckFull() error {
	n := int(m.numBlocks)
	if got := len(m.free) + m.Len(); got != n {
		return fmt.Errorf("offload: free %d + present %d != capacity %d", len(m.free), m.Len(), n)
	}
	if len(m.scratchFree) != n {
		m.scratchFree = make([]bool, n)
		m.scratchLinked = make([]bool, len(m.hash))
	}
	isFree, linked := m.scratchFree, m.scratchLinked
	clear(isFree)
	clear(linked)
	for _, s := range m.free {
		if s < 0 || int(s) >= n {
			return fmt.Errorf("offload: free slot %d out of range", s)
		}
		if isFree[s] {
			return fmt.Errorf("offload: slot %d twice in the free stack", s)
		}
		isFree[s] = true
		if m.member[s] != listNone {
			return fmt.Errorf("offload: free slot %d is in list %s", s, listNames[m.member[s]])
		}
	}
	for l := listT1; l < numLists; l++ {
		seen := 0
		for i, prev := m.lists[l].head, nilNode; i != nilNode; prev, i = i, m.links.next[i] {
			if m.links.prev[i] != prev {
				return fmt.Errorf("offload: list %s link broken at node %d", listNames[l], i)
			}
			if linked[i] {
				return fmt.Errorf("offload: node %d linked twice", i)
			}
			linked[i] = true
			if m.member[i] != l {
				return fmt.Errorf("offload: node %d in list %s but member of %s", i, listNames[l], listNames[m.member[i]])
			}
			if seen++; seen > len(m.hash) {
				return fmt.Errorf("offload: list %s has a cycle", listNames[l])
			}
			if m.lists[l].tail == i && m.links.next[i] != nilNode {
				return fmt.Errorf("offload: list %s tail %d has a successor", listNames[l], i)
			}
		}
		if seen != m.lists[l].n {
			return fmt.Errorf("offload: list %s has %d nodes, counted %d", listNames[l], seen, m.lists[l].n)
		}
	}
	var members [numLists]int
	for s := range n {
		l := m.member[s]
		members[l]++
		if isFree[s] {
			continue
		}
		if l != listT1 && (l != listT2 || !m.arc) {
			return fmt.Errorf("offload: present slot %d is in list %s", s, listNames[l])
		}
		if id, ok := m.index[m.hash[s]]; !ok || id != int32(s) {
			return fmt.Errorf("offload: index does not map %x to its slot %d", m.hash[s], s)
		}
		switch {
		case m.pins[s] < notReady:
			return fmt.Errorf("offload: slot %d has pins %d", s, m.pins[s])
		case m.pins[s] == notReady && l != listT1:
			return fmt.Errorf("offload: slot %d is being stored but in %s", s, listNames[l])
		case m.evictable(int32(s)) != linked[s]:
			return fmt.Errorf("offload: slot %d pins %d, linked %v: the lists must hold exactly the evictable blocks", s, m.pins[s], linked[s])
		}
	}
	ghosts := 0
	for g := n; g < len(m.hash); g++ {
		l := m.member[g]
		members[l]++
		if l == listNone {
			continue
		}
		ghosts++
		if l != listB1 && l != listB2 {
			return fmt.Errorf("offload: ghost node %d is in list %s", g, listNames[l])
		}
		if !linked[g] {
			return fmt.Errorf("offload: ghost node %d is not linked", g)
		}
		if id, ok := m.index[m.hash[g]]; !ok || id != int32(g) {
			return fmt.Errorf("offload: index does not map ghost %x to node %d", m.hash[g], g)
		}
	}
	members[listNone] = 0
	if members != m.count {
		return fmt.Errorf("offload: list members %v, recorded %v", members, m.count)
	}
	if len(m.index) != m.Len()+ghosts {
		return fmt.Errorf("offload: index has %d entries, %d present + %d ghosts", len(m.index), m.Len(), ghosts)
	}
	if m.arc {
		if len(m.freeGhost)+ghosts != 2*n {
			return fmt.Errorf("offload: %d free ghost nodes + %d ghosts != %d", len(m.freeGhost), ghosts, 2*n)
		}
		if m.count[listB1] > n || m.count[listB2] > n {
			return fmt.Errorf("offload: ghost lists B1 %d, B2 %d over capacity %d", m.count[listB1], m.count[listB2], n)
		}
	} else if ghosts != 0 || m.count[listT2] != 0 {
		return fmt.Errorf("offload: LRU manager has %d ghosts and %d T2 blocks", ghosts, m.count[listT2])
	}
	if m.target < 0 || m.target > n {
		return fmt.Errorf("offload: ARC target %d outside [0, %d]", m.target, n)
	}
	if len(m.seen) != 0 {
		return fmt.Errorf("offload: PrepareStore left %d entries in its scratch set", len(m.seen))
	}
	return m.tracker.check()
}
