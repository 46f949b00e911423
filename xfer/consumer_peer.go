package xfer

import (
	"fmt"
	"time"

	"github.com/kvlease/kvlease/clock"
	"github.com/kvlease/kvlease/kvblock"
	"github.com/kvlease/kvlease/wire"
)

// D's sessions with its prefill engines and the messages they send: the
// dial outcomes, the handshake, RENEW_ACK, REVOKED, BLOCK, READ_END and
// RELEASE_ACK.

// Dialed reports that the connection to addr is up as session s.
func (c *Consumer) Dialed(now clock.Instant, addr string, s SessionID) {
	pr, ok := c.peers[addr]
	if !ok || pr.state != peerDialing {
		c.actions = append(c.actions, Action{Kind: ActionClose, Session: s})
		return
	}
	pr.session = s
	c.setState(pr, peerHello)
	pr.handshakeBy = now.Add(c.cfg.HandshakeTimeout)
	c.bySession[s] = pr
	a, b := c.rng.Uint64(), c.rng.Uint64()
	for i := 0; i < 8; i++ {
		pr.nonce[i], pr.nonce[8+i] = byte(a>>(8*i)), byte(b>>(8*i))
	}
	c.send(pr, &wire.Hello{Version: wire.Version, EngineID: c.engineID, Nonce: pr.nonce})
}

// DialFailed reports that addr could not be reached.
func (c *Consumer) DialFailed(now clock.Instant, addr string) {
	pr, ok := c.peers[addr]
	if !ok || pr.state != peerDialing {
		return
	}
	c.expireAll(now) // expired pulls fall back as expired, not unreachable
	c.dialFailed(now, pr, FailureUnreachable, "the dial failed")
}

// Disconnected reports that session s is gone. Reads in flight on it are
// retried (within the lease and MaxReadAttempts) over a new connection. A
// session lost before its handshake completed is a failed dial.
func (c *Consumer) Disconnected(now clock.Instant, s SessionID) {
	c.disconnected(now, s, FailureDisconnected, FallbackDisconnected)
}

// Tampered reports that session s ended on a frame from P that failed its
// authentication: someone on the path altered or injected it. Nothing P
// sent on s since the frame was delivered is in doubt (a frame is
// delivered only once it verified); reads in flight are retried as after
// a disconnection, and those out of attempts fall back as
// FallbackTampered.
func (c *Consumer) Tampered(now clock.Instant, s SessionID) {
	c.disconnected(now, s, FailureTampered, FallbackTampered)
}

func (c *Consumer) disconnected(now clock.Instant, s SessionID, kind FailureKind, reason FallbackReason) {
	pr, ok := c.bySession[s]
	if !ok {
		return
	}
	c.expireAll(now) // a read past its deadline timed out before the loss
	if pr.state == peerHello || pr.state == peerAuth {
		c.handshakeFailed(now, pr, FailureHandshakeClosed,
			"the connection ended during the handshake: not a kvlease prefill engine (an HTTP port?)")
		return
	}
	delete(c.bySession, s)
	c.setState(pr, peerIdle)
	pr.session = 0
	// Redial at once: a lost connection is often a blip, and P keeps the
	// leases bound to it only for the peer grace. Failed dials back off.
	pr.retryAt = now
	c.stats.Failures[kind]++
	for _, p := range c.pullsOf(pr) {
		if p.state == pullReading && p.sent {
			c.retry(now, p, reason)
		}
	}
}

// retry restarts p's read after a failure, or falls back when out of
// attempts or lease.
func (c *Consumer) retry(now clock.Instant, p *pull, why FallbackReason) {
	p.attempts++
	if p.aborted {
		c.finish(now, p, Dropped, wire.ReasonAborted, 0)
		return
	}
	if p.attempts >= c.cfg.MaxReadAttempts || now >= p.deadline {
		c.finish(now, p, c.fallbackOutcome(), wire.ReasonFallback, why)
		return
	}
	c.newRead(p)
	if p.peer.state == peerUp {
		c.sendRead(now, p.peer, p)
	}
}

