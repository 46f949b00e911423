package xfer

import (
	"fmt"
	"time"
)

// Policy is a release policy: how P decides that a lease's blocks are no
// longer needed. kvlease runs all three in one engine so that benchmarks and
// the simulator compare them under the same load.
type Policy uint8

const (
	// PolicyLease is kvlease's: authenticated leases renewed by batched
	// heartbeats, bound to the renewing D session (released soon after it
	// is lost), released at once on rejection, on abort and when the
	// response carrying the token was never delivered.
	PolicyLease Policy = iota
	// PolicyVLLMLease mirrors vLLM's NIXL lease (PR #41383): 30 s lease,
	// 5 s heartbeat, extension to now+20 s, rejection notices honoured, no
	// session binding, and an abort after finish ignored.
	PolicyVLLMLease
	// PolicyLegacyTimeout mirrors vLLM before leases: one fixed 480 s
	// timeout, no heartbeats, no rejection notice, abort after finish
	// ignored.
	PolicyLegacyTimeout
	// PolicyVLLM is vLLM's merged lease design exactly (vLLM's PR #41383
	// and its docs/design/nixl_kv_cache_lease.md): a per-request lease of
	// 30 s from the grant; D heartbeats every lease/6 from when the request enters
	// its waiting queue (on its regular cadence: no immediate claim), each
	// extending to max(old, now + lease·2/3); heartbeats are one-way
	// notifications (no RENEW_ACK), so D is never told that a lease is
	// gone and keeps no view of its expiry; no session binding, no claim
	// deadline, abort after finish ignored; D tells P only of a completed
	// read and of a rejection before admission (PR #41269), not of its
	// own aborts or fallbacks. A READ after the lease ended would read
	// freed blocks in vLLM (only logged there): P counts it
	// (ProducerStats.FreedReads), the silent-corruption risk, and — having
	// nothing to serve that is not freed memory — refuses it.
	PolicyVLLM
)

// ParsePolicy parses a --release-policy value.
func ParsePolicy(s string) (Policy, error) {
	switch s {
	case "lease":
		return PolicyLease, nil
	case "vllm-lease":
		return PolicyVLLMLease, nil
	case "legacy-timeout":
		return PolicyLegacyTimeout, nil
	case "vllm":
		return PolicyVLLM, nil
	}
	return 0, fmt.Errorf("xfer: unknown release policy %q (want lease, vllm, vllm-lease or legacy-timeout)", s)
}

func (p Policy) String() string {
	switch p {
	case PolicyLease:
		return "lease"
	case PolicyVLLMLease:
		return "vllm-lease"
	case PolicyLegacyTimeout:
		return "legacy-timeout"
	case PolicyVLLM:
		return "vllm"
	}
	return fmt.Sprintf("Policy(%d)", p)
}

// Policies lists every policy, for reports: kvlease's, then vLLM's merged
// design and its approximation, then the fixed timeout before leases.
var Policies = []Policy{PolicyLease, PolicyVLLM, PolicyVLLMLease, PolicyLegacyTimeout}

// Fallback is what D does when it cannot get a remote prefix.
type Fallback uint8

const (
	// FallbackRecompute prefills the prompt locally.
	FallbackRecompute Fallback = iota
	// FallbackFail finishes the request with an error.
	FallbackFail
)

// ParseFallback parses "recompute" or "fail".
func ParseFallback(s string) (Fallback, error) {
	switch s {
	case "recompute":
		return FallbackRecompute, nil
	case "fail":
		return FallbackFail, nil
	}
	return 0, fmt.Errorf("xfer: unknown fallback %q (want recompute or fail)", s)
}

func (f Fallback) String() string {
	if f == FallbackFail {
		return "fail"
	}
	return "recompute"
}

