package kvevents

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kvlease/kvlease/kvblock"
	"github.com/kvlease/kvlease/xfer"
)

// Config configures a Publisher. Zero bounds take their defaults.
type Config struct {
	// Endpoint is where the PUB socket listens, as vLLM writes it:
	// tcp://*:5557 (every interface), tcp://HOST:PORT, port 0 for a free
	// one. Required.
	Endpoint string
	// ReplayEndpoint is where the replay ROUTER socket listens (same
	// form); empty: no replay.
	ReplayEndpoint string
	// Topic is the first frame of every message (vLLM's default is empty;
	// llm-d's router subscribes to kv@<pod-ip>:<port>@<model>).
	Topic string
	// LeaseTopic, when set, turns on kvlease's lease events (granted,
	// claimed, renewed, released with a reason: PublishLeases) on the same
	// PUB socket under this topic, with their own sequence numbers and no
	// replay. Neither topic may be a prefix of the other: a subscription
	// is a prefix match, and a subscriber of the KV events must not get
	// messages it cannot decode (so Topic cannot be empty then).
	LeaseTopic string
	// Encoding is map (newer vLLM) or array (older vLLM).
	Encoding Encoding
	// DataParallelRank is the batch's data_parallel_rank (kvlease has no
	// data parallelism: 0).
	DataParallelRank int

	// QueueBatches bounds the batches between Publish and the publishing
	// goroutine. When it is full Publish drops the batch and counts it:
	// the engine never waits. Default 1024.
	QueueBatches int
	// ReplayBatches is how many of the last batches the replay socket can
	// send (vLLM's buffer_steps). Default 10000.
	ReplayBatches int
	// SubscriberQueue bounds the messages queued for one subscriber;
	// beyond it that subscriber misses messages (counted; it can replay
	// them), the others do not. Default 4096.
	SubscriberQueue int
	// MaxSubscribers and MaxReplayClients bound the connections; more
	// are closed at once. Defaults 64 and 16.
	MaxSubscribers   int
	MaxReplayClients int
	// WriteTimeout drops a connection whose writes block this long (a
	// stalled peer), freeing its queue. Default 30s.
	WriteTimeout time.Duration
	// Logger receives connection logs at debug level; nil discards.
	Logger *slog.Logger
}

// Defaults of Config.
const (
	DefaultQueueBatches     = 1024
	DefaultReplayBatches    = 10000
	DefaultSubscriberQueue  = 4096
	DefaultMaxSubscribers   = 64
	DefaultMaxReplayClients = 16
	DefaultWriteTimeout     = 30 * time.Second
)

// handshakeTimeout bounds a connection's greeting and READY.
const handshakeTimeout = 5 * time.Second

// maxTopics bounds the subscriptions of one subscriber.
const maxTopics = 64

// endSeq is the replay's end marker: the sequence number -1.
var endSeq = []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}

// Stats are a Publisher's counters since New.
type Stats struct {
	// Published batches got a sequence number and went to the
	// subscribers and the replay buffer.
	Published uint64
	// LeaseBatches are the lease event batches published (their own
	// sequence numbers; not replayed).
	LeaseBatches uint64
	// DroppedBatches and DroppedEvents were refused by a full queue
	// before getting a sequence number (so a subscriber sees no gap).
	DroppedBatches, DroppedEvents uint64
	// SubscriberDrops are messages a subscriber missed because its own
	// queue was full (a gap in its sequence numbers, which it can replay).
	SubscriberDrops uint64
	// Subscribers and ReplayClients are connected now.
	Subscribers, ReplayClients int
	// Refused are connections closed at once: over a limit or a failed
	// handshake.
	Refused uint64
}

// Publisher publishes a kvlease engine's KV cache events as vLLM does:
// a ZMQ PUB socket sending [topic, 8-byte big-endian sequence number,
// msgpack batch] and a ROUTER socket replaying the last batches from a
// requested sequence number. Publish never blocks. It is safe for
// concurrent use.
type Publisher struct {
	cfg  Config
	log  *slog.Logger
	ln   net.Listener
	rln  net.Listener
	q    chan batch
	done chan struct{}
	wg   sync.WaitGroup

	dropped, droppedEvents, subDrops, refused, published, leaseBatches atomic.Uint64

	mu      sync.Mutex
	subs    map[*subscriber]struct{}
	replays int
	ring    []entry // replay buffer, oldest at ring[head] once full
	head    int
	closed  bool
}

// batch is an encoded batch waiting for its sequence number.
type batch struct {
	payload []byte
	lease   bool // on LeaseTopic
}

type entry struct {
	seq     uint64
	payload []byte
}

