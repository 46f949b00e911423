package kvevents

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"net"
	"strings"
	"sync"
	"time"
)

// subscriber is one SUB peer: its subscriptions (prefixes, ZMQ's matching)
// and its bounded queue of whole messages, written by its own goroutine.
type subscriber struct {
	conn net.Conn
	out  chan []byte

	mu     sync.Mutex
	topics []string
}

func (s *subscriber) matches(topic string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, t := range s.topics {
		if strings.HasPrefix(topic, t) {
			return true
		}
	}
	return false
}

func (s *subscriber) subscribe(t string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.topics) >= maxTopics {
		return fmt.Errorf("%w: more than %d subscriptions", errProtocol, maxTopics)
	}
	s.topics = append(s.topics, t)
	return nil
}

// unsubscribe removes one subscription to t (ZMQ counts them).
func (s *subscriber) unsubscribe(t string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, x := range s.topics {
		if x == t {
			s.topics = append(s.topics[:i], s.topics[i+1:]...)
			return
		}
	}
}

// serveSubscriber runs one SUB connection: the handshake, then a reader of
// its subscriptions here and a writer of its queue.
func (p *Publisher) serveSubscriber(c net.Conn) {
	p.mu.Lock()
	full := len(p.subs) >= p.cfg.MaxSubscribers || p.closed
	p.mu.Unlock()
	if full {
		p.refuse(c, "too many subscribers", nil)
		return
	}
	// A subscription message is a flag byte and a topic.
	fr, err := p.handshake(c, "PUB", 1+maxTopicBytes, "SUB", "XSUB")
	if err != nil {
		p.refuse(c, "handshake", err)
		return
	}
	s := &subscriber{conn: c, out: make(chan []byte, p.cfg.SubscriberQueue)}
	p.mu.Lock()
	if p.closed || len(p.subs) >= p.cfg.MaxSubscribers {
		p.mu.Unlock()
		p.refuse(c, "too many subscribers", nil)
		return
	}
	p.subs[s] = struct{}{}
	p.mu.Unlock()
	p.log.Debug("kv events: subscriber connected", "peer", c.RemoteAddr().String())

	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		p.writeLoop(c, s.out, stop)
	}()
	err = p.readSubscriptions(fr, s)
	p.mu.Lock()
	delete(p.subs, s)
	p.mu.Unlock()
	c.Close()
	close(stop)
	wg.Wait()
	p.log.Debug("kv events: subscriber gone", "peer", c.RemoteAddr().String(), "err", err)
}

// maxTopicBytes bounds a subscription's topic.
const maxTopicBytes = 1024

// readSubscriptions applies a subscriber's subscriptions until its
// connection ends; it answers PINGs through the subscriber's queue.
func (p *Publisher) readSubscriptions(fr *frameReader, s *subscriber) error {
	for {
		f, err := fr.next()
		if err != nil {
			return err
		}
		if f.command() {
			name, data, err := commandName(f.body)
			if err != nil {
				return err
			}
			switch name {
			case "SUBSCRIBE":
				err = s.subscribe(string(data))
			case "CANCEL":
				s.unsubscribe(string(data))
			case "PING":
				select {
				case s.out <- pongFor(data):
				default:
				}
			case "PONG":
			case "ERROR":
				return fmt.Errorf("%w: peer sent ERROR", errProtocol)
			default:
				return fmt.Errorf("%w: unexpected command %q", errProtocol, name)
			}
			if err != nil {
				return err
			}
			continue
		}
		if f.more() {
			return fmt.Errorf("%w: a SUB peer sent a multipart message", errProtocol)
		}
		switch {
		case len(f.body) >= 1 && f.body[0] == 1:
			if err := s.subscribe(string(f.body[1:])); err != nil {
				return err
			}
		case len(f.body) >= 1 && f.body[0] == 0:
			s.unsubscribe(string(f.body[1:]))
		default:
			return fmt.Errorf("%w: a SUB peer sent a message that is not a subscription", errProtocol)
		}
	}
}

