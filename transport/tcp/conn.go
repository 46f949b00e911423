package tcp

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kvlease/kvlease/transport"
	"github.com/kvlease/kvlease/wire"
)

// readBufferBytes is the socket read buffer of a connection.
const readBufferBytes = 64 << 10

// maxKeptReadBuffer is the largest frame buffer a reader keeps for the next
// frame; a larger one (a huge RENEW) is left to the garbage collector.
const maxKeptReadBuffer = 1 << 20

// conn is one connection and its two goroutines: the reader, the only one
// that reports Received and Closed, and the writer, the only one that
// writes to the socket. Whoever detects a failure first calls fail, which
// records the reason and closes the socket; the reader then reports Closed
// with that first reason.
type conn struct {
	t      *Transport
	id     transport.ConnID
	remote transport.Addr
	nc     net.Conn // set by attach before start; read-only afterwards

	ownerClosed atomic.Bool   // written under mu; read anywhere
	lingering   atomic.Bool   // the writer half-closed after an owner Close
	wakeW       chan struct{} // capacity 1: the writer has work
	dead        chan struct{} // closed by the first fail
	writerDone  chan struct{} // closed when the writer has returned: every done called

	mu           sync.Mutex
	up           bool // attached: Send may queue
	isDead       bool
	reason       string
	queue        []outFrame // frames not yet handed to the writer
	queued       int        // bytes in queue and in the writer's current batch
	wantWritable bool       // Writable said no: signal Ready under the window
	cancelDial   context.CancelFunc

	refusal string // the owner refused the peer's handshake (observeSent)

	sealDone []chan struct{} // writer-owned: writeSealed's per-frame seals

	seal sealing // frame authentication, with Config.Secret

	accepted bool   // set before start: P's side of the connection
	source   string // accepted: the peer's IP, for MaxUnauthenticatedPerSource
	authed   atomic.Bool
	tampered atomic.Bool // a frame failed authentication (ReasonTampered)
	hsTimer  *time.Timer // accepted: Config.HandshakeTimeout; set before start
	// Guarded by Transport.mu: the unauthenticated set's links, and whether
	// Stats.Authenticated counts c.
	unauthPrev, unauthNext *conn
	inUnauth               bool
	countedAuthed          bool

	lastDeadline time.Time // reader-owned: last idle deadline set (zero: set it again)
	frameBytes   int       // reader-owned: the frame being read, 0 between frames
	frameWithin  time.Duration
	// maxDelivered is the largest frame the peer has sent (authenticated,
	// when sealed); written by whoever delivers frames.
	maxDelivered atomic.Int64
}

// outFrame is one queued frame: buf (from getBuf), then, for a zero-copy
// BLOCK, data, the caller's Block.Data, referenced until done is called.
type outFrame struct {
	buf  []byte
	data []byte
	done func(ok bool)
	seal bool // the writer seals it (Config.Secret, after the handshake)
}

func (f *outFrame) size() int { return len(f.buf) + len(f.data) }

// finish recycles f's buffer and reports its outcome to the sender.
func (f *outFrame) finish(ok bool) {
	putBuf(f.buf)
	if f.done != nil {
		f.done(ok)
	}
	*f = outFrame{}
}

func newConn(t *Transport, id transport.ConnID, remote transport.Addr) *conn {
	return &conn{t: t, id: id, remote: remote, wakeW: make(chan struct{}, 1),
		dead: make(chan struct{}), writerDone: make(chan struct{})}
}

// attach gives c its socket. The caller holds t.mu, so Shutdown either sees
// the socket or is seen by the caller.
func (c *conn) attach(nc net.Conn) {
	c.nc = nc
	c.mu.Lock()
	c.up = true
	c.mu.Unlock()
}

// start runs the reader and the writer. The caller is a goroutine of the
// transport's wait group, so the group is not at zero.
func (c *conn) start() {
	c.t.wg.Add(2)
	go c.readLoop()
	go c.writeLoop()
}

