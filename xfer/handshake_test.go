package xfer

import (
	"bytes"
	"log/slog"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/kvlease/kvlease/clock"
	"github.com/kvlease/kvlease/wire"
)

// endpointDriver drives a lone Consumer against an endpoint that is not a
// prefill engine: every dial connects (the kernel accepts), and the
// endpoint either never answers (silent) or closes on the HELLO.
type endpointDriver struct {
	t      *testing.T
	c      *Consumer
	now    clock.Instant
	closes bool // the endpoint closes the connection on the HELLO
	sess   SessionID
	live   SessionID
	dials  int
	closed int // sessions D closed itself
	done   []Done
	// dialsAtDone, closedAtDone: dials and closes when the pull finished
	// (afterwards D dials only to deliver its RELEASE notice).
	dialsAtDone, closedAtDone int
}

func (d *endpointDriver) take() []Action {
	acts, done := d.c.Take()
	if len(done) > 0 && len(d.done) == 0 {
		d.dialsAtDone, d.closedAtDone = d.dials, d.closed
		for _, a := range acts {
			if a.Kind == ActionClose {
				d.closedAtDone++
			}
		}
	}
	d.done = append(d.done, done...)
	return acts
}

// runUntil steps the consumer through its deadlines up to t.
func (d *endpointDriver) runUntil(t clock.Instant) {
	d.t.Helper()
	for steps := 0; ; steps++ {
		if steps > 10000 {
			d.t.Fatal("no progress")
		}
		d.c.Tick(d.now, true)
		acts := d.take()
		for _, a := range acts {
			switch a.Kind {
			case ActionDial:
				d.dials++
				d.sess++
				d.live = d.sess
				d.c.Dialed(d.now, a.Addr, d.sess)
			case ActionSend:
				if _, ok := a.Msg.(*wire.Hello); ok && d.closes && a.Session == d.live {
					d.live = 0
					d.c.Disconnected(d.now, a.Session)
				}
			case ActionClose:
				d.closed++
				if a.Session == d.live {
					d.live = 0
				}
			}
		}
		if len(acts) > 0 {
			continue
		}
		next := d.c.NextDeadline()
		if next > t {
			d.now = t
			d.c.Tick(d.now, true)
			d.take()
			return
		}
		d.now = max(next, d.now+1)
	}
}

func newEndpointDriver(t *testing.T, closes bool, log *slog.Logger) *endpointDriver {
	cfg := DefaultConfig(PolicyLease) // the default 30 s lease
	c := NewConsumer(cfg, testPool(), "d", testSecret, rand.New(rand.NewPCG(5, 6)))
	c.SetLogger(log)
	d := &endpointDriver{t: t, c: c, closes: closes}
	ok := c.Enqueue(0, PullRequest{Req: 1, Prompt: prompt("x", 8),
		Remote: Remote{EngineID: "p", Addr: "10.0.0.9:8000", Lease: 1, NumBlocks: 2, NumTokens: 8, ExpiresIn: cfg.LeaseDuration}})
	if !ok {
		t.Fatal("enqueue refused")
	}
	return d
}

// TestConsumerWrongEndpointFallsBackFast is S28 at the core: an endpoint
// that accepts connections but never completes the handshake (a silent
// listener, a SIGSTOPped P) or closes on the HELLO (an HTTP port) costs
// MaxReadAttempts handshakes, not the lease; the fallback says why.
func TestConsumerWrongEndpointFallsBackFast(t *testing.T) {
	for _, tc := range []struct {
		name   string
		closes bool
		kind   FailureKind
		why    FallbackReason
	}{
		{"silent", false, FailureHandshakeTimeout, FallbackHandshakeTimeout},
		{"closes on hello", true, FailureHandshakeClosed, FallbackHandshakeClosed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var logs bytes.Buffer
			d := newEndpointDriver(t, tc.closes, slog.New(slog.NewTextHandler(&logs, nil)))
			cfg := d.c.Config()
			// Three handshakes, each failing at once or after the
			// handshake timeout, spaced by the retry interval.
			limit := clock.Instant(0).Add(time.Duration(cfg.MaxReadAttempts) * (cfg.HandshakeTimeout + cfg.RetryInterval))
			d.runUntil(limit)
			if len(d.done) != 1 || d.done[0].Outcome != FellBack || d.done[0].Why != tc.why || d.done[0].Peer != "10.0.0.9:8000" {
				t.Fatalf("done %+v (dials %d)", d.done, d.dials)
			}
			if limit >= clock.Instant(0).Add(cfg.LeaseDuration/4) {
				t.Fatalf("the bound %v is not well within the lease", limit)
			}
			st := d.c.Stats()
			if d.dialsAtDone != cfg.MaxReadAttempts || st.Failures[tc.kind] < uint64(cfg.MaxReadAttempts) || st.Fallbacks[tc.why] != 1 {
				t.Fatalf("dials %d, stats %+v", d.dials, st)
			}
			if tc.kind == FailureHandshakeTimeout && d.closedAtDone != cfg.MaxReadAttempts {
				t.Fatalf("D closed %d timed-out sessions, want %d", d.closedAtDone, cfg.MaxReadAttempts)
			}
			if st.PeersFailing[tc.kind] != 1 || d.c.pool.NumHeld() != 0 {
				t.Fatalf("peers failing %v, held %d", st.PeersFailing, d.c.pool.NumHeld())
			}
			// One WARN line for the three failures (rate-limited), naming
			// the peer and the reason.
			if n := strings.Count(logs.String(), "level=WARN"); n != 1 ||
				!strings.Contains(logs.String(), "peer=10.0.0.9:8000") || !strings.Contains(logs.String(), "reason="+tc.kind.String()) {
				t.Fatalf("logs:\n%s", logs.String())
			}
			// The failing record outlives the pulls (an alert sees it),
			// then ages out: D stops dialing when its RELEASE notice
			// would have met an expired lease.
			d.runUntil(clock.Instant(0).Add(cfg.LeaseDuration + FailingWindow + time.Second))
			if st := d.c.Stats(); len(st.PeersFailing) != 0 {
				t.Fatalf("peers failing after the window: %v", st.PeersFailing)
			}
		})
	}
}

