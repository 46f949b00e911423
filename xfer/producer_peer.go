package xfer

import (
	"sort"

	"github.com/kvlease/kvlease/clock"
	"github.com/kvlease/kvlease/kvblock"
	"github.com/kvlease/kvlease/wire"
)

// P's sessions and the messages D sends it: the handshake, RENEW, READ
// and RELEASE.

// Connected registers a new inbound connection; it must complete the
// handshake before any other message is served.
func (p *Producer) Connected(now clock.Instant, s SessionID) {
	p.sessions[s] = &pSession{}
}

// Disconnected ends a session: its reads in flight end unsuccessfully, and
// (under PolicyLease) every lease bound to it is released after the peer
// grace unless another session renews or reads it first.
func (p *Producer) Disconnected(now clock.Instant, s SessionID) {
	if _, ok := p.sessions[s]; !ok {
		return
	}
	p.endSession(now, s, true)
}

// endSession forgets session s. With endReads, its reads end now, in
// read-id order (a map's order must not reach the releases they may
// trigger): the edge has reported the connection gone, so it sends
// nothing more. Without, they stay pinned until the edge reports each
// ReadFinished: a session the core closes itself may still have block
// bytes in the edge's send path, read straight from the pool.
func (p *Producer) endSession(now clock.Instant, s SessionID, endReads bool) {
	bound := p.boundTo(s)
	for _, l := range bound {
		// Due leases end first, while s still hears their REVOKED, as
		// after a sweep at now.
		p.expireDue(now, l)
	}
	delete(p.sessions, s)
	if !endReads {
		p.unbind(now, s, bound)
		return
	}
	var keys []readKey
	for k := range p.reads {
		if k.s == s {
			keys = append(keys, k)
		}
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i].id < keys[j].id })
	for _, k := range keys {
		p.finishRead(now, k, p.reads[k], false)
	}
	p.unbind(now, s, bound)
}

// boundTo returns the live leases bound to session s, in lease-id order (a
// map's order must not reach the releases). None unless the policy binds.
func (p *Producer) boundTo(s SessionID) []*leaseState {
	if !p.cfg.BindsSessions() {
		return nil
	}
	var ls []*leaseState
	for _, l := range p.leases {
		if l.session == s {
			ls = append(ls, l)
		}
	}
	sort.Slice(ls, func(i, j int) bool { return ls[i].id < ls[j].id })
	return ls
}

// unbind starts the peer grace of every lease of bound (boundTo(s)) still
// live and bound to the lost session s.
func (p *Producer) unbind(now clock.Instant, s SessionID, bound []*leaseState) {
	for _, l := range bound {
		if p.leases[l.id] == l && l.session == s && !p.expireDue(now, l) {
			l.session = 0
			l.lostAt = now.Add(p.cfg.PeerGrace)
			p.schedule(l)
		}
	}
}

// Handle processes one message received on session s, as one that
// reached P at now (HandleArrived).
func (p *Producer) Handle(now clock.Instant, s SessionID, m wire.Message) {
	p.HandleArrived(now, now, s, m)
}

// HandleArrived processes one message received on session s that reached
// P's edge at arrived and that P's loop handles at now: the message is
// handled as of its arrival (arrived later than now counts as now). A
// RENEW or READ that arrived before its lease's due instant renews or pins
// it even if P's loop was busy until after that instant (a long turn, a
// pause): D was on time. The edge guarantees that arrived is not before
// any instant it handed the producer before (engine.Loop.Poll): the
// producer's instants stay monotonic.
func (p *Producer) HandleArrived(now, arrived clock.Instant, s SessionID, m wire.Message) {
	if !MutateJudgeOnProcessing && arrived < now {
		now = arrived
	}
	ss, ok := p.sessions[s]
	if !ok {
		return // a message racing the session's end
	}
	if ss.state != stateAuthed {
		ss.told = now
		p.handshake(s, ss, m)
		return
	}
	switch m := m.(type) {
	case *wire.Renew:
		p.renew(now, s, ss, m)
	case *wire.Read:
		ss.told = now // answered: blocks, READ_END
		p.read(now, s, m)
	case *wire.Release:
		ss.told = now // answered: RELEASE_ACK
		p.handleRelease(now, s, m)
	case *wire.Hello, *wire.Auth:
		// A duplicate of the handshake (the network may duplicate): the
		// session is already authenticated, so it changes nothing.
	default:
		// A message D never sends: the peer is broken. Close the session
		// and end it here too (the edge reports no close it asked for).
		p.out = append(p.out, Envelope{Session: s, Msg: &wire.AuthAck{Status: wire.StatusBadRequest}, Close: true})
		p.endSession(now, s, false)
	}
}