// fail breaks the connection: the first reason is kept, queued frames are
// dropped and the socket is closed, which ends the reader's and the writer's
// blocking calls.
func (c *conn) fail(reason string) {
	c.mu.Lock()
	if c.reason == "" {
		c.reason = reason
	}
	first := !c.isDead
	c.isDead = true
	dropped := c.queue
	c.queue = nil
	c.mu.Unlock()
	for i := range dropped {
		dropped[i].finish(false)
	}
	if first {
		close(c.dead)
		c.nc.Close()
	}
}

func (c *conn) failReason() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.reason
}

// ownerClose is Transport.Close(id).
func (c *conn) ownerClose() {
	c.mu.Lock()
	if c.ownerClosed.Load() {
		c.mu.Unlock()
		return
	}
	c.ownerClosed.Store(true)
	cancel := c.cancelDial
	c.mu.Unlock()
	if cancel != nil {
		cancel()
	}
	select {
	case c.wakeW <- struct{}{}:
	default:
	}
}

// enqueue queues f, or recycles f.buf and reports false without calling
// f.done.
func (c *conn) enqueue(f outFrame, m wire.Message) bool {
	limit := c.t.cfg.MaxQueuedBytes
	c.mu.Lock()
	if !c.up || c.isDead || c.ownerClosed.Load() {
		c.mu.Unlock()
		putBuf(f.buf)
		return false
	}
	if c.t.cfg.Secret != nil {
		// In queue order, which is the wire's: the frames after this end's
		// last plain one are sealed.
		f.seal = c.seal.out
		if !c.seal.out {
			c.recordHandshakeLocked(m)
			if sealsAfter(m, c.accepted) {
				if c.seal.sealer == nil {
					c.mu.Unlock()
					putBuf(f.buf)
					c.fail(fmt.Sprintf("%s: %s sent before the handshake's HELLO and HELLO_ACK", ReasonBadFrame, m.Type()))
					return false
				}
				c.seal.out = true
			}
		}
	}
	if c.queued > 0 && c.queued+f.size() > limit {
		n := c.queued + f.size()
		c.mu.Unlock()
		putBuf(f.buf)
		c.fail(fmt.Sprintf("%s: %d bytes queued, limit %d", ReasonQueueOverflow, n, limit))
		return false
	}
	c.queue = append(c.queue, f)
	c.queued += f.size()
	c.mu.Unlock()
	select {
	case c.wakeW <- struct{}{}:
	default:
	}
	return true
}

func (c *conn) writable() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.up || c.isDead || c.queued < c.t.cfg.WindowBytes {
		return true
	}
	c.wantWritable = true
	return false
}

// writeLoop writes queued frames in batches (one writev each), a keepalive
// when idle, and after an owner Close the rest of the queue and a FIN.
// Zero-copy frames are written straight from the sender's memory; each
// frame's done is called once its bytes are written or the write failed,
// and always before the writer returns (the reader waits for that before it
// reports Closed).
func (c *conn) writeLoop() {
	defer c.t.wg.Done()
	defer close(c.writerDone)
	cfg := &c.t.cfg
	ka := time.NewTimer(cfg.KeepaliveInterval)
	defer ka.Stop()
	var (
		batch, spare []outFrame
		bufs         net.Buffers
	)
	for {
		c.mu.Lock()
		batch, c.queue = c.queue, spare[:0]
		closing := c.ownerClosed.Load()
		dead := c.isDead
		sealed := c.seal.out
		c.mu.Unlock()
		if dead {
			return
		}
		if len(batch) == 0 {
			spare = batch
			if closing {
				c.closeWrite()
				return
			}
			select {
			case <-c.wakeW:
			case <-c.dead:
				return
			case <-ka.C:
				c.nc.SetWriteDeadline(time.Now().Add(cfg.WriteTimeout))
				kf := keepaliveFrame
				if sealed { // nothing is queued: it goes next on the wire
					kf = c.seal.sealer.Seal(append(make([]byte, 0, len(kf)+wire.SealOverhead), kf...))
				}
				if _, err := c.nc.Write(kf); err != nil {
					c.fail(writeReason(err, cfg.WriteTimeout))
					return
				}
				ka.Reset(cfg.KeepaliveInterval)
			}
			continue
		}
		total := 0
		sealing := false
		for i := range batch {
			total += batch[i].size() // as enqueued, before sealing
			sealing = sealing || batch[i].seal
		}
		var err error
		if sealing {
			bufs, err = c.writeSealed(batch, bufs)
		} else {
			bufs = bufs[:0]
			for i := range batch {
				f := &batch[i]
				bufs = append(bufs, f.buf)
				if len(f.data) > 0 {
					bufs = append(bufs, f.data)
				}
			}
			err = c.writeBufs(&bufs)
		}
		if err != nil {
			// fail first, so a done(false) finds the connection broken.
			c.fail(writeReason(err, cfg.WriteTimeout))
		}
		for i := range batch {
			batch[i].finish(err == nil)
		}
		spare = batch[:0]
		if err != nil {
			return
		}
		c.mu.Lock()
		c.queued -= total
		wake := c.wantWritable && c.queued < cfg.WindowBytes
		if wake {
			c.wantWritable = false
		}
		c.mu.Unlock()
		if wake {
			c.t.signal()
		}
		ka.Reset(cfg.KeepaliveInterval)
	}
}