// Config configures both sides of the transfer.
type Config struct {
	Policy Policy
	// LeaseDuration is a lease's life from its grant.
	LeaseDuration time.Duration
	// HeartbeatInterval is how often D renews the leases it waits on.
	HeartbeatInterval time.Duration
	// LeaseExtension: a renewal moves the deadline to max(old, now+this).
	LeaseExtension time.Duration
	// PeerGrace is how long P keeps a lease after the D session bound to it
	// is lost, for a reconnect.
	PeerGrace time.Duration
	// ClaimTimeout (PolicyLease only; 0 disables it) is how long P keeps a
	// lease that no D session has claimed — renewed, read or released with
	// its token on an authenticated session — before releasing it as
	// unclaimed: the request never reached a decoder (a proxy dropped the
	// decode leg). D claims when it admits the request (Enqueue): with its
	// next heartbeat to that P, within HeartbeatInterval, or at once when
	// that would leave less than a heartbeat before the deadline; so it
	// must be at least HeartbeatInterval, and under LeaseDuration.
	ClaimTimeout time.Duration
	// MaxQueueWait (0: none) bounds how long D keeps a pull queued — its
	// request admitted, waiting for room to read, D renewing its lease:
	// past it D releases the lease (RELEASE fallback) and recomputes the
	// prompt (FallbackQueueWait), so that a congested decoder does not
	// hold a prefill engine's memory for as long as its queue lasts.
	MaxQueueWait time.Duration

	// MaxLeases bounds live leases on P; a finished prefill beyond it gets
	// no lease (its blocks are freed, D recomputes).
	MaxLeases int
	// Tombstones is how many released lease ids P remembers to answer late
	// messages with "released" or "expired" rather than "unknown".
	Tombstones int

	// MaxServedReads bounds the reads P streams at once, over all
	// sessions; a READ beyond it is answered StatusBusy (D retries).
	MaxServedReads int

	// MaxInflightReads bounds D's concurrent pulls.
	MaxInflightReads int
	// MaxWaiting bounds D's requests waiting for remote KV.
	MaxWaiting int
	// MaxReadAttempts bounds how often D reads a lease (transient failures,
	// corrupt blocks) before falling back.
	MaxReadAttempts int
	// RetryInterval spaces D's retries of a pull, a dial or a RELEASE.
	RetryInterval time.Duration
	// HandshakeTimeout bounds D's handshake with P, from the connection's
	// Dialed to P's AUTH_ACK. A handshake that does not complete in time,
	// or a connection lost during it, counts as a failed dial
	// (MaxReadAttempts of them and the peer's pulls fall back): an
	// endpoint that accepts TCP but is not a kvlease prefill engine (an
	// HTTP port, a silent listener, a stopped P) costs D seconds, not the
	// lease.
	HandshakeTimeout time.Duration
	// Fallback is what D does when the remote prefix cannot be had.
	Fallback Fallback

	// LeaseEvents makes P record each lease's life (LeaseEvent) for
	// TakeLeaseEvents; off, nothing is recorded.
	LeaseEvents bool
}

// DefaultConfig returns the defaults of a policy (docs/protocol.md, "Lease rules").
func DefaultConfig(p Policy) Config {
	c := Config{
		Policy:            p,
		LeaseDuration:     30 * time.Second,
		HeartbeatInterval: 5 * time.Second,
		LeaseExtension:    20 * time.Second,
		PeerGrace:         2 * time.Second,
		ClaimTimeout:      10 * time.Second,
		MaxQueueWait:      2 * time.Minute,
		MaxLeases:         1 << 16,
		Tombstones:        1 << 14,
		MaxServedReads:    1024,
		MaxInflightReads:  8,
		MaxWaiting:        4096,
		MaxReadAttempts:   3,
		RetryInterval:     200 * time.Millisecond,
		HandshakeTimeout:  time.Second,
		Fallback:          FallbackRecompute,
	}
	if p == PolicyLegacyTimeout {
		c.LeaseDuration = 480 * time.Second
	}
	if p != PolicyLease {
		c.ClaimTimeout = 0 // no claim deadline outside kvlease's policy
		c.MaxQueueWait = 0 // nor a bound on D's queue
	}
	return c
}

// WithLease scales a config to a lease duration d the way vLLM derives its
// knobs from kv_lease_duration: heartbeat d/6, extension 2d/3, peer grace
// d/15 (at least one heartbeat's worth of slack stays), and a claim
// timeout (when one is set) of d/3: two heartbeats, so that a first claim
// lost in transit (a dropped packet, a redial) is made again by the next
// heartbeat before the deadline.
func (c Config) WithLease(d time.Duration) Config {
	c.LeaseDuration = d
	c.HeartbeatInterval = d / 6
	c.LeaseExtension = d * 2 / 3
	c.PeerGrace = d / 15
	if c.ClaimTimeout > 0 {
		c.ClaimTimeout = d / 3
	}
	if c.MaxQueueWait > 0 {
		c.MaxQueueWait = 4 * d
	}
	if c.RetryInterval > c.HeartbeatInterval/2 {
		c.RetryInterval = c.HeartbeatInterval / 2
	}
	return c
}

