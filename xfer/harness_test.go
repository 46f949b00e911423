package xfer

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/kvlease/kvlease/clock"
	"github.com/kvlease/kvlease/kvblock"
	"github.com/kvlease/kvlease/wire"
)

// Test pools: small blocks of 4 token slots, 8 KV bytes per slot.
const (
	testBlockSize = 4
	testBPT       = 8
	testBlocks    = 64
)

var testSecret = []byte("xfer test secret")

func testPool() *kvblock.Pool {
	return kvblock.New(kvblock.Config{NumBlocks: testBlocks, BlockSizeTokens: testBlockSize, BytesPerToken: testBPT})
}

// testConfig is a short lease: 600 ms, heartbeat 100 ms, extension 400 ms,
// grace 40 ms, retry 50 ms, and no claim deadline: the tests of other rules
// grant leases that nobody claims. claimConfig adds one.
func testConfig(p Policy) Config {
	c := DefaultConfig(p)
	c.ClaimTimeout = 0
	c.MaxQueueWait = 0 // TestMaxQueueWait sets one
	if p != PolicyLegacyTimeout {
		c = c.WithLease(600 * time.Millisecond)
	}
	return c
}

// claimConfig is testConfig(PolicyLease) with a claim deadline of 150 ms.
func claimConfig() Config {
	c := testConfig(PolicyLease)
	c.ClaimTimeout = 150 * time.Millisecond
	return c
}

func at(ms int) clock.Instant { return clock.Instant(time.Duration(ms) * time.Millisecond) }

// slotByte is the KV content of a prompt's slot: a function of the request
// and position, so a block in the wrong place is visible.
func slotByte(req string, pos, i int) byte {
	return byte(len(req)*31 + int(req[len(req)-1]) + pos*7 + i)
}

// pEnv drives a Producer instant by instant over a real pool, recording
// every release.
type pEnv struct {
	t    *testing.T
	pool *kvblock.Pool
	p    *Producer
	now  clock.Instant
	rel  []relEvent
	sess SessionID
}

type relEvent struct {
	at     clock.Instant
	lease  wire.LeaseID
	reason wire.Reason
}

func newPEnv(t *testing.T, cfg Config) *pEnv {
	t.Helper()
	e := &pEnv{t: t, pool: testPool()}
	e.p = NewProducer(cfg, e.pool, "p", testSecret, rand.New(rand.NewPCG(1, 2)))
	e.p.OnRelease(func(now clock.Instant, l wire.LeaseID, r wire.Reason) {
		e.rel = append(e.rel, relEvent{now, l, r})
	})
	return e
}

// check runs the producer's and the pool's own checks.
func (e *pEnv) check() {
	e.t.Helper()
	if err := e.pool.Check(); err != nil {
		e.t.Fatal(err)
	}
	if err := e.p.Check(); err != nil {
		e.t.Fatal(err)
	}
	if len(e.p.due) != 0 && len(e.p.due) > len(e.p.leases) {
		e.t.Fatalf("due heap has %d entries for %d leases", len(e.p.due), len(e.p.leases))
	}
}

// fill writes a prompt's KV into blocks as a prefill would.
func fill(pool *kvblock.Pool, req string, blocks []kvblock.BlockID, tokens int) {
	for pos := 0; pos < tokens; pos++ {
		b := blocks[pos/testBlockSize]
		slot := pool.SlotBytes(b, pos%testBlockSize)
		for i := range slot {
			slot[i] = slotByte(req, pos, i)
		}
		pool.Digests(b)[pos%testBlockSize] = kvblock.SlotDigest(slot)
	}
}

// grant prefills req (tokens slots), leases its blocks and drops the
// request hold, as the engine's teardown does.
func (e *pEnv) grant(req string, tokens int) Grant {
	e.t.Helper()
	h := e.pool.NewHold(kvblock.HoldRequest, 1)
	if !e.pool.Allocate(h, (tokens+testBlockSize-1)/testBlockSize) {
		e.t.Fatal("pool full")
	}
	fill(e.pool, req, e.pool.Blocks(h), tokens)
	g, ok := e.p.Grant(e.now, req, e.pool.Blocks(h), tokens)
	e.pool.Release(h)
	if !ok {
		e.t.Fatalf("grant of %s refused", req)
	}
	e.check()
	return g
}

// advance moves the clock to t and ticks.
func (e *pEnv) advance(t clock.Instant) {
	e.t.Helper()
	e.now = t
	e.p.Tick(t)
	e.check()
	if err := e.p.CheckDue(t); err != nil {
		e.t.Fatal(err)
	}
}