// writeBufs writes bufs with one writev under the write deadline.
// WriteTo consumes bufs (it nils written entries); the batch keeps the
// frames for recycling and their done.
func (c *conn) writeBufs(bufs *net.Buffers) error {
	c.nc.SetWriteDeadline(time.Now().Add(c.t.cfg.WriteTimeout))
	_, err := bufs.WriteTo(c.nc)
	clear((*bufs)[:cap(*bufs)])
	return err
}

// parallelSealBytes is the frame size from which a frame is sealed (or
// opened) on a goroutine of its own, beside the writer (or the reader):
// a 2 MiB BLOCK takes about half a millisecond of AES-GCM, a RENEW a few
// microseconds, less than handing it over.
const parallelSealBytes = 64 << 10

// sealWorkers bounds the frames of one connection being sealed (or
// opened) at once.
func sealWorkers() int { return max(2, runtime.GOMAXPROCS(0)) }

// writeSealed seals batch's frames and writes them in order, pipelined:
// the frames get their sequence numbers in queue order (the writer owns
// the Sealer's Next), the large ones are sealed on goroutines of their
// own, up to sealWorkers at once, and each run of frames already sealed
// goes out in one writev while the next ones are being sealed. It returns
// once every frame is written or the write failed, and always after every
// seal of the batch ended (a frame's buffer is then the writer's again).
func (c *conn) writeSealed(batch []outFrame, bufs net.Buffers) (net.Buffers, error) {
	n := len(batch)
	if cap(c.sealDone) < n {
		c.sealDone = make([]chan struct{}, n)
	}
	done := c.sealDone[:n]
	clear(done)
	workers := sealWorkers()
	inflight, next := 0, 0
	dispatch := func() {
		for ; next < n && inflight < workers; next++ {
			f := &batch[next]
			if !f.seal {
				continue
			}
			seq := c.seal.sealer.Next()
			if f.size() < parallelSealBytes {
				c.sealFrame(f, seq)
				continue
			}
			ch := make(chan struct{})
			done[next] = ch
			inflight++
			go func() {
				c.sealFrame(f, seq)
				close(ch)
			}()
		}
	}
	var err error
	for w := 0; w < n; {
		dispatch()
		// The frames from w on that are sealed, waiting for the first.
		bufs = bufs[:0]
	collect:
		for start := w; w < next; w++ {
			if ch := done[w]; ch != nil {
				if w == start {
					<-ch
				} else if !closed(ch) {
					break collect
				}
				done[w] = nil
				inflight--
			}
			f := &batch[w]
			bufs = append(bufs, f.buf)
			if len(f.data) > 0 {
				bufs = append(bufs, f.data)
			}
		}
		dispatch() // seal more while this run is written
		if err = c.writeBufs(&bufs); err != nil {
			break
		}
	}
	for i, ch := range done { // the seals still running
		if ch != nil {
			<-ch
			done[i] = nil
		}
	}
	return bufs, err
}

