package xfer

import (
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sort"
	"time"

	"github.com/kvlease/kvlease/clock"
	"github.com/kvlease/kvlease/kvblock"
	"github.com/kvlease/kvlease/wire"
)

// Remote is what D knows of a remote prefix, from kv_transfer_params.
type Remote struct {
	EngineID string
	// Addr is P's transfer address (remote_host:remote_port).
	Addr  string
	Lease wire.LeaseID
	Token wire.Token
	// NumBlocks is len(remote_block_ids); NumTokens the prompt tokens they
	// hold.
	NumBlocks int
	NumTokens int
	ExpiresIn time.Duration
	// Faults are injected faults on the pull (the fault API); zero
	// normally.
	Faults PullFaults
}

// PullRequest is a decode request waiting for its remote prefix.
type PullRequest struct {
	Req    uint64 // the engine's request number (owner of the request hold)
	Prompt []int32
	Extras kvblock.Extras
	Remote Remote
}

// ActionKind says what the edge must do.
type ActionKind uint8

const (
	// ActionDial: open a connection to Addr and report Dialed or DialFailed.
	ActionDial ActionKind = iota + 1
	// ActionSend: send Msg on Session.
	ActionSend
	// ActionClose: close Session.
	ActionClose
)

// Action is work for D's transport edge.
type Action struct {
	Kind    ActionKind
	Addr    string
	Session SessionID
	Msg     wire.Message
}

// Outcome of a pull, as Done reports it.
type Outcome uint8

const (
	// Pulled: the request holds its full prefix; schedule it.
	Pulled Outcome = iota + 1
	// FellBack: the prefix could not be had; recompute it locally.
	FellBack
	// Failed: the prefix could not be had and the policy is fail.
	Failed
	// Dropped: the request was aborted while waiting or reading.
	Dropped
)

// Done reports a request leaving the consumer.
type Done struct {
	Req     uint64
	Outcome Outcome
	// Hold is the request hold over the whole prefix (Pulled only).
	Hold kvblock.HoldID
	// NumComputed is the number of prompt positions with KV (Pulled only):
	// all but the last, which the decoder recomputes to sample.
	NumComputed int
	// Why explains a fallback or failure (FellBack, Failed); zero otherwise.
	Why FallbackReason
	// Peer is P's transfer address (Remote.Addr).
	Peer     string
	Bytes    int
	Duration time.Duration
}

// ConsumerStats are D's transfer counters.
type ConsumerStats struct {
	Pulls        uint64
	PulledBlocks uint64
	HitBlocks    uint64 // blocks D already had in its own prefix cache
	Bytes        uint64
	Fallbacks    map[FallbackReason]uint64
	Failures     map[FailureKind]uint64 // transfer failures by kind, retried or not
	ReleasesSent map[wire.Reason]uint64
	RenewsSent   uint64
	Waiting      int
	Reading      int
	// PeersFailing counts, by failure kind, the prefill endpoints whose
	// most recent connection attempt failed (a dial or handshake failure,
	// FailureUnauthenticated for a wrong cluster secret) within
	// FailingWindow, with no successful handshake since: an alert on
	// kvlease_transfer_peers_failing{reason="unauthenticated"} > 0 catches a
	// misconfigured secret however few requests fail. Nil when none.
	PeersFailing map[FailureKind]uint64
}

const (
	pullQueued uint8 = iota
	pullReading
)

type pull struct {
	PullRequest
	peer     *peer
	deadline clock.Instant // our view of the lease's expiry
	state    uint8
	aborted  bool
	inbound  kvblock.HoldID
	hits     int      // leading blocks D had cached
	need     []uint32 // indexes still to receive
	got      []bool   // by index - hits
	readID   uint64
	sent     bool // READ sent for readID
	// readDeadline: a sent read with no news (block or end) by then has
	// failed (P hung or the stream stalled).
	readDeadline clock.Instant
	attempts     int
	// held: a queued pull does not start before notBefore
	// (PullFaults.Stall, and Fallback, which acts at it); false once
	// passed.
	held      bool
	notBefore clock.Instant
	started   clock.Instant
	bytes     int
	// claimed: a RENEW on the peer's current session named the lease
	// (Config.RenewsWhenDue: later heartbeats name it only when a renewal
	// extends it); enqueued is when Enqueue took it.
	claimed  bool
	enqueued clock.Instant

	// seq numbers the pulls in enqueue order: the queue's order, and the
	// tie-break of their timers. prev/next link the queue, pprev/pnext
	// the peer's pulls, both in that order.
	seq                      uint64
	prev, next, pprev, pnext *pull
	// due is the earliest of the pull's timers (timerDue), its key in
	// Consumer.timers; renewAt is when a heartbeat to its peer must carry
	// a RENEW for it (see renewDue), its key in peer.renew. tpos and rpos
	// are its positions in those heaps.
	due, renewAt clock.Instant
	tpos, rpos   int
	// unsent: a read not sent yet, counted in peer.nunsent; listed: in
	// peer.unsentList.
	unsent, listed bool
}

