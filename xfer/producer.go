package xfer

import (
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/kvlease/kvlease/clock"
	"github.com/kvlease/kvlease/kvblock"
	"github.com/kvlease/kvlease/wire"
)

// SessionID names one authenticated connection, as the edge numbers them.
type SessionID uint64

// Envelope is a message to send on a session. Close asks the edge to close
// the session after sending it.
type Envelope struct {
	Session SessionID
	Msg     wire.Message
	Close   bool
}

// ReadWork is a read P must stream: one wire.Block per entry of Blocks, then
// a wire.ReadEnd with StatusOK, on Session. The lease stays pinned until the
// edge reports ReadFinished, so the memory Blocks alias does not change
// while the edge copies it out.
type ReadWork struct {
	Session SessionID
	ReadID  uint64
	Lease   wire.LeaseID
	Blocks  []wire.Block // Data and Digests alias the pool
}

// Bytes is the payload size of the read.
func (w *ReadWork) Bytes() int {
	n := 0
	for i := range w.Blocks {
		n += len(w.Blocks[i].Data) + 8*len(w.Blocks[i].Digests)
	}
	return n
}

// Grant is what P tells the client about a new lease, for
// kv_transfer_params.
type Grant struct {
	Lease     wire.LeaseID
	Token     wire.Token
	ExpiresIn time.Duration
	// BlockIDs are P's physical block ids, in prompt order (vLLM's
	// remote_block_ids); D reads them by index.
	BlockIDs  []kvblock.BlockID
	NumTokens int
}

type leaseState struct {
	id        wire.LeaseID
	token     wire.Token
	req       string // the request's external id
	hold      kvblock.HoldID
	numTokens int
	granted   clock.Instant
	deadline  clock.Instant
	// session is the bound D session (0 = unbound); lostAt is when a lost
	// binding releases the lease (clock.Never while the session lives).
	session SessionID
	lostAt  clock.Instant
	// claimBy is when an unclaimed lease is released as unclaimed
	// (Config.ClaimTimeout after the grant); clock.Never once a D session
	// claimed it, or when the policy has no claim deadline.
	claimBy   clock.Instant
	delivered bool
	claimed   bool        // a D presented the token (LeaseClaimed was recorded)
	reads     int         // reads in flight: they pin the lease
	pending   wire.Reason // a release decided while pinned
	read      bool        // some read completed
	// spill is the lease's spill state (spill.go); nil until it first
	// spills.
	spill *leaseSpill
	// faultAt is when an injected fault ends the lease with faultReason
	// (LeaseFaults), clock.Never without one; refuseReads, stallReads and
	// corruptReads are the lease's other injected faults.
	faultAt      clock.Instant
	faultReason  wire.Reason
	refuseReads  bool
	stallReads   time.Duration
	corruptReads int
	// hix is the lease's index in the due heap, -1 when it is not there
	// (a pinned lease whose release is decided waits for its reads, not for
	// a deadline).
	hix int
}

// due is when l ends unless something moves it: the earliest of its
// deadline, the end of the peer grace after its session was lost, and its
// claim deadline while unclaimed (xfer/doc.go, "Expiry").
func (l *leaseState) due() clock.Instant {
	return min(l.deadline, l.lostAt, l.claimBy, l.faultAt)
}

// ProducerStats are P's lease counters.
type ProducerStats struct {
	Granted  uint64
	Refused  uint64 // finished prefills that got no lease (MaxLeases)
	Released map[wire.Reason]uint64
	Active   int
	// BlockSeconds held by leases, by whether any read completed: the unread
	// part is stranded memory.
	BlockSecondsRead, BlockSecondsUnread float64
	ReadsServed, ReadsRefused            uint64
	// ReadsBusy counts READs refused with StatusBusy because
	// MaxServedReads reads were in flight.
	ReadsBusy uint64
	// FreedReads counts READs of a lease that had ended (or that P does
	// not know, having restarted) under PolicyVLLM: in vLLM they read
	// freed blocks, which may hold another request's KV by then — silent
	// corruption. Refused here, like every such READ under the other
	// policies, where they are not counted as such (D is told).
	FreedReads   uint64
	BytesServed  uint64
	AuthFailures uint64
	// Lease spill (spill.go): SpilledLeases and SpilledBlocks count the
	// spills whose primary copies were dropped, RestoredLeases the
	// restores that brought them back for a read.
	SpilledLeases, SpilledBlocks, RestoredLeases uint64
	// ClaimedAfterRelease counts leases that a decode engine named in a
	// RENEW or a READ after P had released them, by the reason they were
	// released for (each lease once, while P remembers it: Tombstones).
	// Such a D falls back (lease_gone) and recomputes the prompt:
	// unclaimed here is a claim deadline too short for that D's path.
	ClaimedAfterRelease map[wire.Reason]uint64
}

