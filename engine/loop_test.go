package engine

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/kvlease/kvlease/kvblock"
	"github.com/kvlease/kvlease/model"
	"github.com/kvlease/kvlease/sched"
	"github.com/kvlease/kvlease/transport"
	"github.com/kvlease/kvlease/wire"
	"github.com/kvlease/kvlease/xfer"
)

// windowPort is a Port whose connection takes window blocks at a time:
// the test decides when queued blocks are written (flush), as a socket
// would drain.
type windowPort struct {
	window  int
	queued  []sentBlock // frames not yet written (m set: a message)
	wire    []wire.Message
	events  []transport.Event
	refused bool // SendBlock refuses (the connection is closing)
}

type sentBlock struct {
	m   wire.Message
	b   *wire.Block
	tag uint64
	id  transport.ConnID
}

func (p *windowPort) Poll(buf []transport.Event) []transport.Event {
	buf = append(buf, p.events...)
	p.events = p.events[:0]
	return buf
}
func (p *windowPort) Dial(transport.Addr) {}
func (p *windowPort) Send(_ transport.ConnID, m wire.Message) bool {
	if len(p.queued) > 0 {
		p.queued = append(p.queued, sentBlock{m: m})
	} else {
		p.wire = append(p.wire, m)
	}
	return true
}
func (p *windowPort) SendBlock(id transport.ConnID, b *wire.Block, tag uint64) bool {
	if p.refused {
		return false
	}
	p.queued = append(p.queued, sentBlock{b: b, tag: tag, id: id})
	return true
}
func (p *windowPort) Writable(transport.ConnID) bool { return len(p.queued) < p.window }
func (p *windowPort) Close(transport.ConnID)         {}

// flush writes every queued block (lost: reports them lost) and queues
// their Sent events.
func (p *windowPort) flush(lost bool) {
	for _, q := range p.queued {
		if q.m != nil {
			p.wire = append(p.wire, q.m)
			continue
		}
		ev := transport.Event{Kind: transport.Sent, Conn: q.id, Tag: q.tag}
		if lost {
			ev.Reason = "connection reset"
		} else {
			p.wire = append(p.wire, q.b)
		}
		p.events = append(p.events, ev)
	}
	p.queued = p.queued[:0]
}

// loopWait bounds the waits of the tests over real sockets.
const loopWait = 10 * time.Second

func prefillLoop(t *testing.T, port Port, maxReads int) *Loop {
	t.Helper()
	xc := xfer.DefaultConfig(xfer.PolicyLease)
	core := NewCore(Config{
		Pool:        kvblock.Config{NumBlocks: 64, BlockSizeTokens: 4},
		Sched:       sched.DefaultConfig(),
		MaxModelLen: 128, VocabSize: 257, EOS: 256, RecentFinished: 16,
		Role: RolePrefill, EngineID: "p0", Transfer: &xc, Secret: []byte("secret"),
	}, rand.New(rand.NewPCG(1, 1)))
	return NewLoop(core, stepExec{}, LoopConfig{Port: port, MaxReadStreams: maxReads})
}

// TestLoopStreamsReadsWithinWindow: a read larger than the connection's
// window is sent over several turns, each waiting for the window to open,
// blocks in order then READ_END; the read ends only once the port has
// reported every block; a read beyond MaxReadStreams is refused with
// READ_END(busy) at once.
func TestLoopStreamsReadsWithinWindow(t *testing.T) {
	port := &windowPort{window: 4}
	l := prefillLoop(t, port, 1)
	const numBlocks = 10
	w1 := xfer.ReadWork{Session: 1, ReadID: 1, Lease: 7, Blocks: make([]wire.Block, numBlocks)}
	for i := range w1.Blocks {
		w1.Blocks[i] = wire.Block{ReadID: 1, Lease: 7, Index: uint32(i)}
	}
	w2 := xfer.ReadWork{Session: 1, ReadID: 2, Lease: 8, Blocks: w1.Blocks[:1]}
	l.startRead(0, w1)
	l.startRead(0, w2)
	if len(l.reads) != 1 {
		t.Fatalf("%d reads streaming, want 1 (MaxReadStreams)", len(l.reads))
	}
	if end, ok := port.wire[0].(*wire.ReadEnd); !ok || end.ReadID != 2 || end.Status != wire.StatusBusy {
		t.Fatalf("first frame %v, want READ_END(busy) for read 2", port.wire[0])
	}
	port.wire = port.wire[:0]
	pumps := 0
	for {
		l.poll(0)
		ended := l.pump(0)
		pumps++
		if len(port.queued) > port.window {
			t.Fatalf("%d blocks queued over a window of %d", len(port.queued), port.window)
		}
		if ended {
			break
		}
		if pumps > 10 {
			t.Fatal("the read never ended")
		}
		port.flush(false)
	}
	if pumps < numBlocks/port.window {
		t.Errorf("the read ended after %d pumps: it did not wait for the window", pumps)
	}
	if len(l.reads) != 0 || len(l.sending) != 0 {
		t.Errorf("%d reads and %d senders left after the read ended", len(l.reads), len(l.sending))
	}
	for i := range numBlocks {
		if b, ok := port.wire[i].(*wire.Block); !ok || b.Index != uint32(i) {
			t.Fatalf("frame %d is %v, want block %d", i, port.wire[i], i)
		}
	}
	if end, ok := port.wire[numBlocks].(*wire.ReadEnd); !ok || end.ReadID != 1 || end.Status != wire.StatusOK {
		t.Fatalf("last frame %v, want READ_END(ok) for read 1", port.wire[numBlocks])
	}
}

// TestLoopReadPinnedUntilBlocksReported: a read whose connection closes
// while the port still references its blocks ends only after the port has
// reported them (lost), never at the Closed event itself.
func TestLoopReadPinnedUntilBlocksReported(t *testing.T) {
	port := &windowPort{window: 100}
	l := prefillLoop(t, port, 8)
	w := xfer.ReadWork{Session: 3, ReadID: 1, Lease: 7, Blocks: make([]wire.Block, 3)}
	l.startRead(0, w)
	if l.pump(0) {
		t.Fatal("the read ended with its blocks still queued")
	}
	port.events = append(port.events, transport.Event{Kind: transport.Closed, Conn: 3})
	l.poll(0)
	if len(l.reads) != 1 {
		t.Fatal("the read was dropped while the port still referenced its blocks")
	}
	port.flush(true)
	l.poll(0)
	if !l.pump(0) || len(l.reads) != 0 {
		t.Fatal("the read did not end once its blocks were reported")
	}
}

// stepExec is a test executor: every sampled token is 'a' + position % 26
// and every step takes dur.
type stepExec struct{ dur time.Duration }

func (e stepExec) Execute(b *model.Batch, out *model.StepResult) {
	out.Tokens = out.Tokens[:0]
	for _, s := range b.Seqs {
		tok := model.NoToken
		if s.Sample {
			tok = 'a' + int32(len(s.Tokens)%26)
		}
		out.Tokens = append(out.Tokens, tok)
	}
	out.Duration = e.dur
}