type peerState uint8

const (
	peerIdle peerState = iota
	peerDialing
	peerHello
	peerAuth
	peerUp
)

type relNotice struct {
	lease    wire.LeaseID
	token    wire.Token
	reason   wire.Reason
	deadline clock.Instant
	next     clock.Instant
	sent     bool // sent at least once
	// seq numbers the notices in the order they were queued (the order
	// they are sent in); due is their key in peer.noteHeap (noteDue),
	// pos their position there.
	seq uint64
	due clock.Instant
	pos int
}

type peer struct {
	addr      string
	engineID  string // learned in the handshake
	state     peerState
	session   SessionID
	nonce     [16]byte
	retryAt   clock.Instant // no dial before this
	heartbeat clock.Instant // next RENEW
	// renewAll: the next RENEW names every lease of the peer (a new
	// session: it rebinds them), not only the due ones.
	renewAll bool
	// heard is when a message from P last arrived on the session.
	heard    clock.Instant
	renewSeq uint64
	// notes are the RELEASE notices waiting for P's acknowledgement, by
	// lease, and noteHeap the same by when each is next due.
	notes    map[wire.LeaseID]*relNotice
	noteHeap timerHeap[*relNotice]
	// dialFailures counts failed dials and handshakes since the last
	// completed handshake; at MaxReadAttempts the pulls of this peer fall
	// back.
	dialFailures int
	// handshakeBy: a handshake not complete by then has failed.
	handshakeBy clock.Instant
	// head and tail link the peer's pulls (npulls of them) in enqueue
	// order; nunsent of them are reads not sent yet, each of them in
	// unsentList (which may also hold pulls that were sent or left since).
	head, tail *pull
	npulls     int
	nunsent    int
	unsentList []*pull
	// renew holds the peer's pulls by renewAt: a heartbeat carries a
	// RENEW when its least is due.
	renew timerHeap[*pull]
}

// Consumer is D's side of the transfer. Pure; not safe for concurrent use.
type Consumer struct {
	cfg      Config
	pool     *kvblock.Pool
	rng      *rand.Rand
	engineID string
	secret   []byte

	// head and tail link the pulls (n of them, waiting or reading) in
	// enqueue order: the FIFO in which they start.
	head, tail *pull
	n          int
	// timers holds every pull by due; nheld pulls are held (notBefore).
	timers    timerHeap[*pull]
	seq       uint64 // the last pull or notice numbered
	nheld     int
	dueBuf    []*pull
	noteBuf   []*relNotice
	byReq     map[uint64]*pull
	byRead    map[uint64]*pull
	peers     map[string]*peer
	bySession map[SessionID]*peer
	nextRead  uint64
	reading   int
	notices   int // release notices pending over all peers (≤ MaxWaiting)

	actions []Action
	done    []Done
	stats   ConsumerStats
	hashes  []kvblock.Hash
	hitBuf  []kvblock.BlockID
	// sorted are the peers in the order of addrs (a new slice with it).
	sorted []*peer
	// addrs caches peerAddrs (nil: sort again).
	addrs []string
	// failing records the peers whose last connection attempt failed
	// (PeersFailing), warned rate-limits the warnings logged to log.
	failing map[string]*failing
	warned  map[warnKey]*warnMark
	log     *slog.Logger
}