// ListenAddr parses an endpoint (tcp://*:5557, tcp://HOST:PORT) into a
// listen address.
func ListenAddr(endpoint string) (string, error) {
	rest, ok := strings.CutPrefix(endpoint, "tcp://")
	if !ok {
		return "", fmt.Errorf("kvevents: endpoint %q: want tcp://HOST:PORT (tcp://*:5557 for every interface)", endpoint)
	}
	host, port, err := net.SplitHostPort(rest)
	if err != nil {
		return "", fmt.Errorf("kvevents: endpoint %q: %v", endpoint, err)
	}
	if p, err := strconv.Atoi(port); err != nil || p < 0 || p > 65535 {
		return "", fmt.Errorf("kvevents: endpoint %q: port %q: want 0..65535", endpoint, port)
	}
	if host == "*" {
		host = ""
	}
	return net.JoinHostPort(host, port), nil
}

// CheckLeaseTopic reports what is wrong with a lease topic beside the KV
// events topic (Config.LeaseTopic); "" is no lease topic, and fine.
func CheckLeaseTopic(topic, lease string) error {
	if lease == "" {
		return nil
	}
	if len(lease) > 255 {
		return fmt.Errorf("kvevents: lease topic of %d bytes: at most 255", len(lease))
	}
	if strings.HasPrefix(lease, topic) || strings.HasPrefix(topic, lease) {
		return fmt.Errorf("kvevents: the KV events topic %q and the lease topic %q: neither may be a prefix of the other "+
			"(a subscription matches by prefix, and a KV events subscriber cannot decode lease events)", topic, lease)
	}
	return nil
}

// New listens on the endpoints and starts publishing.
func New(cfg Config) (*Publisher, error) {
	if cfg.QueueBatches <= 0 {
		cfg.QueueBatches = DefaultQueueBatches
	}
	if cfg.ReplayBatches <= 0 {
		cfg.ReplayBatches = DefaultReplayBatches
	}
	if cfg.SubscriberQueue <= 0 {
		cfg.SubscriberQueue = DefaultSubscriberQueue
	}
	if cfg.MaxSubscribers <= 0 {
		cfg.MaxSubscribers = DefaultMaxSubscribers
	}
	if cfg.MaxReplayClients <= 0 {
		cfg.MaxReplayClients = DefaultMaxReplayClients
	}
	if cfg.WriteTimeout <= 0 {
		cfg.WriteTimeout = DefaultWriteTimeout
	}
	if len(cfg.Topic) > 255 {
		return nil, fmt.Errorf("kvevents: topic of %d bytes: at most 255", len(cfg.Topic))
	}
	if err := CheckLeaseTopic(cfg.Topic, cfg.LeaseTopic); err != nil {
		return nil, err
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	addr, err := ListenAddr(cfg.Endpoint)
	if err != nil {
		return nil, err
	}
	p := &Publisher{cfg: cfg, log: log, q: make(chan batch, cfg.QueueBatches),
		done: make(chan struct{}), subs: make(map[*subscriber]struct{})}
	if p.ln, err = net.Listen("tcp", addr); err != nil {
		return nil, fmt.Errorf("kvevents: %v", err)
	}
	if cfg.ReplayEndpoint != "" {
		raddr, err := ListenAddr(cfg.ReplayEndpoint)
		if err == nil {
			p.rln, err = net.Listen("tcp", raddr)
		}
		if err != nil {
			p.ln.Close()
			return nil, fmt.Errorf("kvevents: replay: %v", err)
		}
	}
	p.wg.Add(2)
	go p.run()
	go p.accept(p.ln, p.serveSubscriber)
	if p.rln != nil {
		p.wg.Add(1)
		go p.accept(p.rln, p.serveReplay)
	}
	return p, nil
}

// Addr is the PUB listener's address.
func (p *Publisher) Addr() net.Addr { return p.ln.Addr() }

// ReplayAddr is the replay listener's address, or nil.
func (p *Publisher) ReplayAddr() net.Addr {
	if p.rln == nil {
		return nil
	}
	return p.rln.Addr()
}

// Publish encodes events as one batch stamped at, and queues it. It never
// blocks: when the queue is full the batch is dropped and counted. events
// are not retained (the caller may reuse them); an empty batch is not
// sent.
func (p *Publisher) Publish(at time.Time, events []kvblock.Event) {
	if len(events) == 0 {
		return
	}
	select {
	case <-p.done:
		return
	default:
	}
	p.queue(batch{payload: encodeBatch(p.cfg.Encoding, float64(at.UnixNano())/1e9, p.cfg.DataParallelRank, coalesceRemoved(events))},
		len(events))
}

// PublishLeases is Publish for lease events, on Config.LeaseTopic (see
// encodeLeaseBatch for the format). Without a lease topic it does nothing.
func (p *Publisher) PublishLeases(at time.Time, events []xfer.LeaseEvent) {
	if len(events) == 0 || p.cfg.LeaseTopic == "" {
		return
	}
	select {
	case <-p.done:
		return
	default:
	}
	p.queue(batch{payload: encodeLeaseBatch(p.cfg.Encoding, float64(at.UnixNano())/1e9, p.cfg.DataParallelRank, events), lease: true},
		len(events))
}

// queue hands b to the publishing goroutine, or drops and counts it.
func (p *Publisher) queue(b batch, events int) {
	select {
	case p.q <- b:
	default:
		p.dropped.Add(1)
		p.droppedEvents.Add(uint64(events))
	}
}

// Stats returns the counters.
func (p *Publisher) Stats() Stats {
	p.mu.Lock()
	subs, replays := len(p.subs), p.replays
	p.mu.Unlock()
	return Stats{Published: p.published.Load(), LeaseBatches: p.leaseBatches.Load(), DroppedBatches: p.dropped.Load(),
		DroppedEvents: p.droppedEvents.Load(), SubscriberDrops: p.subDrops.Load(),
		Subscribers: subs, ReplayClients: replays, Refused: p.refused.Load()}
}

// Close stops publishing (batches still queued are not sent), closes every
// connection and waits for the goroutines.
func (p *Publisher) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	close(p.done)
	for s := range p.subs {
		s.conn.Close()
	}
	p.mu.Unlock()
	p.ln.Close()
	if p.rln != nil {
		p.rln.Close()
	}
	p.wg.Wait()
	return nil
}