// Validate reports the first problem with c, naming the setting.
func (c Config) Validate() error {
	switch {
	case c.Policy > PolicyVLLM:
		return fmt.Errorf("xfer: unknown policy %d", c.Policy)
	case c.LeaseDuration <= 0:
		return fmt.Errorf("xfer: lease duration must be positive, got %v", c.LeaseDuration)
	case c.Heartbeats() && c.HeartbeatInterval <= 0:
		return fmt.Errorf("xfer: heartbeat interval must be positive, got %v", c.HeartbeatInterval)
	case c.Heartbeats() && c.LeaseDuration < 3*c.HeartbeatInterval:
		return fmt.Errorf("xfer: lease duration %v must be at least 3 × the heartbeat interval %v", c.LeaseDuration, c.HeartbeatInterval)
	case c.Heartbeats() && c.LeaseExtension < 2*c.HeartbeatInterval:
		return fmt.Errorf("xfer: lease extension %v must be at least 2 × the heartbeat interval %v", c.LeaseExtension, c.HeartbeatInterval)
	case c.PeerGrace < 0:
		return fmt.Errorf("xfer: peer grace must not be negative, got %v", c.PeerGrace)
	case c.MaxQueueWait < 0:
		return fmt.Errorf("xfer: max queue wait must not be negative, got %v", c.MaxQueueWait)
	case c.ClaimTimeout < 0:
		return fmt.Errorf("xfer: claim timeout must not be negative, got %v", c.ClaimTimeout)
	case c.ClaimTimeout > 0 && c.Policy != PolicyLease:
		return fmt.Errorf("xfer: a claim timeout is part of the lease policy only, not %v", c.Policy)
	case c.ClaimTimeout > 0 && c.ClaimTimeout < c.HeartbeatInterval:
		return fmt.Errorf("xfer: claim timeout %v must be at least the heartbeat interval %v (a decoder's regular heartbeat claims within one interval)", c.ClaimTimeout, c.HeartbeatInterval)
	case c.ClaimTimeout > 0 && c.ClaimTimeout >= c.LeaseDuration:
		return fmt.Errorf("xfer: claim timeout %v must be shorter than the lease duration %v", c.ClaimTimeout, c.LeaseDuration)
	case c.MaxLeases <= 0:
		return fmt.Errorf("xfer: MaxLeases must be positive, got %d", c.MaxLeases)
	case c.Tombstones < 0:
		return fmt.Errorf("xfer: Tombstones must not be negative, got %d", c.Tombstones)
	case c.MaxServedReads <= 0:
		return fmt.Errorf("xfer: MaxServedReads must be positive, got %d", c.MaxServedReads)
	case c.MaxInflightReads <= 0:
		return fmt.Errorf("xfer: MaxInflightReads must be positive, got %d", c.MaxInflightReads)
	case c.MaxWaiting <= 0:
		return fmt.Errorf("xfer: MaxWaiting must be positive, got %d", c.MaxWaiting)
	case c.MaxReadAttempts <= 0:
		return fmt.Errorf("xfer: MaxReadAttempts must be positive, got %d", c.MaxReadAttempts)
	case c.RetryInterval <= 0:
		return fmt.Errorf("xfer: retry interval must be positive, got %v", c.RetryInterval)
	case c.HandshakeTimeout <= 0:
		return fmt.Errorf("xfer: handshake timeout must be positive, got %v", c.HandshakeTimeout)
	}
	return nil
}

// Heartbeats reports whether D renews leases under this policy.
func (c Config) Heartbeats() bool { return c.Policy != PolicyLegacyTimeout }

// BindsSessions reports whether P releases a lease when the D session that
// renewed or read it is lost.
func (c Config) BindsSessions() bool { return c.Policy == PolicyLease }

// HonoursAbort reports whether P acts on an abort after finish (revocation,
// or release when the response was never delivered).
func (c Config) HonoursAbort() bool { return c.Policy == PolicyLease }

// ClaimsLeases reports whether P releases a lease that no D session
// claimed within ClaimTimeout (PolicyLease with a claim timeout).
func (c Config) ClaimsLeases() bool { return c.Policy == PolicyLease && c.ClaimTimeout > 0 }

// NotifiesRejection reports whether D tells P it rejected a request.
func (c Config) NotifiesRejection() bool { return c.Policy != PolicyLegacyTimeout }