// NewConsumer returns D's transfer core.
func NewConsumer(cfg Config, pool *kvblock.Pool, engineID string, secret []byte, rng *rand.Rand) *Consumer {
	if err := cfg.Validate(); err != nil {
		panic(err)
	}
	return &Consumer{
		cfg: cfg, pool: pool, rng: rng, engineID: engineID, secret: secret,
		timers:    timerHeap[*pull]{less: dueBefore, pos: func(p *pull) *int { return &p.tpos }},
		byReq:     make(map[uint64]*pull),
		byRead:    make(map[uint64]*pull),
		peers:     make(map[string]*peer),
		bySession: make(map[SessionID]*peer),
		failing:   make(map[string]*failing),
		warned:    make(map[warnKey]*warnMark),
		log:       slog.New(slog.DiscardHandler),
		stats: ConsumerStats{Fallbacks: make(map[FallbackReason]uint64), Failures: make(map[FailureKind]uint64),
			ReleasesSent: make(map[wire.Reason]uint64)},
	}
}

// Config returns the configuration.
func (c *Consumer) Config() Config { return c.cfg }

func (c *Consumer) peer(addr string) *peer {
	p, ok := c.peers[addr]
	if !ok {
		p = &peer{addr: addr, notes: make(map[wire.LeaseID]*relNotice),
			renew:    timerHeap[*pull]{less: renewBefore, pos: func(p *pull) *int { return &p.rpos }},
			noteHeap: timerHeap[*relNotice]{less: noteBefore, pos: func(r *relNotice) *int { return &r.pos }}}
		c.peers[addr] = p
		c.addrs = nil // peerAddrs sorts again
	}
	return p
}

// Enqueue admits a request that waits for its remote prefix. It returns
// false when MaxWaiting requests wait (the caller rejects the request, which
// sends P the rejection).
func (c *Consumer) Enqueue(now clock.Instant, r PullRequest) bool {
	if len(c.byReq) >= c.cfg.MaxWaiting {
		// Full: pulls whose timers fell due leave first, as if Tick had run
		// at now (see expire), so the answer does not depend on it.
		c.expireAll(now)
	}
	if len(c.byReq) >= c.cfg.MaxWaiting {
		return false
	}
	if _, dup := c.byReq[r.Req]; dup {
		panic(fmt.Sprintf("xfer: request %d enqueued twice", r.Req))
	}
	p := &pull{PullRequest: r, peer: c.peer(r.Remote.Addr), deadline: now.Add(r.Remote.ExpiresIn)}
	if !c.cfg.TellsExpiry() {
		p.deadline = clock.Never // vLLM's D keeps no view of a lease's expiry
	}
	c.byReq[r.Req] = p
	if f := r.Remote.Faults; f.Stall > 0 || f.Fallback {
		p.held, p.notBefore = true, now.Add(max(f.Stall, 0))
		if f.Fallback {
			p.notBefore = now
		}
		c.nheld++
	}
	p.enqueued = now
	c.link(p)
	if c.cfg.ClaimsAtOnce() && p.peer.heartbeat > c.claimBy(p) && !r.Remote.Faults.NoHeartbeats {
		p.peer.heartbeat = now // claim the lease (and bind it to us) right away
	}
	return true
}

// Reject tells P that D will never read the lease (D refused the request
// before admitting it). The notice is retried until P acknowledges it or
// the lease would have expired anyway.
func (c *Consumer) Reject(now clock.Instant, r Remote) {
	if !c.cfg.NotifiesRejection() || r.Addr == "" {
		return
	}
	c.notify(now, c.peer(r.Addr), r.Lease, r.Token, wire.ReasonRejected, now.Add(r.ExpiresIn))
}

// notify queues a RELEASE for P, retried every RetryInterval until P
// acknowledges it or deadline (the lease's expiry as D knows it) passes. A
// second notice for the same lease replaces nothing: the first reason
// stands. Pending notices are bounded by MaxWaiting over all peers; beyond
// it a notice is dropped (counted) and P's lease simply expires.
func (c *Consumer) notify(now clock.Instant, p *peer, l wire.LeaseID, t wire.Token, why wire.Reason, deadline clock.Instant) {
	if !sendsReason(why) {
		panic(fmt.Sprintf("xfer: consumer sends RELEASE(%v), not one of ReleaseReasonsSent", why))
	}
	if _, dup := p.notes[l]; dup {
		return
	}
	if c.notices >= c.cfg.MaxWaiting {
		c.stats.Failures[FailureReleaseDropped]++
		return
	}
	c.notices++
	c.seq++
	r := &relNotice{lease: l, token: t, reason: why, deadline: deadline, next: now, seq: c.seq}
	p.notes[l] = r
	c.fixNote(p, r)
}