// Producer is P's side of the transfer: it grants leases on finished
// prefills, renews, binds, serves reads and releases them. It is pure and
// not safe for concurrent use; the engine core owns it.
type Producer struct {
	cfg      Config
	pool     *kvblock.Pool
	rng      *rand.Rand
	engineID string
	secret   []byte

	leases   map[wire.LeaseID]*leaseState
	byReq    map[string]*leaseState
	due      dueHeap // one entry per live lease not waiting for its reads
	tomb     tombstones
	sessions map[SessionID]*pSession
	reads    map[readKey]*leaseState

	out  []Envelope
	work []ReadWork
	// stalled are reads held back by an injected fault (LeaseFaults),
	// each pinning its lease; bounded by MaxServedReads.
	stalled []stalledRead
	stats   ProducerStats
	hookFn  func(now clock.Instant, l wire.LeaseID, r wire.Reason)
	// levents are the lease events since TakeLeaseEvents (Config.LeaseEvents).
	levents []LeaseEvent

	restores  []wire.LeaseID        // restores asked for (spill.go)
	unspillFn func(id wire.LeaseID) // a lease with spilled blocks ended

	chkPins map[wire.LeaseID]int // Check's scratch

	// claims is the longest claim latency (grant to first claim, judged
	// on arrival) in the current window of LeaseDuration and in the one
	// before it (ClaimTimeout).
	claims struct {
		start     clock.Instant
		cur, prev time.Duration
	}
}

// observeClaim records that a lease granted lat before now was claimed.
func (p *Producer) observeClaim(now clock.Instant, lat time.Duration) {
	p.rollClaims(now)
	p.claims.cur = max(p.claims.cur, lat)
}

// rollClaims moves the claim windows (aligned at multiples of
// LeaseDuration from the first) to now's: cur and prev then cover at
// least [now − LeaseDuration, now].
func (p *Producer) rollClaims(now clock.Instant) {
	w := p.cfg.LeaseDuration
	k := now.Sub(p.claims.start) / w
	if k <= 0 {
		return
	}
	if k == 1 {
		p.claims.prev = p.claims.cur
	} else {
		p.claims.prev = 0
	}
	p.claims.cur = 0
	p.claims.start = p.claims.start.Add(k * w)
}

// ClaimTimeout is the claim deadline of a lease granted now (0 without
// one): twice the longest claim latency — grant to a decoder's first
// RENEW or READ reaching P — observed over the last LeaseDuration or
// more, within [Config.ClaimTimeout, Config.MaxClaimTimeout]. A lease's
// decoder is not known before its claim, so the deadline follows the
// slowest decoder's claims: a path whose claims slow down (loss, jitter,
// a congested proxy) keeps leases that will be claimed rather than
// freeing them as unclaimed, and the deadline comes back to the
// configured one a lease or two after the claims speed up again.
func (p *Producer) ClaimTimeout(now clock.Instant) time.Duration {
	if !p.cfg.ClaimsLeases() {
		return 0
	}
	p.rollClaims(now)
	if MutateFixedClaimTimeout {
		return p.cfg.ClaimTimeout
	}
	return min(max(2*max(p.claims.cur, p.claims.prev), p.cfg.ClaimTimeout), p.cfg.MaxClaimTimeout())
}

type readKey struct {
	s  SessionID
	id uint64
}

type pSession struct {
	peer   string // D's engine id, once authenticated
	nonce  [16]byte
	dNonce [16]byte
	state  uint8 // 0 awaiting HELLO, 1 awaiting AUTH, 2 authenticated
	// told is when P last answered the session (its handshake, a READ,
	// a RELEASE, a RENEW_ACK): under Config.RenewsWhenDue a RENEW whose
	// leases were all renewed gets an empty RENEW_ACK only when P has
	// been silent towards D for Config.renewAckEvery, so that D knows P
	// still hears it (Consumer: a renewal counts in D's view of the
	// deadline only while P was heard recently).
	told clock.Instant
}