// connect opens and authenticates a session as D engine "d".
func (e *pEnv) connect() SessionID {
	e.t.Helper()
	e.sess++
	s := e.sess
	e.p.Connected(e.now, s)
	nonce := [16]byte{1, 2, 3, byte(s)}
	out := e.send(s, &wire.Hello{Version: wire.Version, EngineID: "d", Nonce: nonce})
	ack, ok := only[*wire.HelloAck](e.t, out)
	if !ok || ack.Status != wire.StatusOK || !wire.VerifyMAC(testSecret, wire.RoleP, nonce, "p", "d", ack.MAC) {
		e.t.Fatalf("bad HelloAck %+v", out)
	}
	out = e.send(s, &wire.Auth{MAC: wire.ComputeMAC(testSecret, wire.RoleD, ack.Nonce, "p", "d")})
	if a, ok := only[*wire.AuthAck](e.t, out); !ok || a.Status != wire.StatusOK {
		e.t.Fatalf("bad AuthAck %+v", out)
	}
	return s
}

// send hands m to the producer on s and returns what it sends back (reads
// are left to takeReads).
func (e *pEnv) send(s SessionID, m wire.Message) []Envelope {
	e.t.Helper()
	e.p.Handle(e.now, s, m)
	e.check()
	out, work := e.p.Take()
	e.p.work = work // keep reads for takeReads
	return out
}

func (e *pEnv) takeReads() []ReadWork {
	_, w := e.p.Take()
	return w
}

func ref(g Grant) wire.LeaseRef { return wire.LeaseRef{ID: g.Lease, Token: g.Token} }

// only returns the single message of type T in out.
func only[T wire.Message](t *testing.T, out []Envelope) (T, bool) {
	t.Helper()
	var zero T
	if len(out) != 1 {
		return zero, false
	}
	m, ok := out[0].Msg.(T)
	return m, ok
}

// renewedOK reports whether out answers a RENEW of the lease id as
// renewed: a RENEW_ACK with an OK result for it or, under
// Config.RenewsWhenDue, no result for it (P names only the leases that
// are gone, and answers a RENEW whose leases were all renewed with an
// empty RENEW_ACK or not at all).
func renewedOK(cfg Config, out []Envelope, id wire.LeaseID) bool {
	for _, env := range out {
		if a, ok := env.Msg.(*wire.RenewAck); ok {
			for _, r := range a.Results {
				if r.ID == id {
					return r.Status == wire.StatusOK
				}
			}
		}
	}
	return cfg.RenewsWhenDue()
}

func released(e *pEnv, l wire.LeaseID) (relEvent, bool) {
	for _, r := range e.rel {
		if r.lease == l {
			return r, true
		}
	}
	return relEvent{}, false
}

// --- a D and a P linked by an in-test network ---

// pairEnv links a Consumer (D) to a Producer (P) through in-memory queues
// that the test controls: P can be unreachable, messages held, dropped,
// duplicated or altered, and P's reads held (a stalled stream).
type pairEnv struct {
	t     *testing.T
	now   clock.Instant
	P     *pEnv
	dpool *kvblock.Pool
	c     *Consumer

	reachable bool // dials to P succeed
	hold      bool // the link holds traffic in both directions (partition)
	stall     bool // P does not stream reads (hung)
	dup       bool // every message is delivered twice
	// alter, when set, may change or drop (nil) a message to D.
	alter func(m wire.Message) wire.Message
	// dropToP, when set, drops matching messages to P.
	dropToP func(m wire.Message) bool

	sess    SessionID // the live session, 0 if none
	nextS   SessionID
	toP     []wire.Message
	toD     []wire.Message
	stalled []ReadWork
	done    []Done
	sent    []wire.Message // every message D sent
}

func newPair(t *testing.T, cfg Config) *pairEnv {
	e := &pairEnv{t: t, P: newPEnv(t, cfg), dpool: testPool(), reachable: true}
	e.c = NewConsumer(cfg, e.dpool, "d", testSecret, rand.New(rand.NewPCG(3, 4)))
	return e
}

// remote turns P's grant into the kv_transfer_params D receives.
func (e *pairEnv) remote(g Grant) Remote {
	return Remote{EngineID: "p", Addr: "p:9000", Lease: g.Lease, Token: g.Token,
		NumBlocks: len(g.BlockIDs), NumTokens: g.NumTokens, ExpiresIn: g.ExpiresIn}
}

// prompt is the token ids of req's prompt (their values only matter for
// D's prefix cache).
func prompt(req string, n int) []int32 {
	p := make([]int32, n)
	for i := range p {
		p[i] = int32(len(req)*100 + i)
	}
	return p
}

// enqueue grants a lease on P for req and enqueues its pull on D.
func (e *pairEnv) enqueue(req uint64, name string, tokens int) Grant {
	e.t.Helper()
	e.P.now = e.now
	g := e.P.grant(name, tokens)
	if !e.c.Enqueue(e.now, PullRequest{Req: req, Prompt: prompt(name, tokens), Remote: e.remote(g)}) {
		e.t.Fatalf("enqueue %s refused", name)
	}
	return g
}