// Abort drops a request that waits or reads. A reading request is dropped
// when its read ends (D's inbound blocks may still be written until then).
// It reports whether the consumer had the request (false for one whose
// lease D believes expired by now: it falls back as Tick would have made
// it).
func (c *Consumer) Abort(now clock.Instant, req uint64) bool {
	p, ok := c.byReq[req]
	if !ok || c.expire(now, p) {
		return false // gone, or went now as Tick would have made it go
	}
	if p.state == pullReading && p.sent {
		p.aborted = true
		c.touch(p)
		return true
	}
	c.finish(now, p, Dropped, wire.ReasonAborted, 0)
	return true
}

// OwnsSession reports whether s is one of the consumer's connections.
func (c *Consumer) OwnsSession(s SessionID) bool { _, ok := c.bySession[s]; return ok }

// Has reports whether req waits or reads in the consumer.
func (c *Consumer) Has(req uint64) bool { _, ok := c.byReq[req]; return ok }

// Tick advances timers: dials, handshakes, heartbeats, release notices,
// lease deadlines; and, when admit is true (the engine has room), starts
// queued pulls in arrival order within MaxInflightReads and the pool's free
// blocks. Its work is proportional to what is due and what starts, plus
// the number of peers, not to D's queue (consumer_timers.go).
func (c *Consumer) Tick(now clock.Instant, admit bool) {
	c.expireAll(now)
	c.injected(now)
	if admit {
		for p := c.head; p != nil; p = p.next {
			if c.reading >= c.cfg.MaxInflightReads {
				break
			}
			if p.state != pullQueued || p.held {
				continue
			}
			if !c.start(now, p) {
				break // no room: later requests wait too (FIFO)
			}
		}
	}
	c.peerAddrs()
	for _, pr := range c.sorted {
		c.tickPeer(now, pr)
	}
	if len(c.failing) > 0 {
		c.pruneFailing(now)
	}
	if len(c.warned) > 0 {
		c.pruneWarned(now)
	}
}

// peerAddrs returns the peers' addresses, sorted (a map's order must not
// reach the outputs). The slice is cached until the peers change; a change
// makes a new one, so a caller ranging over the old slice is unaffected.
func (c *Consumer) peerAddrs() []string {
	if c.addrs != nil {
		return c.addrs
	}
	addrs := make([]string, 0, len(c.peers))
	for a := range c.peers {
		addrs = append(addrs, a)
	}
	sort.Strings(addrs)
	c.addrs = addrs
	c.sorted = make([]*peer, len(addrs))
	for i, a := range addrs {
		c.sorted[i] = c.peers[a]
	}
	return addrs
}

// start reserves blocks for p's pull: its own cached prefix, and fresh
// blocks for the rest. It returns false when the pool has no room.
func (c *Consumer) start(now clock.Instant, p *pull) bool {
	bs := c.pool.BlockSizeTokens()
	n := p.Remote.NumBlocks
	c.hashes = kvblock.AppendHashes(c.hashes[:0], p.Prompt[:min(len(p.Prompt), p.Remote.NumTokens)], bs, p.Extras)
	c.hitBuf = c.pool.Lookup(c.hitBuf[:0], c.hashes[:min(len(c.hashes), n)])
	hits := len(c.hitBuf)
	avail := c.pool.NumAvailable()
	for _, b := range c.hitBuf {
		if c.pool.Refs(b) == 0 {
			avail--
		}
	}
	if n-hits > avail {
		return false
	}
	p.inbound = c.pool.NewHold(kvblock.HoldInbound, p.Req)
	c.pool.Share(p.inbound, c.hitBuf)
	if !c.pool.Allocate(p.inbound, n-hits) {
		panic("xfer: allocation failed after the availability check")
	}
	p.hits = hits
	p.need = p.need[:0]
	for i := hits; i < n; i++ {
		p.need = append(p.need, uint32(i))
	}
	p.got = make([]bool, n-hits)
	p.state = pullReading
	p.started = now
	c.reading++
	c.stats.HitBlocks += uint64(hits)
	c.newRead(p)
	c.touch(p)
	return true
}