// NewProducer returns P's transfer core for engine engineID. secret is the
// cluster secret for the handshake; rng draws lease ids, tokens and nonces.
func NewProducer(cfg Config, pool *kvblock.Pool, engineID string, secret []byte, rng *rand.Rand) *Producer {
	if err := cfg.Validate(); err != nil {
		panic(err)
	}
	return &Producer{
		cfg: cfg, pool: pool, rng: rng, engineID: engineID, secret: secret,
		leases:   make(map[wire.LeaseID]*leaseState),
		byReq:    make(map[string]*leaseState),
		tomb:     newTombstones(cfg.Tombstones),
		sessions: make(map[SessionID]*pSession),
		reads:    make(map[readKey]*leaseState),
		stats:    ProducerStats{Released: make(map[wire.Reason]uint64), ClaimedAfterRelease: make(map[wire.Reason]uint64)},
	}
}

// Config returns the configuration.
func (p *Producer) Config() Config { return p.cfg }

// OnRelease sets a function called for every released lease (for tests and
// the simulator's invariant checks).
func (p *Producer) OnRelease(fn func(now clock.Instant, l wire.LeaseID, r wire.Reason)) {
	p.hookFn = fn
}

// Grant takes a lease on a finished prefill's blocks: the first numTokens
// token slots of blocks. It returns false when MaxLeases leases are live
// (the caller frees the blocks and answers without a lease).
func (p *Producer) Grant(now clock.Instant, req string, blocks []kvblock.BlockID, numTokens int) (Grant, bool) {
	if len(p.leases) >= p.cfg.MaxLeases || len(blocks) == 0 {
		p.stats.Refused++
		return Grant{}, false
	}
	// A request id reused while an older lease of that id lives (the
	// first request finished, a client sent another with the same
	// X-Request-Id): both leases live on. The id names the newest for
	// the callers that only have an id (Delivered, Abort: the abort
	// endpoint); the first request's own handler addresses its lease by
	// its LeaseID (DeliveredLease, AbortLease), so nothing done for one
	// request reaches the other's lease (S29).
	l := &leaseState{req: req, numTokens: numTokens, granted: now, lostAt: clock.Never, claimBy: clock.Never, faultAt: clock.Never, hix: -1}
	if p.cfg.ClaimsLeases() {
		l.claimBy = now.Add(p.ClaimTimeout(now))
	}
	for {
		l.id = wire.LeaseID(p.rng.Uint64())
		if _, taken := p.leases[l.id]; !taken && l.id != 0 && !p.tomb.has(l.id) {
			break
		}
	}
	for i := 0; i < len(l.token); i += 8 {
		v := p.rng.Uint64()
		for j := 0; j < 8; j++ {
			l.token[i+j] = byte(v >> (8 * j))
		}
	}
	l.deadline = now.Add(p.cfg.LeaseDuration)
	l.hold = p.pool.NewHold(kvblock.HoldLease, uint64(l.id))
	p.pool.Share(l.hold, blocks)
	p.leases[l.id] = l
	p.byReq[req] = l
	p.schedule(l)
	p.stats.Granted++
	p.leaseEvent(LeaseEvent{Kind: LeaseGranted, Lease: l.id, Request: req, Blocks: len(blocks), Tokens: numTokens,
		ExpiresIn: p.cfg.LeaseDuration})
	// BlockIDs is a copy: the pool reuses a released hold's slice.
	ids := append([]kvblock.BlockID(nil), p.pool.Blocks(l.hold)...)
	return Grant{Lease: l.id, Token: l.token, ExpiresIn: p.cfg.LeaseDuration, BlockIDs: ids, NumTokens: numTokens}, true
}

// Delivered reports whether the response carrying req's lease token reached
// the client. If it did not, nobody can ever present the token, so the lease
// is released at once (reason undelivered) under PolicyLease. req names the
// newest lease granted under that id; DeliveredLease names one exactly.
func (p *Producer) Delivered(now clock.Instant, req string, ok bool) {
	if l, found := p.byReq[req]; found {
		p.delivered(now, l, ok)
	}
}

// DeliveredLease is Delivered for the lease id granted (Grant.Lease): it
// never touches another lease, whatever request ids they carry. A lease
// already released is a no-op.
func (p *Producer) DeliveredLease(now clock.Instant, id wire.LeaseID, ok bool) {
	if l, found := p.leases[id]; found {
		p.delivered(now, l, ok)
	}
}