func (e *pairEnv) check() {
	e.t.Helper()
	e.P.check()
	if err := e.dpool.Check(); err != nil {
		e.t.Fatal(err)
	}
	if err := e.c.Check(); err != nil {
		e.t.Fatal(err)
	}
}

// run advances to instant t and exchanges messages until nothing moves.
func (e *pairEnv) run(t clock.Instant, admit bool) {
	e.t.Helper()
	e.now = t
	e.P.now = t
	for range 1000 {
		e.P.p.Tick(t)
		e.c.Tick(t, admit)
		moved := e.exchange()
		e.check()
		if !moved {
			return
		}
	}
	e.t.Fatal("no quiescence")
}

// runUntil steps through every deadline of both sides up to t.
func (e *pairEnv) runUntil(t clock.Instant, admit bool) {
	e.t.Helper()
	for {
		next := min(e.c.NextDeadline(), e.P.p.NextDeadline())
		if next <= e.now {
			next = e.now + 1
		}
		if next > t {
			break
		}
		e.run(next, admit)
	}
	e.run(t, admit)
}

func (e *pairEnv) exchange() bool {
	moved := false
	acts, done := e.c.Take()
	e.done = append(e.done, done...)
	for _, a := range acts {
		moved = true
		switch a.Kind {
		case ActionDial:
			if !e.reachable {
				e.c.DialFailed(e.now, a.Addr)
				continue
			}
			e.nextS++
			e.sess = e.nextS
			e.P.p.Connected(e.now, e.sess)
			e.c.Dialed(e.now, a.Addr, e.sess)
		case ActionSend:
			e.sent = append(e.sent, a.Msg)
			if a.Session == e.sess {
				e.toP = append(e.toP, a.Msg)
				if e.dup {
					e.toP = append(e.toP, a.Msg)
				}
			}
		case ActionClose:
			if a.Session == e.sess {
				e.P.p.Disconnected(e.now, e.sess)
				e.sess = 0
				e.toP, e.toD = nil, nil
			}
		}
	}
	if e.hold {
		return moved
	}
	in := e.toP
	e.toP = nil
	for _, m := range in {
		moved = true
		if e.dropToP != nil && e.dropToP(m) {
			continue
		}
		if e.sess != 0 {
			e.P.p.Handle(e.now, e.sess, m)
		}
	}
	out, work := e.P.p.Take()
	for _, env := range out {
		moved = true
		e.toD = append(e.toD, env.Msg)
		if env.Close && env.Session == e.sess {
			e.c.Disconnected(e.now, e.sess)
			e.P.p.Disconnected(e.now, e.sess)
			e.sess = 0
		}
	}
	if e.stall {
		e.stalled = append(e.stalled, work...)
	} else {
		for _, w := range work {
			moved = true
			e.stream(w)
		}
	}
	msgs := e.toD
	e.toD = nil
	for _, m := range msgs {
		moved = true
		if e.alter != nil {
			if m = e.alter(m); m == nil {
				continue
			}
		}
		if e.sess != 0 {
			e.c.Handle(e.now, e.sess, m)
			if e.dup {
				e.c.Handle(e.now, e.sess, m)
			}
		}
	}
	return moved // what D's handling produced is taken next round
}

// stream sends a read's blocks (copied, as a socket would) and its end,
// then tells P the read finished.
func (e *pairEnv) stream(w ReadWork) {
	ok := w.Session == e.sess
	if ok {
		for i := range w.Blocks {
			b := w.Blocks[i]
			b.Data = append([]byte(nil), b.Data...)
			b.Digests = append([]uint64(nil), b.Digests...)
			e.toD = append(e.toD, &b)
		}
		e.toD = append(e.toD, &wire.ReadEnd{ReadID: w.ReadID, Lease: w.Lease, Status: wire.StatusOK})
	}
	e.P.p.ReadFinished(e.now, w.Session, w.ReadID, ok)
}

// unstall streams the held reads.
func (e *pairEnv) unstall() {
	e.stall = false
	ws := e.stalled
	e.stalled = nil
	for _, w := range ws {
		e.stream(w)
	}
}

// sentOf lists the messages of type T that D sent.
func sentOf[T wire.Message](e *pairEnv) []T {
	var out []T
	for _, m := range e.sent {
		if x, ok := m.(T); ok {
			out = append(out, x)
		}
	}
	return out
}

func (e *pairEnv) doneOf(req uint64) (Done, bool) {
	for _, d := range e.done {
		if d.Req == req {
			return d, true
		}
	}
	return Done{}, false
}
