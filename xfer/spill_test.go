package xfer

import (
	"bytes"
	"slices"
	"testing"

	"github.com/kvlease/kvlease/kvblock"
	"github.com/kvlease/kvlease/wire"
)

// spillGrant grants req (tokens slots) with its full blocks cached, as a
// prefill's are, and records every OnUnspill call in unspilled.
func spillGrant(e *pEnv, req string, tokens int, unspilled *[]wire.LeaseID) Grant {
	e.t.Helper()
	g := e.grant(req, tokens)
	for i, b := range g.BlockIDs[:tokens/testBlockSize] {
		e.pool.Cache(b, kvblock.Hash{byte(len(req)), req[len(req)-1], byte(i)})
	}
	e.p.OnUnspill(func(id wire.LeaseID) { *unspilled = append(*unspilled, id) })
	return g
}

// spill runs lease g's spill to its end as the engine core does (the
// offload side played by the test) and returns the KV bytes of the
// spilled blocks, the tier's copy.
func spill(e *pEnv, g Grant) [][]byte {
	e.t.Helper()
	cands := e.p.SpillCandidates(nil, 1<<20)
	if len(cands) != 1 || cands[0].Lease != g.Lease {
		e.t.Fatalf("candidates %+v", cands)
	}
	var tier [][]byte
	for _, b := range cands[0].Blocks {
		tier = append(tier, slices.Clone(e.pool.Bytes(b)))
	}
	e.p.SpillStarted(g.Lease, cands[0].Indexes)
	if !e.p.SpillReady(g.Lease) {
		e.t.Fatal("an unread lease is not ready to spill")
	}
	e.p.SpillDone(e.now, g.Lease)
	e.check()
	return tier
}

// TestSpillReadWaitsAndExpiryWaitsForIt: a READ of a spilled lease pins it
// and waits for the restore; the lease falls due meanwhile, which is
// decided but takes effect only when the read ends; the restored blocks
// stream the prefill's bytes from the pool; the lease, resident again, ends
// expired with no tier copy left to release.
func TestSpillReadWaitsAndExpiryWaitsForIt(t *testing.T) {
	e := newPEnv(t, testConfig(PolicyLease))
	var unspilled []wire.LeaseID
	g := spillGrant(e, "r1", 3*testBlockSize+2, &unspilled)
	tier := spill(e, g)
	if info, _ := e.p.Lease(g.Lease); info.Spilled != 3 || info.Blocks != 1 {
		t.Fatalf("spilled lease %+v", info)
	}
	for ix := range 3 {
		if e.p.Resident(g.Lease, ix) {
			t.Fatalf("spilled block %d still resident", ix)
		}
	}
	s := e.connect()
	if out := e.send(s, &wire.Read{ReadID: 1, Lease: g.Lease, Token: g.Token, Indexes: []uint32{0, 1, 2, 3}}); len(out) != 0 {
		t.Fatalf("a read waiting for its restore answered %+v", out)
	}
	if r := e.p.TakeRestores(); len(r) != 1 || r[0] != g.Lease {
		t.Fatalf("restores %v", r)
	}
	if w := e.takeReads(); len(w) != 0 {
		t.Fatalf("a read of spilled blocks streamed before its restore: %+v", w)
	}
	e.advance(e.now.Add(g.ExpiresIn + 1))
	if info, live := e.p.Lease(g.Lease); !live || info.Pending != wire.ReasonExpired || info.Reads != 1 {
		t.Fatalf("lease due during its restore: live %v %+v", live, info)
	}
	// The restore: new blocks with the tier's copy.
	h := e.pool.NewHold(kvblock.HoldLoad, 1)
	if !e.pool.Allocate(h, 3) {
		t.Fatal("pool full")
	}
	restored := slices.Clone(e.pool.Blocks(h))
	for i, b := range restored {
		copy(e.pool.Bytes(b), tier[i])
		for k := range testBlockSize {
			e.pool.Digests(b)[k] = kvblock.SlotDigest(e.pool.SlotBytes(b, k))
		}
	}
	if !e.p.Restored(e.now, g.Lease, restored) {
		t.Fatal("Restored refused a live lease")
	}
	e.pool.Release(h)
	e.check()
	w := e.takeReads()
	if len(w) != 1 || len(w[0].Blocks) != 4 {
		t.Fatalf("reads after the restore: %+v", w)
	}
	for _, b := range w[0].Blocks {
		for pos := range int(b.Tokens) {
			want := make([]byte, testBPT)
			for i := range want {
				want[i] = slotByte("r1", int(b.Index)*testBlockSize+pos, i)
			}
			if !bytes.Equal(b.Data[pos*testBPT:(pos+1)*testBPT], want) {
				t.Fatalf("block %d slot %d streams other bytes than the prefill's", b.Index, pos)
			}
		}
		if !e.p.Resident(g.Lease, int(b.Index)) {
			t.Fatalf("block %d streamed while not resident", b.Index)
		}
	}
	e.p.ReadFinished(e.now, s, 1, true)
	e.check()
	if r, ok := released(e, g.Lease); !ok || r.reason != wire.ReasonExpired {
		t.Fatalf("release %+v %v, want expired when the read ended", r, ok)
	}
	if len(unspilled) != 0 {
		t.Fatalf("unspilled %v: a restored lease has no tier copy to release", unspilled)
	}
}