func (p *Producer) delivered(now clock.Instant, l *leaseState, ok bool) {
	if !p.liveAfterDue(now, l) {
		return
	}
	if ok {
		l.delivered = true
		return
	}
	if p.cfg.HonoursAbort() && !l.delivered {
		p.end(now, l, wire.ReasonUndelivered)
	}
}

// Abort handles a client abort of a request that already finished on P.
// Before the token was delivered it is the undelivered case; after, the
// lease is revoked (reason aborted), right after any read in flight ends.
// It reports whether a live lease was found (a lease already due is
// expired instead, and reports false unless a read pins it, as it would had
// Tick run first).
// Under the vLLM-like policies the abort is ignored, as vLLM does. req names
// the newest lease granted under that id; AbortLease names one exactly.
func (p *Producer) Abort(now clock.Instant, req string) bool {
	l, found := p.byReq[req]
	if !found {
		return false
	}
	return p.abort(now, l)
}

// AbortLease is Abort for the lease id granted (Grant.Lease): it never
// touches another lease. It reports what Abort reports.
func (p *Producer) AbortLease(now clock.Instant, id wire.LeaseID) bool {
	l, found := p.leases[id]
	if !found {
		return false
	}
	return p.abort(now, l)
}

func (p *Producer) abort(now clock.Instant, l *leaseState) bool {
	if MutateNaiveAbort {
		// A naive engine frees the finished request's blocks on abort:
		// whatever the policy, pinned or bound, and tells nobody.
		l.session = 0
		p.release(now, l, wire.ReasonAborted)
		return true
	}
	if !p.liveAfterDue(now, l) {
		return false
	}
	if !p.cfg.HonoursAbort() {
		return true
	}
	if l.delivered {
		p.end(now, l, wire.ReasonAborted)
	} else {
		p.end(now, l, wire.ReasonUndelivered)
	}
	return true
}

// Tick releases every lease whose deadline (or lost-session grace) has
// passed, whatever the order of deadlines: the due heap holds one entry per
// lease keyed by its current due instant, re-keyed whenever a renewal,
// binding or session loss moves it, so a renewed lease never hides an
// expired one. A pinned lease that falls due leaves the heap and is
// released when its reads end.
func (p *Producer) Tick(now clock.Instant) {
	if len(p.stalled) > 0 {
		p.releaseStalled(now)
	}
	if MutateSweepStopsEarly {
		p.grantOrderSweep(now)
		return
	}
	for len(p.due) > 0 && p.due[0].at <= now {
		l := p.due[0].l
		if d := l.due(); d > now {
			// A renewal moved it later since it was keyed: re-key it
			// now that it surfaced (see schedule).
			p.due[0].at = d
			p.due.down(0)
			continue
		}
		p.end(now, l, p.dueReason(now, l))
		if l.hix >= 0 {
			panic(fmt.Sprintf("xfer: lease %d stayed due after its end", l.id))
		}
	}
}

// dueReason is why due lease l ends at now: nobody claimed it in time,
// its session was lost, or its deadline passed. (A lease with a lost
// session was claimed, so the first two never compete; the claim timeout
// is shorter than the lease, and leases only extend, so an unclaimed
// lease's claim deadline comes first.)
func (p *Producer) dueReason(now clock.Instant, l *leaseState) wire.Reason {
	if l.faultAt <= now && l.faultAt <= min(l.deadline, l.lostAt, l.claimBy) {
		return l.faultReason // injected (LeaseFaults): first when it is due first
	}
	if l.claimBy <= now && l.claimBy <= l.deadline {
		return wire.ReasonUnclaimed
	}
	if l.lostAt <= now && l.lostAt <= l.deadline {
		return wire.ReasonPeerLost
	}
	return wire.ReasonExpired
}

// NextDeadline is the earliest instant at which Tick has work, or
// clock.Never.
func (p *Producer) NextDeadline() clock.Instant {
	// Settle the lazy re-keys that reached the root (see schedule), so the
	// answer is exact: an edge's timer never fires for a lease that was
	// renewed meanwhile.
	for len(p.due) > 0 {
		if d := p.due[0].l.due(); d > p.due[0].at {
			p.due[0].at = d
			p.due.down(0)
			continue
		}
		return min(p.due[0].at, p.nextStalled())
	}
	return p.nextStalled()
}

