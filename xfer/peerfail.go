package xfer

import (
	"log/slog"
	"time"

	"github.com/kvlease/kvlease/clock"
	"github.com/kvlease/kvlease/wire"
)

// Failed connection attempts of D: counted per kind (ConsumerStats.Failures),
// remembered per peer for an alert (ConsumerStats.PeersFailing) and logged at
// WARN, rate-limited per peer and kind, so that a misconfiguration (a wrong
// cluster secret, a remote_port that is not a prefill engine's transfer
// port) is loud however few requests it breaks.

// FailingWindow is how long a prefill endpoint whose connection attempt
// failed counts in ConsumerStats.PeersFailing after its last failure.
const FailingWindow = 5 * time.Minute

// warnInterval spaces the WARN lines of one peer's repeated failure of one
// kind: the first is logged, later ones are counted and summed up in the
// next line.
const warnInterval = 10 * time.Second

// maxFailingPeers bounds the failing-peer records; beyond it a new peer's
// failure is counted (Failures) and logged but not recorded.
const maxFailingPeers = 1024

// failing is what D remembers of a peer whose connection attempt failed.
type failing struct {
	kind FailureKind
	at   clock.Instant // last failure
}

type warnKey struct {
	addr string
	kind FailureKind
}

// warnMark rate-limits the WARN lines of one (peer, kind).
type warnMark struct {
	at         clock.Instant // last logged
	logged     bool
	suppressed int // not logged since
}

// SetLogger makes the consumer log to l: a WARN line, rate-limited per peer
// and kind, for each failed dial or handshake (wrong cluster secret, wrong
// protocol or engine id, an endpoint that is not a prefill engine). Nil
// discards, the default.
func (c *Consumer) SetLogger(l *slog.Logger) {
	if l == nil {
		l = slog.New(slog.DiscardHandler)
	}
	c.log = l
}

// peerFailed records and logs a failed connection attempt to pr: kind is
// the failures_total kind, detail says what it means for an operator.
func (c *Consumer) peerFailed(now clock.Instant, pr *peer, kind FailureKind, detail string) {
	if f, ok := c.failing[pr.addr]; ok || len(c.failing) < maxFailingPeers {
		if !ok {
			f = &failing{}
			c.failing[pr.addr] = f
		}
		f.kind, f.at = kind, now
	}
	c.warn(now, pr.addr, kind, "transfer handshake with prefill engine failed", "detail", detail)
}

// warn logs msg at WARN for peer addr and reason kind, at most once per
// warnInterval per (peer, kind); the next line logged says how many were
// suppressed in between.
func (c *Consumer) warn(now clock.Instant, addr string, kind FailureKind, msg string, args ...any) {
	key := warnKey{addr, kind}
	w, ok := c.warned[key]
	if !ok {
		if len(c.warned) >= maxFailingPeers {
			c.pruneWarned(now)
		}
		if len(c.warned) >= maxFailingPeers {
			c.log.Warn(msg, append([]any{"peer", addr, "reason", kind.String()}, args...)...)
			return
		}
		w = &warnMark{}
		c.warned[key] = w
	}
	if w.logged && now < w.at.Add(warnInterval) {
		w.suppressed++
		return
	}
	c.log.Warn(msg, append([]any{"peer", addr, "reason", kind.String(), "suppressed", w.suppressed}, args...)...)
	*w = warnMark{at: now, logged: true}
}

func (c *Consumer) pruneWarned(now clock.Instant) {
	for k, w := range c.warned {
		if now >= w.at.Add(warnInterval) {
			delete(c.warned, k)
		}
	}
}

// pruneFailing forgets the failures older than FailingWindow.
func (c *Consumer) pruneFailing(now clock.Instant) {
	for addr, f := range c.failing {
		if now >= f.at.Add(FailingWindow) {
			delete(c.failing, addr)
		}
	}
}

// dialFailed counts a failed attempt to reach pr, of a failures_total kind:
// a failed dial or a failed handshake. After MaxReadAttempts in a row, P
// is taken to be unreachable: its pulls fall back (Done.Why is
// fallbackOf(kind))
// rather than wait out their leases. Release notices keep being retried
// until their deadlines.
func (c *Consumer) dialFailed(now clock.Instant, pr *peer, kind FailureKind, detail string) {
	c.setState(pr, peerIdle)
	pr.retryAt = now.Add(c.cfg.RetryInterval)
	c.stats.Failures[kind]++
	c.peerFailed(now, pr, kind, detail)
	pr.dialFailures++
	if pr.dialFailures < c.cfg.MaxReadAttempts {
		return
	}
	pr.dialFailures = 0
	for _, p := range c.pullsOf(pr) {
		if p.aborted {
			c.finish(now, p, Dropped, wire.ReasonAborted, 0)
			continue
		}
		c.finish(now, p, c.fallbackOutcome(), wire.ReasonFallback, fallbackOf(kind))
	}
}

// handshakeFailed ends pr's session, whose handshake did not complete in
// time (kind handshake_timeout: the session is closed) or whose connection
// ended during it (handshake_closed): a failed dial, retried after
// RetryInterval, not at once. An endpoint that accepts TCP but does not
// speak the protocol (an HTTP port closes on the HELLO, a silent listener
// or a SIGSTOPped P answers nothing) makes D fall back after
// MaxReadAttempts such failures.
func (c *Consumer) handshakeFailed(now clock.Instant, pr *peer, kind FailureKind, detail string) {
	if kind == FailureHandshakeTimeout {
		c.actions = append(c.actions, Action{Kind: ActionClose, Session: pr.session})
	}
	delete(c.bySession, pr.session)
	pr.session = 0
	c.dialFailed(now, pr, kind, detail)
}

// authFailed ends a session whose handshake P answered wrongly: every
// pull of the peer falls back at once (a retry would meet the same
// answer).
func (c *Consumer) authFailed(now clock.Instant, pr *peer, kind FailureKind, detail string) {
	c.stats.Failures[kind]++
	c.peerFailed(now, pr, kind, detail)
	c.actions = append(c.actions, Action{Kind: ActionClose, Session: pr.session})
	delete(c.bySession, pr.session)
	c.setState(pr, peerIdle)
	pr.session = 0
	pr.retryAt = now.Add(c.cfg.RetryInterval)
	for _, r := range pr.notes {
		c.dropNote(pr, r) // cannot be delivered to an impostor
	}
	for _, p := range c.pullsOf(pr) {
		if p.aborted {
			c.finish(now, p, Dropped, 0, 0)
			continue
		}
		c.finish(now, p, c.fallbackOutcome(), 0, fallbackOf(kind))
	}
}
