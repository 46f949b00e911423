package tier

import (
	"fmt"
	"sync"

	"github.com/kvlease/kvlease/kvblock"
	"github.com/kvlease/kvlease/offload"
)

// StoreJob is the Runner job of a store: copies that read the pool blocks'
// digests and KV bytes. Build it on the goroutine that owns the pool; the
// Coordinator's store hold keeps that memory unchanged until the job's
// completion is applied.
func StoreJob(pool *kvblock.Pool, w offload.StoreWork) Job {
	return job(pool, uint64(w.ID), JobStore, w.Blocks, w.Hashes, w.Slots)
}

// LoadJob is the Runner job of a load: copies that write the pool blocks'
// digests and KV bytes. The Coordinator's load hold keeps the target blocks
// out of everybody else's hands until the completion is applied.
func LoadJob(pool *kvblock.Pool, w offload.LoadWork) Job {
	return job(pool, uint64(w.ID), JobLoad, w.Blocks, w.Hashes, w.Slots)
}

func job(pool *kvblock.Pool, id uint64, k JobKind, blocks []kvblock.BlockID, hashes []kvblock.Hash, slots []offload.Slot) Job {
	j := Job{ID: id, Kind: k, Copies: make([]Copy, len(blocks))}
	for i, b := range blocks {
		j.Copies[i] = Copy{Slot: slots[i], Hash: hashes[i], Digests: pool.Digests(b), Data: pool.Bytes(b)}
		if j.Copies[i].Data == nil {
			j.Copies[i].Data = []byte{} // digest-only pool: a tier of 0-byte blocks
		}
	}
	return j
}

// Apply feeds a completion back into the coordinator (StoreDone or
// LoadDone by its kind) and returns what LoadDone returns (zero for a
// store): the request whose loads all ended, and whether it is ready to be
// scheduled. It is for a coordinator driven on its own: with lease spill,
// completions go through the engine core (engine.Core.StoreDone and
// LoadDone), which hands a spill's or a restore's end to the lease too.
func Apply(c *offload.Coordinator, comp Completion) (req uint64, ready bool) {
	switch comp.Kind {
	case JobStore:
		c.StoreDone(offload.WorkID(comp.JobID), comp.Copied)
	case JobLoad:
		return c.LoadDone(offload.WorkID(comp.JobID), comp.Copied)
	default:
		panic(fmt.Sprintf("tier: completion of job %d has bad kind %d", comp.JobID, comp.Kind))
	}
	return 0, false
}

// GeometryOf returns the geometry of tier t for blocks of a pool
// with configuration pc, sized as the Coordinator sizes that tier's
// Manager.
func GeometryOf(t offload.TierConfig, pc kvblock.Config) (Geometry, error) {
	n, err := t.NumBlocks(pc)
	if err != nil {
		return Geometry{}, err
	}
	return Geometry{NumBlocks: n, BlockBytes: pc.BlockSizeTokens * pc.BytesPerToken, DigestsPerBlock: pc.BlockSizeTokens}, nil
}

// Set is the edge of an offload.Coordinator: a Store and a Runner per tier
// of its configuration, and one channel of completions. The engine's node
// drives it:
//
//	set, err := tier.Open(cfg, poolCfg, tier.DefaultRunnerConfig())
//	...
//	w := coord.Take()                        // in the core's step
//	for _, c := range set.Submit(pool, &w) { // jobs that could not be queued
//		tier.Apply(coord, c)
//	}
//	...
//	c := <-set.Completions()                 // later, as an input of the core
//	if req, ready := tier.Apply(coord, c); ready { ... schedule req ... }
//
// Submit and Close are safe for concurrent use; Submit and Apply must run
// on the goroutine that owns the pool and the coordinator.
type Set struct {
	stores  []Store
	runners []*Runner
	out     chan Completion
	wg      sync.WaitGroup
	close   sync.Once
}

// Open opens every tier of cfg for blocks of a pool configured as pc: a
// Memory for a cpu tier, a Disk in its Path for a disk tier. Each tier gets
// a Runner with rc.
func Open(cfg offload.Config, pc kvblock.Config, rc RunnerConfig) (*Set, error) {
	if err := cfg.ValidateFor(pc); err != nil {
		return nil, err
	}
	if err := rc.Validate(); err != nil {
		return nil, err
	}
	s := &Set{out: make(chan Completion, rc.QueueLen*len(cfg.Tiers))}
	for _, t := range cfg.Tiers {
		g, err := GeometryOf(t, pc)
		if err != nil {
			return nil, err
		}
		var st Store
		if t.Medium == offload.MediumDisk {
			st, err = NewDisk(DiskConfig{Dir: t.Path, Geometry: g})
		} else {
			st, err = NewMemory(g)
		}
		if err != nil {
			s.Close()
			return nil, fmt.Errorf("--offload: %s tier: %w", t, err)
		}
		r, err := NewRunner(st, rc)
		if err != nil {
			s.Close()
			return nil, err
		}
		s.stores = append(s.stores, st)
		s.runners = append(s.runners, r)
	}
	// Fan in: one forwarder per runner; the last to finish closes out.
	s.wg.Add(len(s.runners))
	for _, r := range s.runners {
		go func() {
			defer s.wg.Done()
			for c := range r.Completions() {
				s.out <- c
			}
		}()
	}
	go func() {
		s.wg.Wait()
		close(s.out)
	}()
	return s, nil
}

// Store returns tier i's store (for tests and operators).
func (s *Set) Store(i int) Store { return s.stores[i] }

// Submit queues the jobs of w's stores and loads on their tiers' runners.
// A job that cannot be queued (ErrQueueFull, ErrClosed) gets a failed
// completion at once, returned to the caller to Apply like any other, so
// every work gets exactly one completion and no hold is left behind.
func (s *Set) Submit(pool *kvblock.Pool, w *offload.Work) []Completion {
	var failed []Completion
	submit := func(tier int, j Job) {
		if err := s.runners[tier].Submit(j); err != nil {
			failed = append(failed, Completion{JobID: j.ID, Kind: j.Kind, Err: err})
		}
	}
	for _, st := range w.Stores {
		submit(st.Tier, StoreJob(pool, st))
	}
	for _, ld := range w.Loads {
		submit(ld.Tier, LoadJob(pool, ld))
	}
	return failed
}

// Completions delivers one Completion per job queued by Submit. It is
// closed after Close, once every runner's completions are in it; keep
// receiving until then, applying each, so that no hold is left.
func (s *Set) Completions() <-chan Completion { return s.out }

// Close stops the runners (queued jobs are cancelled with ErrClosed,
// running ones finish) and returns without waiting for Completions to be
// drained. It is idempotent.
func (s *Set) Close() {
	s.close.Do(func() {
		for _, r := range s.runners {
			r.Close()
		}
		if len(s.runners) == 0 {
			close(s.out)
		}
	})
}