// schedule puts l in the due heap at its current due instant, or moves it
// there.
func (p *Producer) schedule(l *leaseState) {
	if l.pending != 0 {
		return // waits for its reads, not for a deadline
	}
	d := l.due()
	if l.hix < 0 {
		p.due.push(dueEntry{at: d, l: l})
		return
	}
	// A due instant that moved earlier (a lost session) is re-keyed at
	// once. One that moved later (a renewal, a binding) keeps its old key
	// until it surfaces at the root, where Tick re-keys it: a batched RENEW
	// of n leases costs O(n), not O(n log n) heap moves, and the heap
	// still never holds a key later than its lease's due instant, so no
	// expiry is missed.
	if e := &p.due[l.hix]; d < e.at {
		e.at = d
		p.due.up(l.hix)
	}
}

// unschedule takes l out of the due heap.
func (p *Producer) unschedule(l *leaseState) {
	if l.hix >= 0 {
		p.due.remove(l.hix)
	}
}

// end releases l now, or marks it to be released when its reads end.
func (p *Producer) end(now clock.Instant, l *leaseState, r wire.Reason) {
	if l.reads > 0 && !MutateReleaseIgnoresRead {
		if l.pending == 0 {
			l.pending = r
		}
		p.unschedule(l) // its fate is decided; only the reads remain
		return
	}
	p.release(now, l, r)
}

func (p *Producer) release(now clock.Instant, l *leaseState, r wire.Reason) {
	if _, live := p.leases[l.id]; !live {
		panic(fmt.Sprintf("xfer: lease %d released twice", l.id))
	}
	if l.reads > 0 && !MutateReleaseIgnoresRead && !MutateNaiveAbort {
		panic(fmt.Sprintf("xfer: lease %d released with %d reads in flight", l.id, l.reads))
	}
	// Tell a bound session that the lease is gone unless it asked for it.
	if l.session != 0 && r != wire.ReasonReadDone && r != wire.ReasonRejected && r != wire.ReasonFallback && r != wire.ReasonPeerLost {
		if s, ok := p.sessions[l.session]; ok && s.state == stateAuthed {
			p.out = append(p.out, Envelope{Session: l.session, Msg: &wire.Revoked{Lease: l.id, Reason: r}})
		}
	}
	blocks := p.numBlocks(l) // spilled blocks count: the lease still has them
	p.pool.Release(l.hold)
	if l.spill != nil && l.spill.n > 0 && p.unspillFn != nil {
		p.unspillFn(l.id) // their tier copies go with the lease
	}
	p.unschedule(l)
	delete(p.leases, l.id)
	if p.byReq[l.req] == l {
		delete(p.byReq, l.req)
	}
	p.tomb.add(l.id, r)
	bs := float64(blocks) * now.Sub(l.granted).Seconds()
	if l.read {
		p.stats.BlockSecondsRead += bs
	} else {
		p.stats.BlockSecondsUnread += bs
	}
	p.stats.Released[r]++
	p.leaseEvent(LeaseEvent{Kind: LeaseReleased, Lease: l.id, Request: l.req, Reason: r, Held: now.Sub(l.granted), Read: l.read})
	if p.hookFn != nil {
		p.hookFn(now, l.id, r)
	}
}

// ReleaseAll ends every lease with reason r (engine shutdown at its drain
// deadline); leases with reads in flight end when the reads do. A lease
// already due ends as expired (or peer_lost), not with r.
func (p *Producer) ReleaseAll(now clock.Instant, r wire.Reason) {
	for _, l := range p.sortedLeases() {
		if !p.expireDue(now, l) {
			p.end(now, l, r)
		}
	}
}

func (p *Producer) sortedLeases() []*leaseState {
	ls := make([]*leaseState, 0, len(p.leases))
	for _, l := range p.leases {
		ls = append(ls, l)
	}
	// Deterministic order: by lease id.
	for i := 1; i < len(ls); i++ {
		for j := i; j > 0 && ls[j].id < ls[j-1].id; j-- {
			ls[j], ls[j-1] = ls[j-1], ls[j]
		}
	}
	return ls
}