func (p *Producer) handshake(s SessionID, ss *pSession, m wire.Message) {
	refuse := func(st wire.Status) {
		p.stats.AuthFailures++
		// Answer a pull or renewal with its own refusal so the peer sees a
		// clear status, then close.
		switch m := m.(type) {
		case *wire.Read:
			p.out = append(p.out, Envelope{Session: s, Msg: &wire.ReadEnd{ReadID: m.ReadID, Lease: m.Lease, Status: st}})
		case *wire.Renew:
			ack := &wire.RenewAck{Seq: m.Seq}
			for _, r := range m.Leases {
				ack.Results = append(ack.Results, wire.RenewResult{ID: r.ID, Status: st})
			}
			p.out = append(p.out, Envelope{Session: s, Msg: ack})
		}
		p.out = append(p.out, Envelope{Session: s, Msg: &wire.AuthAck{Status: st}, Close: true})
		delete(p.sessions, s)
	}
	switch m := m.(type) {
	case *wire.Hello:
		if ss.state == stateAuth && m.EngineID == ss.peer && m.Nonce == ss.dNonce {
			return // a duplicate of the Hello being answered
		}
		if ss.state != stateHello {
			refuse(wire.StatusBadRequest)
			return
		}
		if m.Version != wire.Version {
			p.out = append(p.out, Envelope{Session: s, Msg: &wire.HelloAck{Version: wire.Version, EngineID: p.engineID, Status: wire.StatusBadVersion}, Close: true})
			delete(p.sessions, s)
			return
		}
		ss.peer = m.EngineID
		ss.dNonce = m.Nonce
		ss.nonce = p.nonce()
		ss.state = stateAuth
		p.out = append(p.out, Envelope{Session: s, Msg: &wire.HelloAck{
			Version: wire.Version, EngineID: p.engineID, Nonce: ss.nonce,
			MAC: wire.ComputeMAC(p.secret, wire.RoleP, m.Nonce, p.engineID, m.EngineID),
		}})
	case *wire.Auth:
		if ss.state != stateAuth || !wire.VerifyMAC(p.secret, wire.RoleD, ss.nonce, p.engineID, ss.peer, m.MAC) {
			refuse(wire.StatusUnauthenticated)
			return
		}
		ss.state = stateAuthed
		p.out = append(p.out, Envelope{Session: s, Msg: &wire.AuthAck{Status: wire.StatusOK}})
	default:
		refuse(wire.StatusUnauthenticated)
	}
}

func (p *Producer) nonce() [16]byte {
	var n [16]byte
	a, b := p.rng.Uint64(), p.rng.Uint64()
	for i := 0; i < 8; i++ {
		n[i], n[8+i] = byte(a>>(8*i)), byte(b>>(8*i))
	}
	return n
}

// lookup finds a live lease that is not due at now and checks the token.
// A lease whose due instant has passed is expired here and then (its
// reads in flight keep it pinned until they end) and answers
// StatusExpired, whoever asks: the sweep would have ended it whatever the
// token, and a message must get the same answer whether or not Tick ran
// before it. A miss reports why the lease is gone.
func (p *Producer) lookup(now clock.Instant, id wire.LeaseID, tok wire.Token) (*leaseState, wire.Status) {
	if l, ok := p.leases[id]; ok && l.pending == 0 && l.due() <= now {
		r := p.dueReason(now, l)
		p.end(now, l, r)
		return nil, goneStatus(r) // expired (or peer_lost, unclaimed), or an injected revocation
	}
	return p.find(id, tok)
}

// lateClaim counts a RENEW or READ naming lease id after P released it
// (ProducerStats.ClaimedAfterRelease), once per lease.
func (p *Producer) lateClaim(id wire.LeaseID) {
	if r, first := p.tomb.claimLate(id); first {
		p.stats.ClaimedAfterRelease[r]++
	}
}

