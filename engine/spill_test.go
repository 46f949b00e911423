package engine

import (
	"bytes"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/kvlease/kvlease/clock"
	"github.com/kvlease/kvlease/kvblock"
	"github.com/kvlease/kvlease/model"
	synth "github.com/kvlease/kvlease/model/synth"
	"github.com/kvlease/kvlease/offload"
	"github.com/kvlease/kvlease/offload/tier"
	"github.com/kvlease/kvlease/sched"
	"github.com/kvlease/kvlease/wire"
	"github.com/kvlease/kvlease/xfer"
)

// spillP is a prefill core with a host-memory tier and a lease spill
// policy, driven instant by instant: its copies run when the test says.
type spillP struct {
	t      *testing.T
	core   *Core
	exec   *synth.Executor
	store  tier.Store
	now    clock.Instant
	stores []offload.StoreWork
	loads  []offload.LoadWork
	msgs   []xfer.Envelope
	reads  []xfer.ReadWork
	// autoStore runs stores as soon as a step queues them; noCheck skips
	// the core's checks (while the test holds pool blocks itself).
	autoStore, noCheck bool
}

const spillSecret = "spill secret"

func newSpillP(t *testing.T, pol offload.LeaseSpillPolicy, poolBlocks int) *spillP {
	t.Helper()
	prof, _ := synth.LookupProfile("tiny")
	xc := xfer.DefaultConfig(xfer.PolicyLease).WithLease(3 * time.Second)
	xc.ClaimTimeout = 0
	oc := offload.DefaultConfig([]offload.TierConfig{{Medium: offload.MediumCPU, Blocks: 64}})
	oc.Policy = offload.PreemptionOnly // stores nothing by itself: only spills do
	oc.LeaseSpill = pol
	pc := kvblock.Config{NumBlocks: poolBlocks, BlockSizeTokens: 16, BytesPerToken: prof.BytesPerToken()}
	core := NewCore(Config{
		Pool: pc, Sched: sched.DefaultConfig(),
		MaxModelLen: prof.MaxModelLen, VocabSize: prof.VocabSize, EOS: prof.EOS,
		RecentFinished: 16, Role: RolePrefill, EngineID: "p", Transfer: &xc, Secret: []byte(spillSecret),
		Offload: &oc,
	}, rand.New(rand.NewPCG(5, 6)))
	g, err := tier.GeometryOf(oc.Tiers[0], pc)
	if err != nil {
		t.Fatal(err)
	}
	st, err := tier.NewMemory(g)
	if err != nil {
		t.Fatal(err)
	}
	return &spillP{t: t, core: core, exec: synth.New(prof, core.Pool(), 9), store: st}
}

// step steps the core once (executing its batch at once), keeps its work,
// and checks it.
func (h *spillP) step() {
	h.t.Helper()
	rd := h.core.Step(h.now)
	h.stores = append(h.stores, rd.Stores...)
	h.loads = append(h.loads, rd.Loads...)
	h.msgs = append(h.msgs, rd.Messages...)
	h.reads = append(h.reads, rd.Reads...)
	if rd.Batch != nil {
		var res model.StepResult
		h.exec.Execute(rd.Batch, &res)
		h.now = h.now.Add(res.Duration)
		h.core.Complete(h.now, &res)
	}
	if h.noCheck {
		return
	}
	if err := h.core.Check(); err != nil {
		h.t.Fatal(err)
	}
}

// prefill runs a remote-decode prefill of prompt to its lease.
func (h *spillP) prefill(id string, prompt []int32) *xfer.Grant {
	h.t.Helper()
	if res := h.core.Add(h.now, &Request{ID: id, Prompt: prompt, MaxTokens: 1, RemoteDecode: true}); res != Accepted {
		h.t.Fatal(res)
	}
	for range 100 {
		rd := h.core.Step(h.now)
		h.stores = append(h.stores, rd.Stores...)
		if h.autoStore {
			h.runStores()
		}
		for _, o := range rd.Outputs {
			if o.Finished && o.ID == id {
				if o.Grant == nil {
					h.t.Fatalf("%s: no grant", id)
				}
				h.core.Delivered(h.now, id, true)
				return o.Grant
			}
		}
		if rd.Batch != nil {
			var res model.StepResult
			h.exec.Execute(rd.Batch, &res)
			h.now = h.now.Add(res.Duration)
			h.core.Complete(h.now, &res)
		}
	}
	h.t.Fatalf("%s: prefill did not finish", id)
	return nil
}