// run numbers each queued batch, keeps it for replay (the KV events) and
// hands it to every subscriber whose subscriptions match its topic. The KV
// events and the lease events are numbered apart, so a subscriber of
// either sees no gap the other made.
func (p *Publisher) run() {
	defer p.wg.Done()
	var seqs [2]uint64 // KV events, lease events
	var seqb [8]byte
	for {
		var b batch
		select {
		case <-p.done:
			return
		case b = <-p.q:
		}
		topic, k := p.cfg.Topic, 0
		if b.lease {
			topic, k = p.cfg.LeaseTopic, 1
		}
		seq := seqs[k]
		seqs[k]++
		binary.BigEndian.PutUint64(seqb[:], seq)
		msg := appendMessage(make([]byte, 0, len(b.payload)+len(topic)+32), []byte(topic), seqb[:], b.payload)
		p.mu.Lock()
		if b.lease {
			p.leaseBatches.Add(1)
		} else if len(p.ring) < p.cfg.ReplayBatches {
			p.ring = append(p.ring, entry{seq, b.payload})
		} else {
			p.ring[p.head] = entry{seq, b.payload}
			p.head = (p.head + 1) % len(p.ring)
		}
		for s := range p.subs {
			if !s.matches(topic) {
				continue
			}
			select {
			case s.out <- msg:
			default:
				p.subDrops.Add(1)
			}
		}
		p.mu.Unlock()
		if !b.lease {
			p.published.Add(1)
		}
	}
}

// replayFrom returns the buffered entries with seq >= start, in order.
func (p *Publisher) replayFrom(start uint64) []entry {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []entry
	for i := range p.ring {
		e := p.ring[(p.head+i)%len(p.ring)]
		if e.seq >= start {
			out = append(out, e)
		}
	}
	return out
}

func (p *Publisher) accept(ln net.Listener, serve func(net.Conn)) {
	defer p.wg.Done()
	for {
		c, err := ln.Accept()
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			return // closed
		}
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			serve(c)
		}()
	}
}

// handshake exchanges greetings and READY, announcing self and accepting a
// peer whose socket type is one of peers. It returns the peer's frames.
func (p *Publisher) handshake(c net.Conn, self string, maxFrame int, peers ...string) (*frameReader, error) {
	c.SetDeadline(time.Now().Add(handshakeTimeout))
	out := append(greeting(), readyCommand(self)...)
	if _, err := c.Write(out); err != nil {
		return nil, err
	}
	br := bufio.NewReaderSize(c, 512)
	if err := readGreeting(br); err != nil {
		return nil, err
	}
	fr := &frameReader{r: br, max: maxFrame}
	st, err := readReady(fr)
	if err != nil {
		return nil, err
	}
	ok := false
	for _, t := range peers {
		ok = ok || st == t
	}
	if !ok {
		return nil, fmt.Errorf("%w: a %s socket cannot talk to a %s socket", errProtocol, st, self)
	}
	c.SetDeadline(time.Time{})
	return fr, nil
}

func (p *Publisher) refuse(c net.Conn, why string, err error) {
	p.refused.Add(1)
	p.log.Debug("kv events: connection refused", "peer", c.RemoteAddr().String(), "reason", why, "err", err)
	c.Close()
}