func (c *Consumer) newRead(p *pull) {
	if p.readID != 0 {
		delete(c.byRead, p.readID)
	}
	c.nextRead++
	p.readID = c.nextRead
	p.sent = false
	c.byRead[p.readID] = p
	c.touch(p)
}

func (c *Consumer) send(pr *peer, m wire.Message) {
	c.actions = append(c.actions, Action{Kind: ActionSend, Session: pr.session, Msg: m})
}

func (c *Consumer) sendRead(now clock.Instant, pr *peer, p *pull) {
	c.send(pr, &wire.Read{ReadID: p.readID, Lease: p.Remote.Lease, Token: p.Remote.Token, Indexes: append([]uint32(nil), p.need...)})
	p.sent = true
	p.readDeadline = now.Add(c.cfg.LeaseDuration)
	c.touch(p)
	if len(p.need) == 0 {
		// Everything was cached here: no READ is needed, but P must hear
		// that it can free. Treat it as a completed read.
		delete(c.byRead, p.readID)
		c.actions = c.actions[:len(c.actions)-1]
		c.complete(p.started, p)
	}
}

// complete turns a finished pull into a schedulable request: the inbound
// hold passes to a request hold, the received blocks join the prefix cache,
// and P is told it may free.
func (c *Consumer) complete(now clock.Instant, p *pull) {
	bs := c.pool.BlockSizeTokens()
	blocks := c.pool.Blocks(p.inbound)
	hold := c.pool.NewHold(kvblock.HoldRequest, p.Req)
	c.pool.Share(hold, blocks)
	c.pool.Release(p.inbound)
	p.inbound = 0
	// Cache the received full blocks (only now that they are verified).
	blocks = c.pool.Blocks(hold)
	full := min(p.Remote.NumTokens/bs, len(blocks))
	if full > p.hits {
		c.hashes = kvblock.AppendHashes(c.hashes[:0], p.Prompt[:p.Remote.NumTokens], bs, p.Extras)
		parent := kvblock.RootHash
		if p.hits > 0 {
			parent = c.hashes[p.hits-1]
		}
		c.pool.CacheRunAdapter(blocks[p.hits:full], c.hashes[p.hits:full], parent, p.Prompt[p.hits*bs:full*bs], p.Extras.Adapter)
	}
	c.stats.Pulls++
	c.stats.PulledBlocks += uint64(p.Remote.NumBlocks - p.hits)
	c.stats.Bytes += uint64(p.bytes)
	c.remove(p)
	c.notify(now, p.peer, p.Remote.Lease, p.Remote.Token, wire.ReasonReadDone, p.deadline)
	if p.peer.state == peerUp {
		c.tickPeer(now, p.peer)
	}
	c.done = append(c.done, Done{Req: p.Req, Outcome: Pulled, Hold: hold, NumComputed: p.Remote.NumTokens - 1,
		Bytes: p.bytes, Duration: now.Sub(p.started), Peer: p.Remote.Addr})
}

// finish removes p with an outcome other than Pulled, frees its inbound
// blocks and, when release is set, tells P.
func (c *Consumer) finish(now clock.Instant, p *pull, o Outcome, release wire.Reason, why FallbackReason) {
	if p.inbound != 0 {
		c.pool.Release(p.inbound)
		p.inbound = 0
	}
	c.remove(p)
	if release != 0 && (c.cfg.NotifiesDrop() || release == wire.ReasonReadDone) {
		c.notify(now, p.peer, p.Remote.Lease, p.Remote.Token, release, p.deadline)
	}
	if o == FellBack || o == Failed {
		c.stats.Fallbacks[why]++
	}
	c.done = append(c.done, Done{Req: p.Req, Outcome: o, Why: why, Peer: p.Remote.Addr})
}

func (c *Consumer) remove(p *pull) {
	if p.state == pullReading {
		c.reading--
	}
	delete(c.byReq, p.Req)
	if p.readID != 0 {
		delete(c.byRead, p.readID)
	}
	c.unlink(p)
}