// runStores runs the queued stores against the tier and reports them.
func (h *spillP) runStores() {
	for _, w := range h.stores {
		c := tier.Run(h.store, tier.StoreJob(h.core.Pool(), w))
		h.core.StoreDone(h.now, w.ID, c.Copied)
	}
	h.stores = nil
}

// runLoads runs the queued loads (copied = -1: all of them succeed;
// otherwise each reports copied blocks).
func (h *spillP) runLoads(copied int) {
	for _, w := range h.loads {
		c := tier.Run(h.store, tier.LoadJob(h.core.Pool(), w))
		n := c.Copied
		if copied >= 0 {
			n = min(n, copied)
		}
		h.core.LoadDone(h.now, w.ID, n)
	}
	h.loads = nil
}

// session authenticates D session s.
func (h *spillP) session(s xfer.SessionID) {
	h.t.Helper()
	h.core.PeerAccepted(h.now, s)
	h.core.PeerMessage(h.now, s, &wire.Hello{Version: wire.Version, EngineID: "d", Nonce: [16]byte{1}})
	h.step()
	var nonce [16]byte
	for _, e := range h.msgs {
		if a, ok := e.Msg.(*wire.HelloAck); ok {
			nonce = a.Nonce
		}
	}
	h.core.PeerMessage(h.now, s, &wire.Auth{MAC: wire.ComputeMAC([]byte(spillSecret), wire.RoleD, nonce, "p", "d")})
	h.step()
	h.msgs = nil
}

// evictAll makes the pool reuse every block no hold keeps: it allocates
// them all, overwrites their KV and frees them (as new requests would).
func (h *spillP) evictAll() {
	pool := h.core.Pool()
	hold := pool.NewHold(kvblock.HoldRequest, 1<<40)
	if !pool.Allocate(hold, pool.NumAvailable()) {
		h.t.Fatal("allocation failed")
	}
	for _, b := range pool.Blocks(hold) {
		for i := range pool.Digests(b) {
			pool.Digests(b)[i] = 0xdead
		}
		clear(pool.Bytes(b))
	}
	pool.Release(hold)
}

type blockCopy struct {
	checksum uint64
	data     []byte
}

// snapshot copies the KV of the lease's blocks as granted.
func (h *spillP) snapshot(g *xfer.Grant) []blockCopy {
	pool := h.core.Pool()
	var out []blockCopy
	for i, b := range g.BlockIDs {
		filled := min(16, g.NumTokens-i*16)
		out = append(out, blockCopy{kvblock.Checksum(pool.Digests(b)[:filled]), slices.Clone(pool.Bytes(b)[:filled*pool.Config().BytesPerToken])})
	}
	return out
}

func spillPrompt(seed, n int) []int32 {
	p := make([]int32, n)
	for i := range p {
		p[i] = int32(60 + (seed*13+i*5)%40)
	}
	return p
}

