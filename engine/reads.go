package engine

import (
	"github.com/kvlease/kvlease/clock"
	"github.com/kvlease/kvlease/transport"
	"github.com/kvlease/kvlease/wire"
	"github.com/kvlease/kvlease/xfer"
)

// readStream is a read P streams over several turns: as many BLOCK frames
// as the connection's window takes each time, then READ_END. Blocks go out
// without a copy (Port.SendBlock): the port reads them straight from the
// pool until it reports them Sent. That is safe because the read pins its
// lease until ReadFinished, so the pool memory its blocks alias does not
// change meanwhile, and the loop reports ReadFinished only once every
// block has been reported (inflight is zero): until then the stream stays
// in Loop.reads even if its connection is gone.
type readStream struct {
	w      xfer.ReadWork
	conn   transport.ConnID
	tag    uint64 // names the stream's blocks in the port's Sent events
	next   int    // the next block to send
	failed bool   // a frame was refused or the connection ended: send no more
	ended  bool   // READ_END was queued

	inflight int  // blocks queued and not yet reported Sent
	lost     bool // a block was reported lost
}

// sent records the port's report on one block of the stream tagged tag.
func (l *Loop) sent(tag uint64, ok bool) {
	st := l.sending[tag]
	if st == nil {
		panic("engine: a Sent event for a block the loop did not send")
	}
	if !ok {
		st.lost = true
	}
	if st.inflight--; st.inflight == 0 {
		delete(l.sending, tag)
	}
}

// dropStreams ends the reads streaming on connection id unsuccessfully.
// A read whose blocks the port still references (after a Close, which
// flushes) stays until they are reported.
func (l *Loop) dropStreams(now clock.Instant, id transport.ConnID) {
	j := 0
	for _, st := range l.reads {
		if st.conn == id {
			st.failed = true
			if st.inflight == 0 {
				l.core.ReadFinished(now, st.w.Session, st.w.ReadID, false)
				continue
			}
		}
		l.reads[j] = st
		j++
	}
	clear(l.reads[j:])
	l.reads = l.reads[:j]
}

// pump queues as many blocks of the streaming reads as their connections'
// windows take, in arrival order, and reports whether a read ended. It
// never waits for a socket: a read whose blocks are queued but not yet
// reported ends on a later turn.
func (l *Loop) pump(now clock.Instant) bool {
	if len(l.reads) == 0 {
		return false // every turn of an engine that streams no reads
	}
	ended := false
	j := 0
	for _, st := range l.reads {
		done, ok := l.streamRead(st)
		if !done {
			l.reads[j] = st
			j++
			continue
		}
		ended = true
		if ok {
			l.core.producer.CountServed(st.w.Bytes())
		}
		l.core.ReadFinished(now, st.w.Session, st.w.ReadID, ok)
	}
	clear(l.reads[j:])
	l.reads = l.reads[:j]
	return ended
}

// streamRead sends what fits of one read; done reports that the read is
// over: every frame queued (or one refused, or the connection ended) and
// every block reported, so the port no longer references the pool. ok
// means every block was written and READ_END queued.
func (l *Loop) streamRead(st *readStream) (done, ok bool) {
	for !st.failed && st.next < len(st.w.Blocks) {
		if !l.port.Writable(st.conn) {
			return false, false // the port wakes the driver when it drains
		}
		if !l.port.SendBlock(st.conn, &st.w.Blocks[st.next], st.tag) {
			st.failed = true // refused: nothing was queued
			break
		}
		if st.inflight++; st.inflight == 1 {
			l.sending[st.tag] = st
		}
		st.next++
	}
	if !st.failed && !st.ended {
		st.ended = true
		end := &wire.ReadEnd{ReadID: st.w.ReadID, Lease: st.w.Lease, Status: wire.StatusOK}
		st.failed = !l.port.Send(st.conn, end)
	}
	if st.inflight > 0 {
		return false, false // a Sent event wakes the driver
	}
	return true, !st.failed && !st.lost
}