func (c *Consumer) fallbackOutcome() Outcome {
	if c.cfg.Fallback == FallbackFail {
		return Failed
	}
	return FellBack
}

// Handle processes a message received on session s.
func (c *Consumer) Handle(now clock.Instant, s SessionID, m wire.Message) {
	pr, ok := c.bySession[s]
	if !ok {
		return
	}
	pr.heard = now
	if _, blk := m.(*wire.Block); !blk {
		// Due timers first, as if Tick had run at now (see expire). A
		// Block checks only its own pull: it is the hot path.
		c.expireAll(now)
	}
	switch m := m.(type) {
	case *wire.HelloAck:
		if pr.state == peerAuth || pr.state == peerUp {
			return // a duplicate: the handshake moved on
		}
		switch {
		case pr.state != peerHello:
			c.authFailed(now, pr, FailureUnauthenticated, "a HELLO_ACK out of turn")
			return
		case m.Status == wire.StatusBadVersion:
			c.authFailed(now, pr, FailureBadVersion,
				fmt.Sprintf("the prefill engine speaks protocol version %d, this engine %d", m.Version, wire.Version))
			return
		case m.Status != wire.StatusOK:
			c.authFailed(now, pr, FailureHandshakeRefused, "the prefill engine refused the session: "+m.Status.String())
			return
		case !wire.VerifyMAC(c.secret, wire.RoleP, pr.nonce, m.EngineID, c.engineID, m.MAC):
			c.authFailed(now, pr, FailureUnauthenticated,
				"the prefill engine's proof does not verify: the two engines have different cluster secrets")
			return
		}
		pr.engineID = m.EngineID
		c.setState(pr, peerAuth)
		c.send(pr, &wire.Auth{MAC: wire.ComputeMAC(c.secret, wire.RoleD, m.Nonce, m.EngineID, c.engineID)})
	case *wire.AuthAck:
		if pr.state == peerUp && m.Status == wire.StatusOK {
			return // a duplicate
		}
		if pr.state != peerAuth || m.Status != wire.StatusOK {
			c.authFailed(now, pr, FailureUnauthenticated,
				"the prefill engine refused this engine's proof ("+m.Status.String()+"): the two engines have different cluster secrets")
			return
		}
		// Notices that expired while P was unreachable are dropped, as
		// Tick would have dropped them before the session came up.
		c.dropNotices(now, pr)
		c.setState(pr, peerUp)
		pr.dialFailures = 0
		delete(c.failing, pr.addr)
		// Renew at once on a new session: it rebinds the leases P keeps
		// only for the peer grace after losing the previous one.
		pr.heartbeat = now
		pr.renewAll = true
		for _, p := range c.pullsOf(pr) {
			if p.Remote.EngineID != "" && p.Remote.EngineID != pr.engineID {
				c.stats.Failures[FailureEngineMismatch]++
				c.warn(now, pr.addr, FailureEngineMismatch, "remote prefill engine is not the one kv_transfer_params named",
					"engine", pr.engineID, "want", p.Remote.EngineID)
				c.finish(now, p, c.fallbackOutcome(), 0, FallbackEngineMismatch)
			}
		}
		c.tickPeer(now, pr)
	case *wire.RenewAck:
		if m.Seq == 0 || m.Seq > pr.renewSeq {
			return // not an answer to a RENEW of ours
		}
		live := make(map[wire.LeaseID]*pull)
		for _, p := range c.pullsOf(pr) {
			live[p.Remote.Lease] = p
		}
		for _, r := range m.Results {
			p, ok := live[r.ID]
			if !ok {
				continue // gone: a late ack
			}
			switch {
			case r.Status == wire.StatusOK:
				p.deadline = clock.Max(p.deadline, now.Add(time.Duration(r.ExpiresInMs)*time.Millisecond))
				c.touch(p)
			case p.state == pullReading && p.sent:
				// The read in flight ends with its own status.
			default:
				c.stats.Failures[FailureLeaseGone]++
				delete(live, r.ID)
				if p.aborted {
					c.finish(now, p, Dropped, 0, 0)
				} else {
					c.finish(now, p, c.fallbackOutcome(), 0, FallbackLeaseGone)
				}
			}
		}
	case *wire.Revoked:
		for _, p := range c.pullsOf(pr) {
			if p.Remote.Lease == m.Lease && !(p.state == pullReading && p.sent) {
				if p.aborted {
					c.finish(now, p, Dropped, 0, 0)
				} else {
					c.finish(now, p, c.fallbackOutcome(), 0, FallbackLeaseGone)
				}
			}
		}
	case *wire.Block:
		c.block(now, pr, m)
	case *wire.ReadEnd:
		c.readEnd(now, pr, m)
	case *wire.ReleaseAck:
		if r, ok := pr.notes[m.Lease]; ok {
			c.dropNote(pr, r)
		}
	}
}