// TestConsumerWrongSecretIsLoud: a decode engine with another cluster
// secret says so: a WARN per peer (rate-limited), the failure counted, and
// the peer listed as failing "unauthenticated" until a handshake succeeds.
func TestConsumerWrongSecretIsLoud(t *testing.T) {
	var logs bytes.Buffer
	e := newPair(t, testConfig(PolicyLease))
	e.c.SetLogger(slog.New(slog.NewTextHandler(&logs, nil)))
	e.c.secret = []byte("another cluster")
	for i := range 3 {
		e.enqueue(uint64(i+1), "r"+string(rune('a'+i)), 8)
		e.run(e.now.Add(100*time.Millisecond), true)
	}
	st := e.c.Stats()
	if st.Fallbacks[FallbackUnauthenticated] != 3 || st.Failures[FailureUnauthenticated] != 3 || st.PeersFailing[FailureUnauthenticated] != 1 {
		t.Fatalf("%+v", st)
	}
	if n := strings.Count(logs.String(), "level=WARN"); n != 1 || !strings.Contains(logs.String(), "different cluster secrets") {
		t.Fatalf("logs:\n%s", logs.String())
	}
	// The secret is fixed: the next handshake succeeds and clears it.
	e.c.secret = testSecret
	e.enqueue(9, "rz", 8)
	e.run(e.now.Add(100*time.Millisecond), true)
	if d, ok := e.doneOf(9); !ok || d.Outcome != Pulled {
		t.Fatalf("%+v", e.done)
	}
	if st := e.c.Stats(); len(st.PeersFailing) != 0 {
		t.Fatalf("%v", st.PeersFailing)
	}
}

// TestConsumerBadVersion: a P of another protocol version is named as such.
func TestConsumerBadVersion(t *testing.T) {
	e := newPair(t, testConfig(PolicyLease))
	e.enqueue(1, "r", 8)
	e.dropToP = func(m wire.Message) bool {
		if _, ok := m.(*wire.Hello); ok {
			e.toD = append(e.toD, &wire.HelloAck{Version: wire.Version + 1, EngineID: "p", Status: wire.StatusBadVersion})
			return true
		}
		return false
	}
	e.run(at(0), true)
	if d, ok := e.doneOf(1); !ok || d.Why != FallbackBadVersion {
		t.Fatalf("%+v", e.done)
	}
}

// TestConsumerJunkDoesNotExtendRead: a faulty P that keeps sending BLOCK
// frames that are not progress (duplicates, bad indexes, corrupt data)
// does not keep a read alive: its deadline runs from the last verified
// new block.
func TestConsumerJunkDoesNotExtendRead(t *testing.T) {
	e := newPair(t, testConfig(PolicyLease)) // reads time out after 600 ms without progress
	e.enqueue(1, "r", 12)
	var first *wire.Block
	e.alter = func(m wire.Message) wire.Message {
		if b, ok := m.(*wire.Block); ok {
			if first == nil && b.Index == 0 {
				first = b
				return b // one valid block, then nothing valid
			}
			return nil
		}
		if _, ok := m.(*wire.ReadEnd); ok {
			return nil // the stream never ends
		}
		return m
	}
	e.run(at(0), true)
	if first == nil {
		t.Fatal("no block streamed")
	}
	junk := func(now clock.Instant) {
		rd := sentOf[*wire.Read](e)[0]
		dup := *first
		bad := *first
		bad.Index = 999
		corrupt := *first
		corrupt.Index = 1
		corrupt.Checksum++
		for _, m := range []*wire.Block{&dup, &bad, &corrupt} {
			m.ReadID = rd.ReadID
			e.c.Handle(now, e.sess, m)
		}
	}
	for ms := 50; ms < 600; ms += 50 {
		e.run(at(ms), true)
		junk(at(ms))
	}
	e.run(at(599), true)
	if e.c.Stats().Failures[FailureTimeout] != 0 {
		t.Fatal("timed out before the deadline")
	}
	e.run(at(600), true)
	if e.c.Stats().Failures[FailureTimeout] != 1 {
		t.Fatalf("junk kept the read alive: %+v", e.c.Stats())
	}
}