// TestS26SpilledLeaseReadFromTier (docs/scenarios.md S26, core level): a
// leased, unread lease is spilled under policy always — stored under a
// store hold, then its primary copies dropped — the pool reuses them, and
// D's READ is served after the blocks are loaded back from the tier, with
// the bytes and checksums of the prefill; the read pins the lease while it
// waits and streams; the tier copies go with the lease.
func TestS26SpilledLeaseReadFromTier(t *testing.T) {
	h := newSpillP(t, offload.LeaseSpillAlways, 32)
	g := h.prefill("a", spillPrompt(1, 40)) // blocks 0, 1 full; 2 partial
	want := h.snapshot(g)
	pool := h.core.Pool()
	p := h.core.Producer()

	h.step() // the spill decision: a store of the two full blocks
	if len(h.stores) != 1 || len(h.stores[0].Blocks) != 2 {
		t.Fatalf("stores %+v, want one of the lease's 2 full blocks", h.stores)
	}
	if info, _ := p.Lease(g.Lease); info.Spilled != 0 || info.Blocks != 3 {
		t.Fatalf("lease before its store ended: %+v", info)
	}
	// The store in flight holds the blocks (and so does the lease).
	for _, b := range h.stores[0].Blocks {
		if pool.Refs(b) != 2 {
			t.Fatalf("block %d has %d holds during its spill store, want 2", b, pool.Refs(b))
		}
	}
	h.runStores()
	info, _ := p.Lease(g.Lease)
	if info.Spilled != 2 || info.Blocks != 1 {
		t.Fatalf("lease after its spill: %+v, want 2 spilled and 1 held", info)
	}
	if n := h.core.Offload().LeasePinned(uint64(g.Lease)); n != 2 {
		t.Fatalf("%d tier blocks pinned for the lease, want 2", n)
	}
	h.evictAll()
	if err := h.core.Check(); err != nil {
		t.Fatal(err)
	}

	h.session(1)
	h.core.PeerMessage(h.now, 1, &wire.Read{ReadID: 1, Lease: g.Lease, Token: g.Token, Indexes: []uint32{0, 1, 2}})
	h.step()
	if len(h.reads) != 0 || len(h.loads) != 1 || len(h.loads[0].Blocks) != 2 {
		t.Fatalf("reads %d, loads %+v: want the read waiting for one load of 2 blocks", len(h.reads), h.loads)
	}
	if info, _ := p.Lease(g.Lease); info.Reads != 1 {
		t.Fatalf("a read waiting for its restore does not pin the lease: %+v", info)
	}
	// The lease cannot end under the waiting read: an abort is decided
	// and takes effect when the read ends.
	h.core.Abort(h.now, "a")
	if info, live := p.Lease(g.Lease); !live || info.Pending != wire.ReasonAborted {
		t.Fatalf("abort during the restore: live %v %+v", live, info)
	}
	h.runLoads(-1)
	h.step()
	if len(h.reads) != 1 {
		t.Fatalf("%d reads after the restore, want 1", len(h.reads))
	}
	w := h.reads[0]
	for i, b := range w.Blocks {
		if b.Checksum != want[i].checksum || !bytes.Equal(b.Data, want[i].data) {
			t.Fatalf("block %d served from the tier differs from the prefill's", i)
		}
		if !p.Resident(g.Lease, int(b.Index)) {
			t.Fatalf("block %d streamed while the lease does not hold it", i)
		}
	}
	if n := h.core.Offload().LeasePinned(uint64(g.Lease)); n != 0 {
		t.Fatalf("%d tier blocks still pinned once the lease holds its blocks again", n)
	}
	h.core.ReadFinished(h.now, 1, 1, true)
	h.step()
	if _, live := p.Lease(g.Lease); live {
		t.Fatal("the aborted lease outlived its read")
	}
	if pool.NumHeld() != 0 || !h.core.Offload().Idle() {
		t.Fatalf("held %d blocks, offload idle %v", pool.NumHeld(), h.core.Offload().Idle())
	}
	st := h.core.Offload().Stats()
	if st.LeaseSpilledBlocks != 2 || st.LeaseRestoreLoadedBlocks != 2 || st.LeasePinnedBlocks != 0 {
		t.Fatalf("stats %+v", st)
	}
}