// NotifiesDrop reports whether D tells P (RELEASE aborted or fallback)
// that it gave up a pull it had admitted: not under legacy-timeout, nor
// under vLLM's design, where D only stops heartbeating.
func (c Config) NotifiesDrop() bool { return c.NotifiesRejection() && c.Policy != PolicyVLLM }

// TellsExpiry reports whether P answers a RENEW (RENEW_ACK with each
// lease's time left or why it is gone) and D keeps its own view of each
// lease's expiry, falling back when it passes. Not under vLLM's design,
// whose heartbeats are one-way: there D learns nothing until it reads.
func (c Config) TellsExpiry() bool { return c.Policy != PolicyVLLM }

// ClaimsAtOnce reports whether D renews a lease as soon as it enqueues
// the pull rather than at its peer's next heartbeat (vLLM's design sends
// the first heartbeat on its regular cadence; under PolicyLease the claim
// rides the peer's next heartbeat when that reaches P before the claim
// deadline, see RenewsWhenDue).
func (c Config) ClaimsAtOnce() bool { return c.Heartbeats() && c.Policy != PolicyVLLM }

// RenewsWhenDue reports whether heartbeats carry only what P needs to
// hear (PolicyLease): D's RENEW to a P goes at a heartbeat only when a
// claim or a renewal is due (Consumer.renewDue), and names every lease
// not claimed yet and every lease a renewal extends (D's view of the
// deadline is less than LeaseExtension away); every lease after a new
// session (it rebinds them). P answers with a RENEW_ACK naming only the
// leases that are gone, and none when every one was renewed (an empty
// one after renewAckEvery of silence): a bound lease that ends is told
// with REVOKED anyway. Under the other heartbeat policies D renews every
// lease it waits on at every heartbeat and P answers each (vllm-lease)
// or none (vllm).
func (c Config) RenewsWhenDue() bool { return c.Policy == PolicyLease }

// renewAckEvery is, under RenewsWhenDue, how long P may stay silent
// towards a D that renews before it answers a RENEW whose leases were all
// renewed (an empty RENEW_ACK): LeaseExtension − HeartbeatInterval (15 s
// by default). D renews a P's leases together about every
// LeaseExtension − renewMargin (10 s), so a D that hears nothing else
// from P gets an answer to every other RENEW.
func (c Config) renewAckEvery() time.Duration { return c.LeaseExtension - c.HeartbeatInterval }

// heardWithin: under RenewsWhenDue, D counts a renewal it sends in its
// view of the lease's deadline only if it heard from P on the session
// within this: LeaseExtension and half a heartbeat for the network (22.5
// s by default), more than two renewal rounds, of which P answers at
// least one (renewAckEvery). A P that stopped (hung, cut off) stops
// extending D's view, and D falls back at most this long after the lease
// as P last confirmed it ends. A renewal left out of D's view leaves the
// lease due, so the next heartbeat renews it again.
// renewMargin: under RenewsWhenDue, a claimed lease is due for renewal
// when D's view of its deadline is this close: max(LeaseExtension − 2 ×
// HeartbeatInterval, LeaseExtension/2), 10 s by default. A renewal then
// extends it by at least two heartbeats, and a lease due at one
// heartbeat still has two before it ends.
func (c Config) renewMargin() time.Duration {
	return max(c.LeaseExtension-2*c.HeartbeatInterval, c.LeaseExtension/2)
}

func (c Config) heardWithin() time.Duration {
	return c.LeaseExtension + c.HeartbeatInterval/2
}

// MaxClaimTimeout is the longest claim deadline P adapts to
// (Producer.ClaimTimeout): max(ClaimTimeout, 2/3 of LeaseDuration),
// 20 s by default. It stays under the lease, so an unclaimed lease's claim
// deadline still comes before its deadline.
func (c Config) MaxClaimTimeout() time.Duration {
	return max(c.ClaimTimeout, c.LeaseDuration*2/3)
}

// MaxExpiresIn is the longest time a lease can have left at any instant
// under this configuration, and so the bound on a RENEW_ACK's ExpiresInMs:
// a lease starts with LeaseDuration and a renewal moves its deadline to at
// most now+LeaseExtension (leases only extend, so an earlier, later
// deadline is kept but only runs down).
func (c Config) MaxExpiresIn() time.Duration {
	if c.Heartbeats() {
		return max(c.LeaseDuration, c.LeaseExtension)
	}
	return c.LeaseDuration
}