// Take returns the edge's actions and the requests that left the consumer
// since the last Take. The caller owns the slices.
func (c *Consumer) Take() ([]Action, []Done) {
	a, d := c.actions, c.done
	c.actions, c.done = nil, nil
	return a, d
}

// NextDeadline is the earliest instant at which Tick has timer work, or
// clock.Never. O(peers): the pulls' and the notices' timers are heaps.
func (c *Consumer) NextDeadline() clock.Instant {
	t := clock.Never
	if c.timers.len() > 0 {
		t = c.timers.top().due
	}
	c.peerAddrs()
	for _, pr := range c.sorted { // a slice ranges faster than the map
		switch pr.state {
		case peerIdle:
			if len(pr.notes) > 0 || pr.npulls > 0 {
				t = min(t, pr.retryAt)
			}
			if pr.noteHeap.len() > 0 {
				t = min(t, pr.noteHeap.top().due) // their deadlines
			}
		case peerHello, peerAuth:
			t = min(t, pr.handshakeBy)
		case peerUp:
			if c.cfg.Heartbeats() && pr.npulls > 0 {
				t = min(t, pr.heartbeat)
			}
			if pr.noteHeap.len() > 0 {
				t = min(t, pr.noteHeap.top().due) // their next sends and deadlines
			}
		}
	}
	return t
}

// Stats returns the counters (maps are the consumer's own; read only).
func (c *Consumer) Stats() ConsumerStats {
	s := c.stats
	s.Waiting = c.n - c.reading
	s.Reading = c.reading
	if len(c.failing) > 0 {
		s.PeersFailing = make(map[FailureKind]uint64, 2)
		for _, f := range c.failing {
			s.PeersFailing[f.kind]++
		}
	}
	return s
}

// Idle reports whether the consumer has nothing left to do: no request
// waiting or reading and no release notice to deliver.
func (c *Consumer) Idle() bool { return c.n == 0 && c.notices == 0 }

// NumNotices is the number of RELEASE notices waiting for P's
// acknowledgement.
func (c *Consumer) NumNotices() int { return c.notices }

// NumWaiting is the number of requests waiting or reading.
func (c *Consumer) NumWaiting() int { return c.n }

// CheckWait reports a pull still queued at now past MaxQueueWait (its
// request admitted at Enqueue and waiting for room to read): D must have
// released it and recomputed by then. O(waiting pulls).
func (c *Consumer) CheckWait(now clock.Instant) error {
	if c.cfg.MaxQueueWait <= 0 {
		return nil
	}
	for p := c.head; p != nil; p = p.next {
		if p.state == pullQueued && now >= p.enqueued.Add(c.cfg.MaxQueueWait) {
			return fmt.Errorf("xfer: request %d queued since %v is still waiting at %v, past the max queue wait %v",
				p.Req, p.enqueued, now, c.cfg.MaxQueueWait)
		}
	}
	return nil
}

// Check verifies the consumer's holds: every inbound hold belongs to a
// reading pull, and every reading pull has one.
func (c *Consumer) Check() error {
	for h := range c.pool.Holds() {
		if h.Kind != kvblock.HoldInbound {
			continue
		}
		p, ok := c.byReq[h.Owner]
		if !ok || p.inbound != h.ID {
			return fmt.Errorf("xfer: orphan inbound hold %#x of request %d", uint64(h.ID), h.Owner)
		}
	}
	n := 0
	for p := c.head; p != nil; p = p.next {
		if p.state == pullReading {
			n++
			if p.inbound == 0 || !c.pool.Live(p.inbound) {
				return fmt.Errorf("xfer: reading request %d has no inbound hold", p.Req)
			}
		}
	}
	if err := c.checkTimers(); err != nil {
		return err
	}
	if n != c.reading {
		return fmt.Errorf("xfer: %d pulls reading, counted %d", n, c.reading)
	}
	if n > c.cfg.MaxInflightReads {
		return fmt.Errorf("xfer: %d pulls reading, over MaxInflightReads %d", n, c.cfg.MaxInflightReads)
	}
	k := 0
	for _, pr := range c.peers {
		k += len(pr.notes)
	}
	if k != c.notices {
		return fmt.Errorf("xfer: %d release notices pending, counted %d", k, c.notices)
	}
	return nil
}