// writeLoop writes queued messages until stop, flushing when the queue is
// empty; a write blocked for WriteTimeout ends the connection.
func (p *Publisher) writeLoop(c net.Conn, out <-chan []byte, stop <-chan struct{}) {
	bw := bufio.NewWriterSize(c, 64<<10)
	for {
		var msg []byte
		select {
		case <-stop:
			return
		case msg = <-out:
		}
		c.SetWriteDeadline(time.Now().Add(p.cfg.WriteTimeout))
		if _, err := bw.Write(msg); err != nil {
			c.Close()
			return
		}
		if len(out) == 0 {
			if err := bw.Flush(); err != nil {
				c.Close()
				return
			}
		}
	}
}

// serveReplay answers replay requests on one connection: a request is
// [empty delimiter, 8-byte start sequence] (a REQ peer, or a DEALER that
// adds the delimiter as vLLM's clients do) or [8-byte start sequence] (a
// bare DEALER). The answer is one message per buffered batch from start on,
// [seq, payload], then [-1, empty], each behind the delimiter when the
// request had one. A malformed request ends the connection.
func (p *Publisher) serveReplay(c net.Conn) {
	p.mu.Lock()
	full := p.replays >= p.cfg.MaxReplayClients || p.closed
	if !full {
		p.replays++
	}
	p.mu.Unlock()
	if full {
		p.refuse(c, "too many replay clients", nil)
		return
	}
	defer func() {
		p.mu.Lock()
		p.replays--
		p.mu.Unlock()
	}()
	finished := make(chan struct{})
	defer close(finished)
	go func() {
		select {
		case <-p.done:
		case <-finished:
		}
		c.Close()
	}()
	fr, err := p.handshake(c, "ROUTER", 8, "REQ", "DEALER", "ROUTER")
	if err != nil {
		p.refuse(c, "handshake", err)
		return
	}
	bw := bufio.NewWriterSize(c, 64<<10)
	for {
		start, delim, err := readReplayRequest(fr)
		if err != nil {
			p.log.Debug("kv events: replay client gone", "peer", c.RemoteAddr().String(), "err", err)
			return
		}
		var seqb [8]byte
		var buf []byte
		write := func(frames ...[]byte) error {
			if delim {
				frames = append([][]byte{{}}, frames...)
			}
			buf = appendMessage(buf[:0], frames...)
			c.SetWriteDeadline(time.Now().Add(p.cfg.WriteTimeout))
			_, err := bw.Write(buf)
			return err
		}
		for _, e := range p.replayFrom(start) {
			binary.BigEndian.PutUint64(seqb[:], e.seq)
			if err := write(seqb[:], e.payload); err != nil {
				return
			}
		}
		if err := write(endSeq, nil); err != nil {
			return
		}
		if err := bw.Flush(); err != nil {
			return
		}
	}
}

// readReplayRequest reads one request message (commands in between are
// answered or ignored).
func readReplayRequest(fr *frameReader) (start uint64, delim bool, err error) {
	var frames [][]byte
	for {
		f, err := fr.next()
		if err != nil {
			return 0, false, err
		}
		if f.command() {
			name, _, err := commandName(f.body)
			if err != nil {
				return 0, false, err
			}
			if name == "ERROR" {
				return 0, false, fmt.Errorf("%w: peer sent ERROR", errProtocol)
			}
			continue // PING without heartbeats configured here: ignored
		}
		if len(frames) == 2 {
			return 0, false, fmt.Errorf("%w: a replay request has at most 2 frames", errProtocol)
		}
		frames = append(frames, append([]byte(nil), f.body...))
		if !f.more() {
			break
		}
	}
	switch {
	case len(frames) == 2 && len(frames[0]) == 0 && len(frames[1]) == 8:
		return binary.BigEndian.Uint64(frames[1]), true, nil
	case len(frames) == 1 && len(frames[0]) == 8:
		return binary.BigEndian.Uint64(frames[0]), false, nil
	}
	return 0, false, fmt.Errorf("%w: a replay request is an 8-byte big-endian sequence number", errProtocol)
}