// closed reports whether ch is closed, without waiting.
func closed(ch chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// closeWrite ends an owner-closed connection gracefully: a FIN after the
// last frame, then the reader discards what the peer still sends until it
// closes too, for at most IdleTimeout. Closing the socket at once could
// reset it and lose the frames just written.
func (c *conn) closeWrite() {
	c.lingering.Store(true)
	c.nc.SetReadDeadline(time.Now().Add(c.t.cfg.IdleTimeout))
	if tc, ok := c.nc.(interface{ CloseWrite() error }); ok {
		if tc.CloseWrite() == nil {
			return
		}
	}
	c.fail(ReasonTransportClosed)
}

func writeReason(err error, timeout time.Duration) string {
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return fmt.Sprintf("%s: a write made no progress for %v", ReasonWriteTimeout, timeout)
	}
	return ReasonWriteError + ": " + err.Error()
}

// idleDeadline sets the socket's read deadline for the wait for the next
// frame: a connection on which no frame starts for IdleTimeout fails. It
// refreshes at most every IdleTimeout/8 (unless a frame's deadline was
// set), so the effective limit lies between 7/8 of IdleTimeout and
// IdleTimeout. A lingering connection keeps the deadline closeWrite set.
func (c *conn) idleDeadline() {
	if c.lingering.Load() {
		return
	}
	idle := c.t.cfg.IdleTimeout
	if now := time.Now(); now.Sub(c.lastDeadline) >= idle/8 {
		c.nc.SetReadDeadline(now.Add(idle))
		c.lastDeadline = now
	}
}

// frameDeadline sets the read deadline of a frame of need bytes whose
// length prefix has arrived but not all of its bytes: IdleTimeout plus
// the time MinReceiveRate allows for them. A peer that trickles a frame
// (one byte a second) loses the connection, however it paces its bytes.
func (c *conn) frameDeadline(need int) {
	c.frameBytes = need
	if c.lingering.Load() {
		return
	}
	cfg := &c.t.cfg
	c.frameWithin = cfg.IdleTimeout + time.Duration(int64(need)*int64(time.Second)/int64(cfg.MinReceiveRate))
	c.nc.SetReadDeadline(time.Now().Add(c.frameWithin))
	c.lastDeadline = time.Time{} // the next wait sets the idle deadline again
}

// frameLimit is the largest payload the connection accepts now: a
// handshake message's before authentication, then its role's.
func (c *conn) frameLimit() int {
	switch {
	case !c.authed.Load():
		return wire.MaxHandshakePayloadBytes
	case c.accepted:
		return c.t.cfg.MaxAcceptedFrameBytes
	}
	return c.t.cfg.MaxFrameBytes
}