// LeaseInfo describes a live lease, for checks and tests.
type LeaseInfo struct {
	Req      string
	Deadline clock.Instant
	// LostAt is when the lease goes because its session was lost
	// (clock.Never while bound to a live session or unbound).
	LostAt clock.Instant
	// ClaimBy is when the lease goes as unclaimed (clock.Never once a D
	// session claimed it, or without a claim deadline).
	ClaimBy clock.Instant
	// FaultAt is when an injected fault ends the lease with FaultReason
	// (LeaseFaults; clock.Never without one).
	FaultAt     clock.Instant
	FaultReason wire.Reason
	Session     SessionID
	Reads       int         // reads in flight (pins)
	Pending     wire.Reason // a release decided while pinned, or 0
	Delivered   bool
	// Blocks are in the pool under the lease's hold; Spilled are in an
	// offload tier (their primary copies dropped).
	Blocks, Spilled int
}

// Lease describes live lease id; false once it is released (or never was).
func (p *Producer) Lease(id wire.LeaseID) (LeaseInfo, bool) {
	l, ok := p.leases[id]
	if !ok {
		return LeaseInfo{}, false
	}
	info := LeaseInfo{Req: l.req, Deadline: l.deadline, LostAt: l.lostAt, ClaimBy: l.claimBy, FaultAt: l.faultAt, FaultReason: l.faultReason,
		Session: l.session, Reads: l.reads,
		Pending: l.pending, Delivered: l.delivered, Blocks: p.pool.Len(l.hold)}
	if l.spill != nil {
		info.Spilled = l.spill.n
	}
	return info, true
}

// NumLeases is the number of live leases.
func (p *Producer) NumLeases() int { return len(p.leases) }

// Reading reports whether read readID of session s is in flight (the edge
// streams only reads that are: a read whose session ended is over).
func (p *Producer) Reading(s SessionID, readID uint64) bool {
	_, ok := p.reads[readKey{s, readID}]
	return ok
}

// NumPinned is the number of reads in flight (each pins its lease).
func (p *Producer) NumPinned() int { return len(p.reads) }

// Stats returns the counters (the map is the producer's own; read only).
func (p *Producer) Stats() ProducerStats {
	s := p.stats
	s.Active = len(p.leases)
	return s
}

// Take returns the messages to send and the reads to stream since the last
// Take. The caller owns the slices.
func (p *Producer) Take() ([]Envelope, []ReadWork) {
	out, work := p.out, p.work
	p.out, p.work = nil, nil
	return out, work
}

// Check verifies the producer's bookkeeping against the pool: every live
// lease holds a live lease hold, every lease hold belongs to a live lease,
// and pins match the reads in flight.
func (p *Producer) Check() error {
	if p.chkPins == nil {
		p.chkPins = make(map[wire.LeaseID]int)
	}
	pins := p.chkPins // scratch: a check allocates nothing in steady state
	clear(pins)
	for _, l := range p.reads {
		pins[l.id]++
	}
	for id, l := range p.leases {
		if !p.pool.Live(l.hold) || p.pool.Kind(l.hold) != kvblock.HoldLease {
			return fmt.Errorf("xfer: lease %d has no live lease hold", id)
		}
		if pins[id] != l.reads {
			return fmt.Errorf("xfer: lease %d counts %d reads, %d in flight", id, l.reads, pins[id])
		}
		if err := p.checkSpill(l); err != nil {
			return err
		}
	}
	for h := range p.pool.Holds() {
		if h.Kind != kvblock.HoldLease {
			continue
		}
		if l, ok := p.leases[wire.LeaseID(h.Owner)]; !ok || l.hold != h.ID {
			return fmt.Errorf("xfer: orphan lease hold %#x for lease %d", uint64(h.ID), h.Owner)
		}
	}
	return nil
}

// CheckDue verifies the expiry sweep. Called right after Tick(now) (an
// engine core's Step), it reports a live lease that was due at or before
// now and is neither released nor waiting for its reads to end. It scans
// every lease, not the due heap the sweep uses, so a sweep or heap bug
// cannot hide from it. O(live leases).
func (p *Producer) CheckDue(now clock.Instant) error {
	var worst *leaseState
	for _, l := range p.leases {
		if l.pending == 0 && l.due() <= now && (worst == nil || l.due() < worst.due() || (l.due() == worst.due() && l.id < worst.id)) {
			worst = l
		}
	}
	if worst != nil {
		return fmt.Errorf("xfer: lease %d was due at %v and is still live at %v (deadline %v, lost at %v, claim by %v)",
			worst.id, worst.due(), now, worst.deadline, worst.lostAt, worst.claimBy)
	}
	return nil
}

// --- sessions and messages ---

const (
	stateHello uint8 = iota
	stateAuth
	stateAuthed
)
