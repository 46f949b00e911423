package tier

import (
	"errors"
	"fmt"

	"github.com/kvlease/kvlease/kvblock"
	"github.com/kvlease/kvlease/offload"
)

// Errors of misuse; a miss is not an error.
var (
	// ErrSlot: a slot outside [0, NumBlocks).
	ErrSlot = errors.New("tier: slot out of range")
	// ErrSize: buffers whose lengths differ from the tier's geometry.
	ErrSize = errors.New("tier: buffer size does not match the tier's block geometry")
	// ErrMiss: a load found no valid record (Runner completions only).
	ErrMiss = errors.New("tier: block missing or corrupt")
)

// Store is a tier's block storage, indexed by the Manager's slots. Both
// implementations are safe for concurrent use on distinct slots, and for
// concurrent reads of one slot.
type Store interface {
	// Write stores one block in slot, replacing what was there. digests
	// and data must have the geometry's lengths. Write does not retain
	// them.
	Write(slot offload.Slot, hash kvblock.Hash, digests []uint64, data []byte) error
	// Read copies the block in slot into digests and data if the slot
	// holds a valid record of hash. ok is false for a miss; err is non-nil
	// only for misuse (ErrSlot, ErrSize) or an I/O failure, and then ok is
	// false too.
	Read(slot offload.Slot, hash kvblock.Hash, digests []uint64, data []byte) (ok bool, err error)
}

// Geometry sizes a tier.
type Geometry struct {
	// NumBlocks is the number of slots (the Manager's NumBlocks).
	NumBlocks int
	// BlockBytes is the KV bytes of one block.
	BlockBytes int
	// DigestsPerBlock is the number of per-token-slot digests of one block
	// (the block size in tokens).
	DigestsPerBlock int
}

const (
	maxBlockBytes      = 1 << 30
	maxDigestsPerBlock = 1 << 16
	maxTierBytes       = 1 << 40
)

// Validate reports the first problem with g.
func (g Geometry) Validate() error {
	switch {
	case g.NumBlocks <= 0 || g.NumBlocks > 1<<28:
		return fmt.Errorf("tier: NumBlocks must be in [1, %d], got %d", 1<<28, g.NumBlocks)
	case g.BlockBytes < 0 || g.BlockBytes > maxBlockBytes:
		return fmt.Errorf("tier: BlockBytes must be in [0, %d], got %d", maxBlockBytes, g.BlockBytes)
	case g.DigestsPerBlock < 0 || g.DigestsPerBlock > maxDigestsPerBlock:
		return fmt.Errorf("tier: DigestsPerBlock must be in [0, %d], got %d", maxDigestsPerBlock, g.DigestsPerBlock)
	case int64(g.NumBlocks)*int64(g.BlockBytes+8*g.DigestsPerBlock) > maxTierBytes:
		return fmt.Errorf("tier: %d blocks × %d bytes is over 1 TiB", g.NumBlocks, g.BlockBytes+8*g.DigestsPerBlock)
	}
	return nil
}

func (g Geometry) check(slot offload.Slot, digests []uint64, data []byte) error {
	if slot < 0 || int(slot) >= g.NumBlocks {
		return fmt.Errorf("%w: %d not in [0, %d)", ErrSlot, slot, g.NumBlocks)
	}
	if len(digests) != g.DigestsPerBlock || len(data) != g.BlockBytes {
		return fmt.Errorf("%w: %d digests and %d bytes, want %d and %d", ErrSize, len(digests), len(data), g.DigestsPerBlock, g.BlockBytes)
	}
	return nil
}

// Memory is a host-memory tier: one arena of NumBlocks × BlockBytes bytes
// and one of NumBlocks × DigestsPerBlock digests, allocated up front.
//
// Safe for concurrent use on distinct slots and for concurrent reads of one
// slot; a write concurrent with another access to the same slot is a
// caller bug (the Manager never allows it) and may serve torn data.
type Memory struct {
	g       Geometry
	arena   []byte
	digests []uint64
	hashes  []kvblock.Hash
	valid   []bool // per slot; distinct elements are distinct variables, so distinct slots do not race
}

// NewMemory allocates a memory tier.
func NewMemory(g Geometry) (*Memory, error) {
	if err := g.Validate(); err != nil {
		return nil, err
	}
	return &Memory{
		g:       g,
		arena:   make([]byte, g.NumBlocks*g.BlockBytes),
		digests: make([]uint64, g.NumBlocks*g.DigestsPerBlock),
		hashes:  make([]kvblock.Hash, g.NumBlocks),
		valid:   make([]bool, g.NumBlocks),
	}, nil
}

// Geometry returns the tier's geometry.
func (m *Memory) Geometry() Geometry { return m.g }

func (m *Memory) block(slot offload.Slot) ([]uint64, []byte) {
	d, b := m.g.DigestsPerBlock, m.g.BlockBytes
	s := int(slot)
	return m.digests[s*d : (s+1)*d], m.arena[s*b : (s+1)*b]
}

// Write implements Store.
func (m *Memory) Write(slot offload.Slot, hash kvblock.Hash, digests []uint64, data []byte) error {
	if err := m.g.check(slot, digests, data); err != nil {
		return err
	}
	d, b := m.block(slot)
	m.valid[slot] = false
	copy(d, digests)
	copy(b, data)
	m.hashes[slot] = hash
	m.valid[slot] = true
	return nil
}

// Read implements Store. It copies into digests and data and allocates
// nothing.
func (m *Memory) Read(slot offload.Slot, hash kvblock.Hash, digests []uint64, data []byte) (bool, error) {
	if err := m.g.check(slot, digests, data); err != nil {
		return false, err
	}
	if !m.valid[slot] || m.hashes[slot] != hash {
		return false, nil
	}
	d, b := m.block(slot)
	copy(digests, d)
	copy(data, b)
	return true, nil
}