// TestSpillReleasedLeaseFencedAndUnspilled: a spilled lease released by
// D's RELEASE has its tier copies released with it (OnUnspill, once), and
// a later READ gets "released", never data or a restore.
func TestSpillReleasedLeaseFencedAndUnspilled(t *testing.T) {
	e := newPEnv(t, testConfig(PolicyLease))
	var unspilled []wire.LeaseID
	g := spillGrant(e, "r2", 2*testBlockSize, &unspilled)
	spill(e, g)
	s := e.connect()
	e.send(s, &wire.Release{Lease: g.Lease, Token: g.Token, Reason: wire.ReasonRejected})
	if len(unspilled) != 1 || unspilled[0] != g.Lease {
		t.Fatalf("unspilled %v, want the lease once", unspilled)
	}
	out := e.send(s, &wire.Read{ReadID: 2, Lease: g.Lease, Token: g.Token, Indexes: []uint32{0}})
	if end, ok := only[*wire.ReadEnd](t, out); !ok || end.Status != wire.StatusReleased {
		t.Fatalf("READ of a released spilled lease: %+v", out)
	}
	if r := e.p.TakeRestores(); len(r) != 0 {
		t.Fatalf("a released lease asked for a restore: %v", r)
	}
}

// TestSpillAbandonedUnderRead: a read that starts while the spill store
// runs keeps the lease's primary copies (SpillReady says no; the spill
// fails and nothing is dropped); a busy restore ends its reads busy and
// leaves the blocks spilled.
func TestSpillAbandonedUnderRead(t *testing.T) {
	e := newPEnv(t, testConfig(PolicyLease))
	var unspilled []wire.LeaseID
	g := spillGrant(e, "r3", 2*testBlockSize, &unspilled)
	cands := e.p.SpillCandidates(nil, 1<<20)
	e.p.SpillStarted(g.Lease, cands[0].Indexes)
	s := e.connect()
	e.send(s, &wire.Read{ReadID: 1, Lease: g.Lease, Token: g.Token, Indexes: []uint32{0, 1}})
	if w := e.takeReads(); len(w) != 1 {
		t.Fatalf("a read during the spill store was not served from the pool: %+v", w)
	}
	if e.p.SpillReady(g.Lease) {
		t.Fatal("spill ready under a read")
	}
	e.p.SpillFailed(g.Lease)
	e.check()
	if info, _ := e.p.Lease(g.Lease); info.Spilled != 0 || info.Blocks != 2 {
		t.Fatalf("lease after the abandoned spill: %+v", info)
	}
	if c := e.p.SpillCandidates(nil, 1<<20); len(c) != 0 {
		t.Fatalf("a lease being read is a spill candidate: %+v", c)
	}
	e.p.ReadFinished(e.now, s, 1, false) // D will read again
	spill(e, g)
	e.send(s, &wire.Read{ReadID: 2, Lease: g.Lease, Token: g.Token, Indexes: []uint32{0, 1}})
	e.p.TakeRestores()
	e.p.RestoreFailed(e.now, g.Lease, wire.StatusBusy)
	out, _ := e.p.Take()
	if end, ok := only[*wire.ReadEnd](t, out); !ok || end.Status != wire.StatusBusy {
		t.Fatalf("busy restore answered %+v", out)
	}
	e.check()
	if info, _ := e.p.Lease(g.Lease); info.Reads != 0 || info.Spilled != 2 {
		t.Fatalf("after the busy restore: %+v", info)
	}
}