// readLoop reads, decodes and reports frames until the connection fails,
// then reports Closed (unless the owner closed it) and forgets it. Each
// frame is checked against the connection's cap on its length prefix
// alone, then reserved in the transport's receive budget until it is
// handed to the owner, and must arrive at MinReceiveRate.
func (c *conn) readLoop() {
	defer c.t.wg.Done()
	t := c.t
	size := readBufferBytes
	if !c.authed.Load() {
		size = handshakeReadBufferBytes
	}
	br := bufio.NewReaderSize(c.nc, size)
	var (
		buf       []byte
		opened    chan *sealedFrame // to the deliverer, once frames are sealed
		delivered chan struct{}     // closed when the deliverer has returned
	)
	for {
		if br.Size() < readBufferBytes && br.Buffered() == 0 && c.authed.Load() {
			br = bufio.NewReaderSize(c.nc, readBufferBytes)
		}
		c.idleDeadline()
		hdr, err := br.Peek(4)
		if err != nil {
			if errors.Is(err, io.EOF) && br.Buffered() > 0 {
				err = fmt.Errorf("%w: stream ended inside a frame: %w", wire.ErrTruncated, io.ErrUnexpectedEOF)
			}
			c.fail(c.readReason(err))
			break
		}
		n := int64(binary.BigEndian.Uint32(hdr))
		if limit := c.frameLimit(); n > int64(limit) {
			t.stats.drop(DropFrameTooLarge)
			why := fmt.Sprintf("%s: payload of %d bytes, limit %d", ReasonFrameTooLarge, n, limit)
			if !c.authed.Load() {
				why += " before authentication" + describeLength(hdr)
			}
			c.fail(why)
			break
		}
		need := int(n) + 1 // the type byte
		sealed := c.seal.in
		if sealed {
			need += 4 + wire.SealOverhead // the prefix is kept, the tag follows
		}
		if !t.recv.acquire(need, c.dead) {
			break // failed while waiting: the reason is set
		}
		if br.Buffered() < 4+need {
			c.frameDeadline(need)
		}
		if t.cfg.LendBlockData && c.authed.Load() {
			// Before authentication a frame is a few hundred bytes, read
			// into a buffer of its size, not a 4 KiB pool buffer.
			buf = c.pooledBuffer(need, buf)
		}
		var raw []byte // as read
		if sealed {
			raw, err = wire.ReadSealedFrame(br, buf[:0], c.frameLimit())
		} else {
			raw, err = wire.ReadFrame(br, buf[:0], c.frameLimit())
		}
		if err != nil {
			t.recv.release(need)
			c.fail(c.readReason(err))
			break
		}
		c.frameBytes = 0
		if sealed {
			// Opened and delivered in order by the deliverer, the large
			// ones opened on goroutines of their own meanwhile: the
			// reader goes on reading the next frame.
			if opened == nil {
				opened = make(chan *sealedFrame, sealWorkers())
				delivered = make(chan struct{})
				go c.deliverSealed(opened, delivered)
			}
			sf := &sealedFrame{raw: raw, need: need, seq: c.seal.opener.Next()}
			if len(raw) >= parallelSealBytes {
				sf.done = make(chan struct{})
				go func() {
					sf.plain, sf.err = c.seal.opener.OpenSeq(sf.raw, sf.seq)
					close(sf.done)
				}()
			}
			opened <- sf
			buf = nil // the deliverer recycles raw
			continue
		}
		var ok bool
		if buf, ok = c.deliver(raw, raw, need); !ok {
			break
		}
	}
	if opened != nil {
		close(opened)
		<-delivered // every frame read is delivered (or dropped) before Closed
	}
	// Every zero-copy frame's done precedes Closed: the owner may reuse
	// their memory once it sees Closed. The writer returns promptly: the
	// socket is closed.
	<-c.writerDone
	if !c.authed.Load() {
		c.handshakeEnded()
	}
	if !c.ownerClosed.Load() {
		t.push(c, transport.Event{Kind: transport.Closed, Conn: c.id, Remote: c.remote, Reason: c.failReason(),
			Tampered: c.tampered.Load()})
	}
	t.forget(c)
}

// sealedFrame is a sealed frame read, on its way to the deliverer: its
// bytes as read, its receive budget, its sequence number and, when it is
// opened on a goroutine of its own (done not nil), the outcome.
type sealedFrame struct {
	raw   []byte
	need  int
	seq   uint64
	done  chan struct{}
	plain []byte
	err   error
}

// deliverSealed opens (or waits for the opening of) each sealed frame the
// reader hands it, in order, and delivers it. After a failure it only
// recycles what still comes, until the reader closes in.
func (c *conn) deliverSealed(in <-chan *sealedFrame, done chan<- struct{}) {
	defer close(done)
	failed := false
	for sf := range in {
		if sf.done != nil {
			<-sf.done
		} else {
			sf.plain, sf.err = c.seal.opener.OpenSeq(sf.raw, sf.seq)
		}
		if failed {
			c.t.recv.release(sf.need)
			c.recycle(sf.raw)
			continue
		}
		if sf.err != nil {
			c.t.recv.release(sf.need)
			c.recycle(sf.raw)
			c.t.stats.drop(DropTampered)
			c.tampered.Store(true)
			c.fail(ReasonTampered + ": " + sf.err.Error())
			failed = true
			continue
		}
		buf, ok := c.deliver(sf.raw, sf.plain, sf.need)
		c.recycle(buf)
		failed = !ok
	}
}