// find is lookup without the due check: only the mutated RENEW
// (MutateRenewSkipsDueCheck) calls it directly.
func (p *Producer) find(id wire.LeaseID, tok wire.Token) (*leaseState, wire.Status) {
	l, ok := p.leases[id]
	if !ok {
		if r, dead := p.tomb.get(id); dead {
			return nil, goneStatus(r)
		}
		return nil, wire.StatusUnknownLease
	}
	if !l.token.Equal(tok) {
		return nil, wire.StatusBadToken
	}
	if l.pending != 0 {
		return nil, goneStatus(l.pending) // ends when its reads do
	}
	return l, wire.StatusOK
}

// bind records that session s (of peer) uses l: l is claimed (its claim
// deadline no longer applies) and its fate follows s.
func (p *Producer) bind(now clock.Instant, s SessionID, l *leaseState) {
	l.delivered = true // only a holder of the token can renew or read
	if !l.claimed {
		l.claimed = true
		p.observeClaim(now, now.Sub(l.granted))
		p.leaseEvent(LeaseEvent{Kind: LeaseClaimed, Lease: l.id, Request: l.req, Peer: p.peerOf(s)})
	}
	// Claimed: the due instant moves later, which the due heap re-keys
	// lazily (see schedule).
	l.claimBy = clock.Never
	if !p.cfg.BindsSessions() {
		return
	}
	l.session = s
	if l.lostAt != clock.Never {
		l.lostAt = clock.Never
		p.schedule(l)
	}
}

func (p *Producer) renew(now clock.Instant, s SessionID, ss *pSession, m *wire.Renew) {
	ack := &wire.RenewAck{Seq: m.Seq}
	for _, ref := range m.Leases {
		var l *leaseState
		var st wire.Status
		if MutateRenewSkipsDueCheck {
			l, st = p.find(ref.ID, ref.Token)
		} else {
			l, st = p.lookup(now, ref.ID, ref.Token)
		}
		res := wire.RenewResult{ID: ref.ID, Status: st}
		if l == nil {
			p.lateClaim(ref.ID)
		}
		if l != nil {
			if p.cfg.Heartbeats() {
				if d := now.Add(p.cfg.LeaseExtension); d > l.deadline {
					l.deadline = d
					p.schedule(l)
				}
			}
			p.bind(now, s, l)
			p.leaseEvent(LeaseEvent{Kind: LeaseRenewed, Lease: l.id, Request: l.req, ExpiresIn: untilDeadline(l, now), Peer: p.peerOf(s)})
			res.ExpiresInMs = remainingMs(l.deadline, now)
		}
		if res.Status != wire.StatusOK || !p.cfg.RenewsWhenDue() {
			ack.Results = append(ack.Results, res)
		}
	}
	// vLLM's heartbeats are one-way: D is told nothing. Under
	// RenewsWhenDue D hears only of the leases that are gone (a renewed
	// lease that ends later is REVOKED to its session).
	if p.cfg.TellsExpiry() && (len(ack.Results) > 0 || !p.cfg.RenewsWhenDue() || now.Sub(ss.told) >= p.cfg.renewAckEvery()) {
		ss.told = now
		p.out = append(p.out, Envelope{Session: s, Msg: ack})
	}
}

func (p *Producer) read(now clock.Instant, s SessionID, m *wire.Read) {
	refuse := func(st wire.Status) {
		p.stats.ReadsRefused++
		if !p.cfg.TellsExpiry() && readsFreed(st) {
			// vLLM's P would have let this read of an ended lease's
			// blocks through (they may hold another request's KV by now)
			// and only logged it: counted, then refused all the same.
			p.stats.FreedReads++
		}
		p.out = append(p.out, Envelope{Session: s, Msg: &wire.ReadEnd{ReadID: m.ReadID, Lease: m.Lease, Status: st}})
	}
	key := readKey{s, m.ReadID}
	if l, dup := p.reads[key]; dup {
		// The same READ twice (a duplicated message): the read in flight
		// answers it. Refusing it would end D's good read. Its lease may
		// be due meanwhile: the expiry is decided now and takes effect when
		// the read ends. (Only a mutated release frees a pinned lease,
		// hence the liveness test.)
		if p.leases[l.id] == l {
			p.expireDue(now, l)
		}
		return
	}
	l, st := p.lookup(now, m.Lease, m.Token)
	if l == nil {
		p.lateClaim(m.Lease)
		refuse(st)
		return
	}
	if l.refuseReads {
		refuse(wire.StatusInternal) // injected (LeaseFaults): D retries, then falls back
		return
	}
	if len(p.reads) >= p.cfg.MaxServedReads {
		p.stats.ReadsBusy++
		refuse(wire.StatusBusy)
		return
	}
	nb := p.numBlocks(l)
	for _, ix := range m.Indexes {
		if int(ix) >= nb {
			refuse(wire.StatusBadIndex)
			return
		}
	}
	p.bind(now, s, l)
	if l.spill != nil && l.spill.n > 0 {
		for _, ix := range m.Indexes {
			if l.spill.out[ix] {
				// Served once the spilled blocks are back in the pool
				// (spill.go); pinned meanwhile, like any read.
				p.waitRestore(l, key, m.Indexes)
				return
			}
		}
	}
	l.reads++
	p.reads[key] = l
	p.serveRead(now, l, p.readWork(l, s, m.ReadID, m.Indexes))
}