func (c *Consumer) block(now clock.Instant, pr *peer, m *wire.Block) {
	p, ok := c.byRead[m.ReadID]
	if !ok || p.peer != pr || p.Remote.Lease != m.Lease || p.aborted {
		return
	}
	if c.expire(now, p) || p.readID != m.ReadID {
		return // the read timed out at its deadline: a retry replaces it
	}
	bs := c.pool.BlockSizeTokens()
	ix := int(m.Index)
	if ix < p.hits || ix >= p.Remote.NumBlocks || p.got[ix-p.hits] {
		c.stats.Failures[FailureBadBlock]++
		return
	}
	filled := min(bs, p.Remote.NumTokens-ix*bs)
	if int(m.Tokens) != filled || len(m.Digests) != filled {
		c.stats.Failures[FailureBadBlock]++
		return
	}
	b := c.pool.Blocks(p.inbound)[ix]
	dig := c.pool.Digests(b)
	bpt := c.pool.Config().BytesPerToken
	if bpt > 0 {
		if len(m.Data) != filled*bpt {
			c.stats.Failures[FailureBadBlock]++
			return
		}
		// One pass: each slot is hashed right after its copy, while it
		// is in cache (a block is 16 slots, megabytes on a large model).
		dst := c.pool.Bytes(b)
		for i := 0; i < filled; i++ {
			slot := dst[i*bpt : (i+1)*bpt]
			copy(slot, m.Data[i*bpt:])
			dig[i] = kvblock.SlotDigest(slot)
		}
	} else {
		copy(dig, m.Digests)
	}
	if kvblock.Checksum(dig[:filled]) != m.Checksum {
		c.stats.Failures[FailureCorrupt]++
		return // not marked received: read again
	}
	p.got[ix-p.hits] = true
	p.bytes += len(m.Data) + 8*len(m.Digests)
	// Only a verified new block of this read is progress: junk, duplicate
	// or corrupt frames do not keep the read (and D's inbound blocks)
	// alive.
	p.readDeadline = now.Add(c.cfg.LeaseDuration)
	c.touch(p)
}

func (c *Consumer) readEnd(now clock.Instant, pr *peer, m *wire.ReadEnd) {
	p, ok := c.byRead[m.ReadID]
	if !ok || p.peer != pr || p.Remote.Lease != m.Lease || !p.sent {
		return
	}
	if p.aborted {
		c.finish(now, p, Dropped, wire.ReasonAborted, 0)
		return
	}
	switch m.Status {
	case wire.StatusOK:
	case wire.StatusBusy, wire.StatusInternal:
		kind, why := FailureReadBusy, FallbackReadBusy
		if m.Status == wire.StatusInternal {
			kind, why = FailureReadInternal, FallbackReadInternal
		}
		c.stats.Failures[kind]++
		c.retry(now, p, why)
		return
	default:
		// The lease is gone, or we are not allowed to read it.
		c.stats.Failures[FailureLeaseGone]++
		c.finish(now, p, c.fallbackOutcome(), 0, FallbackLeaseGone)
		return
	}
	p.need = p.need[:0]
	for i, g := range p.got {
		if !g {
			p.need = append(p.need, uint32(p.hits+i))
		}
	}
	if len(p.need) > 0 {
		c.retry(now, p, FallbackCorrupt)
		return
	}
	c.complete(now, p)
}