// recycle returns a frame buffer to the pool with LendBlockData (the
// reader took it there); otherwise the garbage collector has it.
func (c *conn) recycle(buf []byte) {
	if buf != nil && c.t.cfg.LendBlockData {
		putBuf(buf)
	}
}

// deliver decodes the frame read as raw (type byte and payload: frame,
// opened when sealed) and queues it for the owner, then releases its
// receive budget (need). It returns the buffer free for the next frame
// (nil when the frame's bytes went with a Block), and false when the
// connection failed.
func (c *conn) deliver(raw, frame []byte, need int) ([]byte, bool) {
	t := c.t
	c.maxDelivered.Store(max(c.maxDelivered.Load(), int64(len(raw))))
	if isKeepalive(frame) {
		t.recv.release(need)
		return raw, true
	}
	m, err := wire.Decode(frame)
	if err != nil {
		t.recv.release(need)
		t.stats.drop(DropBadFrame)
		c.fail(ReasonBadFrame + ": " + err.Error())
		return raw, false
	}
	if why := c.observeReceived(m); why != "" {
		t.recv.release(need)
		t.stats.drop(DropBadFrame)
		c.fail(why)
		return raw, false
	}
	// A Block's Data aliases the frame: the frame goes with it to the
	// owner (as a loan with LendBlockData), and the next frame gets
	// another buffer.
	lend := t.cfg.LendBlockData
	var lent, next []byte
	if _, isBlock := m.(*wire.Block); isBlock {
		if lend {
			lent = raw
		}
	} else if cap(raw) > maxKeptReadBuffer {
		if lend {
			putBuf(raw) // Decode copied what it needs
		}
	} else {
		next = raw
	}
	if c.ownerClosed.Load() {
		if lent != nil {
			putBuf(lent)
		}
		t.recv.release(need)
		return next, true // draining after the owner's Close
	}
	ok := t.pushLent(c, transport.Event{Kind: transport.Received, Conn: c.id, Remote: c.remote, Msg: m}, lent)
	t.recv.release(need)
	if !ok {
		c.fail(ReasonTransportClosed)
	}
	return next, ok
}

// pooledFrameBytes is the frame size up to which a reader with
// LendBlockData takes a pool buffer on the length prefix alone: what
// wire.ReadFrame would allocate for it anyway.
const pooledFrameBytes = 1 << 20

// pooledBuffer returns the buffer to read the next frame, of need bytes,
// into, with LendBlockData: buf if it is large enough; else a pool buffer
// of the frame's size if the frame is small or the peer has already
// delivered a frame at least as large, so a length prefix alone still buys
// no more memory than the peer has shown it sends; else buf, and
// wire.ReadFrame grows a buffer as the bytes arrive.
func (c *conn) pooledBuffer(need int, buf []byte) []byte {
	if cap(buf) >= need || (need > pooledFrameBytes && int64(need) > c.maxDelivered.Load()) {
		return buf
	}
	if buf != nil {
		putBuf(buf)
	}
	return getBuf(need)
}

func (c *conn) readReason(err error) string {
	switch {
	case errors.Is(err, io.EOF):
		return ReasonClosedByPeer
	case errors.Is(err, wire.ErrTruncated):
		return ReasonTruncated
	case errors.Is(err, wire.ErrFrameTooLarge): // unreachable: the length prefix was checked
		return ReasonFrameTooLarge + ": " + strings.TrimPrefix(err.Error(), wire.ErrFrameTooLarge.Error()+": ")
	case errors.Is(err, os.ErrDeadlineExceeded):
		if c.lingering.Load() {
			return ReasonTransportClosed
		}
		if c.frameBytes > 0 {
			c.t.stats.drop(DropSlowFrame)
			return fmt.Sprintf("%s: a frame of %d bytes did not arrive within %v (%d bytes/s at least)",
				ReasonSlowFrame, c.frameBytes, c.frameWithin, c.t.cfg.MinReceiveRate)
		}
		c.t.stats.drop(DropIdle)
		return fmt.Sprintf("%s: nothing received for %v", ReasonIdleTimeout, c.t.cfg.IdleTimeout)
	}
	return ReasonReadError + ": " + err.Error()
}
