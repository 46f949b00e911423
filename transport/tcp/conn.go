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
	maxDelivered int // reader-owned: the largest frame the peer has sent
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
		bufs = bufs[:0]
		for i := range batch {
			f := &batch[i]
			total += f.size() // as enqueued, before sealing
			if f.seal {
				c.sealFrame(f)
			}
			bufs = append(bufs, f.buf)
			if len(f.data) > 0 {
				bufs = append(bufs, f.data)
			}
		}
		// WriteTo consumes bufs (it nils written entries); batch keeps
		// the frames for recycling and their done.
		c.nc.SetWriteDeadline(time.Now().Add(cfg.WriteTimeout))
		_, err := bufs.WriteTo(c.nc)
		clear(bufs[:cap(bufs)])
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
	lend := t.cfg.LendBlockData
	var buf []byte
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
		if lend && c.authed.Load() {
			// Before authentication a frame is a few hundred bytes, read
			// into a buffer of its size, not a 4 KiB pool buffer.
			buf = c.pooledBuffer(need, buf)
		}
		var raw, frame []byte // as read; and its type byte and payload
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
		frame = raw
		if sealed {
			if frame, err = c.seal.opener.Open(raw); err != nil {
				t.recv.release(need)
				t.stats.drop(DropTampered)
				c.tampered.Store(true)
				c.fail(ReasonTampered + ": " + err.Error())
				break
			}
		}
		c.frameBytes = 0
		c.maxDelivered = max(c.maxDelivered, len(raw))
		if isKeepalive(frame) {
			t.recv.release(need)
			buf = raw
			continue
		}
		m, err := wire.Decode(frame)
		if err != nil {
			t.recv.release(need)
			t.stats.drop(DropBadFrame)
			c.fail(ReasonBadFrame + ": " + err.Error())
			break
		}
		if why := c.observeReceived(m); why != "" {
			t.recv.release(need)
			t.stats.drop(DropBadFrame)
			c.fail(why)
			break
		}
		// A Block's Data aliases the frame: the frame goes with it to the
		// owner (as a loan with LendBlockData), and the next frame gets
		// another buffer.
		var lent []byte
		if _, isBlock := m.(*wire.Block); isBlock {
			if lend {
				lent = raw
			}
			buf = nil
		} else if cap(raw) > maxKeptReadBuffer {
			if lend {
				putBuf(raw) // Decode copied what it needs
			}
			buf = nil
		} else {
			buf = raw
		}
		if c.ownerClosed.Load() {
			if lent != nil {
				putBuf(lent)
			}
			t.recv.release(need)
			continue // draining after the owner's Close
		}
		ok := t.pushLent(c, transport.Event{Kind: transport.Received, Conn: c.id, Remote: c.remote, Msg: m}, lent)
		t.recv.release(need)
		if !ok {
			c.fail(ReasonTransportClosed)
			break
		}
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
	if cap(buf) >= need || (need > pooledFrameBytes && need > c.maxDelivered) {
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