// readWork is the stream of blocks indexes of l, which are resident, for
// read readID of session s: the blocks' data and digests alias the pool.
func (p *Producer) readWork(l *leaseState, s SessionID, readID uint64, indexes []uint32) ReadWork {
	bs := p.pool.BlockSizeTokens()
	w := ReadWork{Session: s, ReadID: readID, Lease: l.id, Blocks: make([]wire.Block, len(indexes))}
	bpt := p.pool.Config().BytesPerToken
	for i, ix := range indexes {
		b := p.blockAt(l, int(ix))
		filled := min(bs, l.numTokens-int(ix)*bs)
		dig := p.pool.Digests(b)[:filled]
		var data []byte
		if bpt > 0 {
			data = p.pool.Bytes(b)[:filled*bpt]
		}
		w.Blocks[i] = wire.Block{ReadID: readID, Lease: l.id, Index: ix, Tokens: uint16(filled),
			Checksum: kvblock.Checksum(dig), Digests: dig, Data: data}
	}
	return w
}

// ReadFinished reports that the edge finished streaming a read (ok) or
// could not (the session broke). The lease is unpinned; a release decided
// during the read happens now.
func (p *Producer) ReadFinished(now clock.Instant, s SessionID, readID uint64, ok bool) {
	key := readKey{s, readID}
	l, found := p.reads[key]
	if !found {
		return
	}
	p.finishRead(now, key, l, ok)
}

func (p *Producer) finishRead(now clock.Instant, key readKey, l *leaseState, ok bool) {
	delete(p.reads, key)
	l.dropWaiting(key)
	l.reads--
	if ok {
		l.read = true
		p.stats.ReadsServed++
	}
	if l.reads == 0 && l.pending != 0 {
		p.release(now, l, l.pending)
	} else if p.leases[l.id] == l {
		// Due while pinned but not swept yet: the expiry takes effect now
		// (or, with other reads in flight, when the last one ends), as if
		// Tick had run during the read. (Only a mutated abort releases a
		// pinned lease, hence the liveness test.)
		p.expireDue(now, l)
	}
}

// CountServed adds n payload bytes to the served counter (the edge knows
// what it wrote).
func (p *Producer) CountServed(n int) { p.stats.BytesServed += uint64(n) }

// handleRelease answers D's RELEASE. A lease released or decided already
// answers StatusReleased (the release is satisfied), except one that
// expired — now, because it was due, or before — which answers
// StatusExpired: D learns its release came too late, and the lease is
// counted expired, once.
func (p *Producer) handleRelease(now clock.Instant, s SessionID, m *wire.Release) {
	l, st := p.lookup(now, m.Lease, m.Token)
	if l != nil {
		switch m.Reason {
		case wire.ReasonReadDone, wire.ReasonRejected, wire.ReasonAborted, wire.ReasonFallback:
		default:
			st = wire.StatusBadRequest
			l = nil
		}
	}
	if l != nil {
		if l.session == s {
			l.session = 0 // D asked: no REVOKED back
		}
		p.end(now, l, m.Reason)
		st = wire.StatusOK
	} else if st == wire.StatusRevoked {
		st = wire.StatusReleased // already gone: the release is satisfied
	}
	p.out = append(p.out, Envelope{Session: s, Msg: &wire.ReleaseAck{Lease: m.Lease, Status: st}})
}

// readsFreed reports whether a READ refused with st names a lease whose
// blocks were freed (it ended, or P restarted since): under vLLM's design
// such a read is served from freed memory.
func readsFreed(st wire.Status) bool {
	switch st {
	case wire.StatusExpired, wire.StatusReleased, wire.StatusRevoked, wire.StatusUnknownLease:
		return true
	}
	return false
}