// TestS26SpillWaitsForRead: a read that starts while the spill store is in
// flight keeps the lease's primary copies — the store's end pins nothing
// and drops nothing — and a lease released while spilled leaves no tier
// pin; a restore the pool has no room for waits (the read pinned), and
// after a heartbeat interval answers READ_END busy, the blocks staying in
// the tier.
func TestS26SpillWaitsForRead(t *testing.T) {
	h := newSpillP(t, offload.LeaseSpillAlways, 16)
	g := h.prefill("a", spillPrompt(2, 48)) // 3 full blocks
	p := h.core.Producer()
	h.step()
	if len(h.stores) != 1 {
		t.Fatalf("stores %+v", h.stores)
	}
	h.session(1)
	h.core.PeerMessage(h.now, 1, &wire.Read{ReadID: 1, Lease: g.Lease, Token: g.Token, Indexes: []uint32{0, 1, 2}})
	h.step()
	if len(h.reads) != 1 {
		t.Fatalf("%d reads, want the read served from the pool at once", len(h.reads))
	}
	h.runStores() // the store ends while the read streams
	if info, _ := p.Lease(g.Lease); info.Spilled != 0 || info.Blocks != 3 {
		t.Fatalf("the spill dropped blocks under a read: %+v", info)
	}
	if n := h.core.Offload().LeasePinned(uint64(g.Lease)); n != 0 {
		t.Fatalf("%d tier blocks pinned for a lease that did not spill", n)
	}
	h.core.ReadFinished(h.now, 1, 1, true)
	h.core.PeerMessage(h.now, 1, &wire.Release{Lease: g.Lease, Token: g.Token, Reason: wire.ReasonReadDone})
	h.step()

	// A second lease spills (its blocks are in the tier already: pinned at
	// once), the pool fills, its read finds no room, then it is released.
	g2 := h.prefill("b", spillPrompt(2, 48))
	h.step()
	h.runStores()
	info, _ := p.Lease(g2.Lease)
	if info.Spilled == 0 {
		t.Fatalf("second lease not spilled: %+v", info)
	}
	spilled := info.Spilled
	pool := h.core.Pool()
	filler := pool.NewHold(kvblock.HoldRequest, 1<<40)
	pool.Allocate(filler, pool.NumAvailable())
	h.noCheck = true
	h.core.PeerMessage(h.now, 1, &wire.Read{ReadID: 2, Lease: g2.Lease, Token: g2.Token, Indexes: []uint32{0, 1, 2}})
	h.msgs = nil
	h.step()
	if info, _ := p.Lease(g2.Lease); info.Reads != 1 || len(h.loads) != 0 || len(h.msgs) != 0 {
		t.Fatalf("restore without room: %+v, %d loads, %d messages: want the read waiting", info, len(h.loads), len(h.msgs))
	}
	if d := h.core.NextDeadline(); d > h.now.Add(h.core.Config().Transfer.HeartbeatInterval) {
		t.Fatalf("next deadline %v: the waiting restore's bound is not in it", d)
	}
	h.now = h.now.Add(h.core.Config().Transfer.HeartbeatInterval)
	h.step()
	busy := false
	for _, e := range h.msgs {
		if end, ok := e.Msg.(*wire.ReadEnd); ok && end.ReadID == 2 && end.Status == wire.StatusBusy {
			busy = true
		}
	}
	if !busy || len(h.loads) != 0 {
		t.Fatalf("restore without room for a heartbeat interval: busy %v, loads %d", busy, len(h.loads))
	}
	if info, _ := p.Lease(g2.Lease); info.Reads != 0 || info.Spilled != spilled {
		t.Fatalf("after the busy read: %+v", info)
	}
	pool.Release(filler)
	h.noCheck = false
	h.core.PeerMessage(h.now, 1, &wire.Release{Lease: g2.Lease, Token: g2.Token, Reason: wire.ReasonRejected})
	h.step()
	if _, live := p.Lease(g2.Lease); live {
		t.Fatal("released lease still live")
	}
	if st := h.core.Offload().Stats(); st.LeasePinnedBlocks != 0 || pool.NumHeld() != 0 {
		t.Fatalf("after the release: %d tier blocks pinned, %d pool blocks held", st.LeasePinnedBlocks, pool.NumHeld())
	}
}

// TestSpillPressureOnlyUnderPressure: policy pressure spills nothing while
// the pool has room, and spills the newest lease first once the pool is
// short.
func TestSpillPressureOnlyUnderPressure(t *testing.T) {
	h := newSpillP(t, offload.LeaseSpillPressure, 24) // SpillAheadBlocks 1
	h.autoStore = true
	g1 := h.prefill("a", spillPrompt(3, 48))
	h.step()
	if len(h.stores) != 0 {
		t.Fatalf("spilled with %d blocks available", h.core.Pool().NumAvailable())
	}
	var gs []*xfer.Grant
	for i := range 10 {
		gs = append(gs, h.prefill(string(rune('b'+i)), spillPrompt(4+i, 48)))
		h.step()
	}
	p := h.core.Producer()
	if info, _ := p.Lease(g1.Lease); info.Spilled != 0 {
		t.Errorf("the oldest lease spilled first: %+v", info)
	}
	spilled := 0
	for _, g := range gs {
		info, _ := p.Lease(g.Lease)
		spilled += info.Spilled
	}
	if spilled == 0 {
		t.Fatalf("nothing spilled with %d blocks available", h.core.Pool().NumAvailable())
	}
}
