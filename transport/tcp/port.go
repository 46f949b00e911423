package tcp

import (
	"context"
	"sync"

	"github.com/kvlease/kvlease/transport"
	"github.com/kvlease/kvlease/wire"
)

// Port is a Transport as an engine loop drives it (engine.Port): the same
// calls, except that a zero-copy block is named by a tag and its outcome
// comes back as a transport.Sent event from Poll rather than through a
// callback on the transport's goroutines. Like the Transport's Poll, a
// Port's Poll is for one goroutine, its owner's.
type Port struct {
	t    *Transport
	ctx  context.Context
	wake func()
	evs  []transport.Event // the transport's events, for Poll

	mu   sync.Mutex
	sent []transport.Event // Sent events not yet polled
}

// NewPort returns the port of t. wake is called (from any goroutine) when
// a block has been reported, so that the owner polls; dials run under ctx.
func NewPort(t *Transport, ctx context.Context, wake func()) *Port {
	return &Port{t: t, ctx: ctx, wake: wake}
}

// SetContext sets the context later dials run under.
func (p *Port) SetContext(ctx context.Context) { p.ctx = ctx }

// Poll appends the blocks reported since the last call, then the
// transport's events, to buf. The transport runs every done of a
// connection before it queues that connection's Closed, so taking the
// reports after its events keeps each block's Sent ahead of its
// connection's Closed.
func (p *Port) Poll(buf []transport.Event) []transport.Event {
	p.evs = p.t.Poll(p.evs[:0])
	p.mu.Lock()
	buf = append(buf, p.sent...)
	clear(p.sent)
	p.sent = p.sent[:0]
	p.mu.Unlock()
	buf = append(buf, p.evs...)
	clear(p.evs)
	return buf
}

// Dial is Transport.Dial under the port's context.
func (p *Port) Dial(addr transport.Addr) { p.t.Dial(p.ctx, addr) }

// Send is Transport.Send.
func (p *Port) Send(id transport.ConnID, m wire.Message) bool { return p.t.Send(id, m) }

// SendBlock is Transport.SendBlock with the outcome reported as a Sent
// event carrying tag (Reason set when the block was not written).
func (p *Port) SendBlock(id transport.ConnID, b *wire.Block, tag uint64) bool {
	return p.t.SendBlock(id, b, func(ok bool) {
		ev := transport.Event{Kind: transport.Sent, Conn: id, Tag: tag}
		if !ok {
			ev.Reason = "not written"
		}
		p.mu.Lock()
		p.sent = append(p.sent, ev)
		p.mu.Unlock()
		p.wake()
	})
}

// Writable is Transport.Writable.
func (p *Port) Writable(id transport.ConnID) bool { return p.t.Writable(id) }

// Close is Transport.Close.
func (p *Port) Close(id transport.ConnID) { p.t.Close(id) }
