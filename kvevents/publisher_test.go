package kvevents

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/kvlease/kvlease/kvblock"
	"github.com/kvlease/kvlease/kvevents/kveventstest"
)

// waitFor polls cond until it holds or 15 s passed.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

func newPublisher(t *testing.T, cfg Config) *Publisher {
	t.Helper()
	if cfg.Endpoint == "" {
		cfg.Endpoint = "tcp://127.0.0.1:0"
	}
	p, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

func endpoint(a net.Addr) string { return "tcp://" + a.String() }

// subscribed waits until n subscribers are connected with at least one
// subscription each.
func subscribed(t *testing.T, p *Publisher, n int) {
	waitFor(t, "the subscriptions", func() bool {
		p.mu.Lock()
		defer p.mu.Unlock()
		k := 0
		for s := range p.subs {
			if s.matches(p.cfg.Topic) {
				k++
			}
		}
		return k >= n
	})
}

func hs(h kvblock.Hash) string { return string(h[:]) }

func ptr(h kvblock.Hash) *string { x := hs(h); return &x }

// sample are a prompt of two full blocks stored (the first with the root
// parent), a third chained to them, two evictions, a CPU copy and a clear.
func sample() ([]kvblock.Event, []kveventstest.Event) {
	var key kvblock.HashKey
	h1 := kvblock.HashBlock(key, kvblock.RootHash, []int32{1, 2}, "")
	h2 := kvblock.HashBlock(key, h1, []int32{3, 4}, "")
	h3 := kvblock.HashBlock(key, h2, []int32{5, 6}, "")
	in := []kvblock.Event{
		{Kind: kvblock.BlockStored, Hashes: []kvblock.Hash{h1, h2}, Parent: kvblock.RootHash, Tokens: []int32{1, 2, 3, 4}, BlockSize: 2, Medium: "GPU"},
		{Kind: kvblock.BlockStored, Hashes: []kvblock.Hash{h3}, Parent: h2, Tokens: []int32{5, 6}, BlockSize: 2,
			Adapter: kvblock.Adapter{Name: "sql-lora", ID: 2, Digest: 9}},
		{Kind: kvblock.BlockRemoved, Hashes: []kvblock.Hash{h3}, Medium: "GPU", BlockSize: 2},
		{Kind: kvblock.BlockRemoved, Hashes: []kvblock.Hash{h2}, Medium: "GPU", BlockSize: 2},
		{Kind: kvblock.BlockStored, Hashes: []kvblock.Hash{h1}, BlockSize: 2, Medium: "CPU"}, // a tier's: hashes only
		{Kind: kvblock.BlockRemoved, Hashes: []kvblock.Hash{h1}, Medium: "DISK", BlockSize: 2},
		{Kind: kvblock.AllBlocksCleared, Medium: "GPU"},
	}
	want := []kveventstest.Event{
		{Type: "BlockStored", BlockHashes: []string{hs(h1), hs(h2)}, TokenIDs: []int64{1, 2, 3, 4}, BlockSize: 2, Medium: "GPU"},
		{Type: "BlockStored", BlockHashes: []string{hs(h3)}, Parent: ptr(h2), TokenIDs: []int64{5, 6}, BlockSize: 2, Medium: "GPU",
			LoRAID: new(int64(2)), LoRAName: new("sql-lora")},
		// Consecutive evictions of one medium travel as one event.
		{Type: "BlockRemoved", BlockHashes: []string{hs(h3), hs(h2)}, Medium: "GPU"},
		{Type: "BlockStored", BlockHashes: []string{hs(h1)}, BlockSize: 2, Medium: "CPU"},
		{Type: "BlockRemoved", BlockHashes: []string{hs(h1)}, Medium: "DISK"},
		{Type: "AllBlocksCleared"},
	}
	return in, want
}

func sameEvents(t *testing.T, enc Encoding, got, want []kveventstest.Event) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%d events, want %d: %+v", len(got), len(want), got)
	}
	for i := range want {
		g, w := got[i], want[i]
		if enc == EncodingMap && g.Type != "AllBlocksCleared" {
			// The map encoding carries newer vLLM's group fields.
			if g.GroupIdx != 0 || (g.Type == "BlockStored" && g.SpecKind != "full_attention") {
				t.Errorf("event %d: group_idx %d, kind %q", i, g.GroupIdx, g.SpecKind)
			}
		}
		g.GroupIdx, g.SpecKind = 0, ""
		if (g.Parent == nil) != (w.Parent == nil) || (g.Parent != nil && *g.Parent != *w.Parent) {
			t.Errorf("event %d: parent %v, want %v", i, g.Parent, w.Parent)
		}
		g.Parent, w.Parent = nil, nil
		if !equalEvent(g, w) {
			t.Errorf("event %d:\n got %+v\nwant %+v", i, g, w)
		}
	}
}

func equalEvent(a, b kveventstest.Event) bool {
	return a.Type == b.Type && a.BlockSize == b.BlockSize && a.Medium == b.Medium &&
		equalPtr(a.LoRAID, b.LoRAID) && equalPtr(a.LoRAName, b.LoRAName) &&
		equalSlice(a.BlockHashes, b.BlockHashes) && equalSlice(a.TokenIDs, b.TokenIDs)
}

func equalPtr[T comparable](a, b *T) bool {
	return (a == nil) == (b == nil) && (a == nil || *a == *b)
}

func equalSlice[T comparable](a, b []T) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestPublishDecodesByReference publishes the sample in both encodings to a
// zmq4 SUB socket and decodes it with the reference decoder.
func TestPublishDecodesByReference(t *testing.T) {
	for _, enc := range []Encoding{EncodingMap, EncodingArray} {
		t.Run(enc.String(), func(t *testing.T) {
			p := newPublisher(t, Config{Encoding: enc, Topic: "kv@10.0.0.1:8000@m", DataParallelRank: 0})
			sub, err := kveventstest.Subscribe(endpoint(p.Addr()), "kv@")
			if err != nil {
				t.Fatal(err)
			}
			defer sub.Close()
			subscribed(t, p, 1)
			in, want := sample()
			at := time.Unix(1700000000, 500_000_000)
			p.Publish(at, in)
			p.Publish(at, in[:1])
			for seq := int64(0); seq < 2; seq++ {
				m, err := sub.Next(15 * time.Second)
				if err != nil {
					t.Fatal(err)
				}
				if m.Topic != "kv@10.0.0.1:8000@m" || m.Seq != seq {
					t.Fatalf("topic %q seq %d, want seq %d", m.Topic, m.Seq, seq)
				}
				b, err := kveventstest.Decode(enc.String(), m.Payload)
				if err != nil {
					t.Fatal(err)
				}
				if b.TS != 1700000000.5 || b.DataParallelRank != 0 {
					t.Errorf("ts %v rank %d", b.TS, b.DataParallelRank)
				}
				if seq == 0 {
					sameEvents(t, enc, b.Events, want)
				} else {
					sameEvents(t, enc, b.Events, want[:1])
				}
				// The other encoding's decoder refuses it: the layouts
				// are really different.
				other := "array"
				if enc == EncodingArray {
					other = "map"
				}
				if _, err := kveventstest.Decode(other, m.Payload); err == nil {
					t.Errorf("a %s payload decoded as %s", enc, other)
				}
			}
			// The input was not modified by the coalescing.
			if in2, _ := sample(); len(in[2].Hashes) != len(in2[2].Hashes) {
				t.Error("Publish modified its input")
			}
		})
	}
}

// TestReplayAfterReconnect: a subscriber that went away asks the replay
// socket for what it missed and gets exactly the batches published, with
// their sequence numbers, ending with -1.
func TestReplayAfterReconnect(t *testing.T) {
	p := newPublisher(t, Config{ReplayEndpoint: "tcp://127.0.0.1:0", ReplayBatches: 8})
	sub, err := kveventstest.Subscribe(endpoint(p.Addr()), "")
	if err != nil {
		t.Fatal(err)
	}
	subscribed(t, p, 1)
	in, _ := sample()
	live := map[int64][]byte{}
	for i := range 3 {
		p.Publish(time.Unix(int64(i), 0), in[i:i+1])
		m, err := sub.Next(15 * time.Second)
		if err != nil {
			t.Fatal(err)
		}
		live[m.Seq] = m.Payload
	}
	sub.Close()
	waitFor(t, "the subscriber to go", func() bool { return p.Stats().Subscribers == 0 })
	// Missed while away: 3..11; the buffer keeps the last 8 (4..11).
	for i := 3; i < 12; i++ {
		p.Publish(time.Unix(int64(i), 0), in[i%len(in):i%len(in)+1])
	}
	waitFor(t, "the batches", func() bool { return p.Stats().Published == 12 })

	got, err := kveventstest.Replay(endpoint(p.ReplayAddr()), 1, 15*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 8 || got[0].Seq != 4 || got[7].Seq != 11 {
		t.Fatalf("replay from 1 gave %d batches from %v; want 4..11 (the buffer's 8)", len(got), got)
	}
	for i, m := range got {
		if m.Seq != int64(4+i) {
			t.Fatalf("replay out of order: %d at %d", m.Seq, i)
		}
		b, err := kveventstest.Decode("map", m.Payload)
		if err != nil {
			t.Fatal(err)
		}
		if b.TS != float64(m.Seq) {
			t.Errorf("seq %d carries ts %v", m.Seq, b.TS)
		}
	}
	// From a sequence inside the buffer, and past its end.
	if got, err := kveventstest.Replay(endpoint(p.ReplayAddr()), 10, 15*time.Second); err != nil || len(got) != 2 {
		t.Fatalf("replay from 10: %d, %v", len(got), err)
	}
	if got, err := kveventstest.Replay(endpoint(p.ReplayAddr()), 12, 15*time.Second); err != nil || len(got) != 0 {
		t.Fatalf("replay from 12: %d, %v", len(got), err)
	}
	_ = live
}

// rawSubscriber does a ZMTP handshake as a SUB, subscribes to everything
// and then reads nothing: a stalled subscriber.
func rawSubscriber(t testing.TB, addr net.Addr) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr.String())
	if err != nil {
		t.Fatal(err)
	}
	out := append(greeting(), readyCommand("SUB")...)
	out = appendFrame(out, 0, []byte{1}) // subscribe to ""
	if _, err := c.Write(out); err != nil {
		t.Fatal(err)
	}
	return c
}

// TestStalledSubscriber: a subscriber that never reads loses messages
// (counted), a healthy one beside it gets every message, and Publish returns
// at once throughout.
func TestStalledSubscriber(t *testing.T) {
	p := newPublisher(t, Config{SubscriberQueue: 16})
	stalled := rawSubscriber(t, p.Addr())
	defer stalled.Close()
	sub, err := kveventstest.Subscribe(endpoint(p.Addr()), "")
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	subscribed(t, p, 2)

	// 90 KB batches (36 MB in all): the stalled connection's socket
	// buffers fill within a few dozen, then its queue of 16.
	big := kvblock.Event{Kind: kvblock.BlockStored, Parent: kvblock.RootHash, BlockSize: 16,
		Tokens: make([]int32, 16384), Hashes: make([]kvblock.Hash, 512)}
	for i := range big.Tokens {
		big.Tokens[i] = 1 << 20 // 5 bytes each in msgpack
	}
	for i := range big.Hashes {
		big.Hashes[i] = kvblock.Hash{byte(i), 0xff}
	}
	const n = 400
	received := 0
	for i := range n {
		p.Publish(time.Now(), []kvblock.Event{big})
		// Read as we go, so the healthy subscriber is never the slow one.
		for received < i+1 {
			m, err := sub.Next(15 * time.Second)
			if err != nil {
				t.Fatalf("healthy subscriber after %d: %v", received, err)
			}
			if m.Seq != int64(received) {
				t.Fatalf("healthy subscriber got seq %d, want %d", m.Seq, received)
			}
			received++
		}
	}
	st := p.Stats()
	if st.SubscriberDrops == 0 {
		t.Fatalf("the stalled subscriber dropped nothing: %+v", st)
	}
	if st.Published != n || st.DroppedBatches != 0 {
		t.Fatalf("stats %+v", st)
	}
}

// TestQueueFullDropsAndCounts: when the publishing goroutine is behind,
// Publish drops the batch, counts it and does not block; published
// sequence numbers stay dense.
func TestQueueFullDropsAndCounts(t *testing.T) {
	p := newPublisher(t, Config{QueueBatches: 4})
	in, _ := sample()
	p.mu.Lock() // holds the publishing goroutine at its first batch
	for range 10 {
		p.Publish(time.Now(), in)
	}
	p.mu.Unlock()
	waitFor(t, "the queue to drain", func() bool { return len(p.q) == 0 && p.Stats().Published >= 4 })
	st := p.Stats()
	// At most one batch was taken by the goroutine before it stopped at
	// the lock, four filled the queue, the rest were dropped.
	if st.Published+st.DroppedBatches != 10 || st.Published > 5 || st.Published < 4 ||
		st.DroppedEvents != st.DroppedBatches*uint64(len(in)) {
		t.Fatalf("stats %+v", st)
	}
}

// TestBadPeers: what a peer sends before or instead of a valid handshake
// gets it disconnected and counted; the publisher keeps serving.
func TestBadPeers(t *testing.T) {
	p := newPublisher(t, Config{ReplayEndpoint: "tcp://127.0.0.1:0", MaxSubscribers: 1})
	bad := []struct {
		name string
		addr net.Addr
		send []byte
	}{
		{"not zmtp", p.Addr(), []byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n" + string(make([]byte, 64)))},
		{"curve mechanism", p.Addr(), func() []byte { g := greeting(); copy(g[12:32], "CURVE"); return g }()},
		{"wrong socket type", p.Addr(), append(greeting(), readyCommand("PUSH")...)},
		{"huge subscription", p.Addr(), append(append(greeting(), readyCommand("SUB")...),
			appendFrame(nil, 0, append([]byte{1}, make([]byte, 5000)...))...)},
		{"huge frame announced", p.Addr(), append(append(greeting(), readyCommand("SUB")...),
			flagLong, 0x7f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff)},
		{"replay request too long", p.ReplayAddr(), append(append(greeting(), readyCommand("DEALER")...),
			appendMessage(nil, []byte{}, make([]byte, 9))...)},
		{"replay request of three frames", p.ReplayAddr(), append(append(greeting(), readyCommand("DEALER")...),
			appendMessage(nil, []byte{}, []byte{}, make([]byte, 8))...)},
	}
	for _, b := range bad {
		c, err := net.Dial("tcp", b.addr.String())
		if err != nil {
			t.Fatal(err)
		}
		c.Write(b.send)
		c.SetReadDeadline(time.Now().Add(15 * time.Second))
		// The publisher closes the connection: reading ends with EOF
		// (after its own greeting and READY), or a reset when it closed
		// with our bytes unread.
		if _, err := io.Copy(io.Discard, c); err != nil && !errors.Is(err, syscall.ECONNRESET) {
			t.Errorf("%s: connection not closed by the publisher: %v", b.name, err)
		}
		c.Close()
	}
	// A second subscriber beyond MaxSubscribers is refused; the first
	// still gets messages.
	sub, err := kveventstest.Subscribe(endpoint(p.Addr()), "")
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	subscribed(t, p, 1)
	over := rawSubscriber(t, p.Addr())
	over.SetReadDeadline(time.Now().Add(15 * time.Second))
	if _, err := io.Copy(io.Discard, over); err != nil && !errors.Is(err, syscall.ECONNRESET) {
		t.Errorf("subscriber over the limit: %v", err)
	}
	over.Close()
	in, _ := sample()
	p.Publish(time.Now(), in)
	if _, err := sub.Next(15 * time.Second); err != nil {
		t.Fatal(err)
	}
	// Counted as refused: the three failed handshakes and the subscriber
	// over the limit (the others were closed after their handshake).
	if st := p.Stats(); st.Refused != 4 {
		t.Errorf("refused %d, want 4", st.Refused)
	}
}

// TestReplayBareDealer: a request without the empty delimiter (a bare
// DEALER) gets its answers without one.
func TestReplayBareDealer(t *testing.T) {
	p := newPublisher(t, Config{ReplayEndpoint: "tcp://127.0.0.1:0"})
	in, _ := sample()
	p.Publish(time.Now(), in)
	waitFor(t, "the batch", func() bool { return p.Stats().Published == 1 })
	c, err := net.Dial("tcp", p.ReplayAddr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(15 * time.Second))
	var seq [8]byte
	c.Write(append(append(greeting(), readyCommand("DEALER")...), appendMessage(nil, seq[:])...))
	br := bufio.NewReader(c)
	if err := readGreeting(br); err != nil {
		t.Fatal(err)
	}
	fr := &frameReader{r: br, max: 1 << 20}
	if st, err := readReady(fr); err != nil || st != "ROUTER" {
		t.Fatalf("READY %q %v", st, err)
	}
	var msgs [][][]byte
	for len(msgs) < 2 {
		var m [][]byte
		for {
			f, err := fr.next()
			if err != nil {
				t.Fatal(err)
			}
			m = append(m, bytes.Clone(f.body))
			if !f.more() {
				break
			}
		}
		msgs = append(msgs, m)
	}
	if len(msgs[0]) != 2 || binary.BigEndian.Uint64(msgs[0][0]) != 0 {
		t.Fatalf("first reply %q", msgs[0])
	}
	if len(msgs[1]) != 2 || !bytes.Equal(msgs[1][0], endSeq) || len(msgs[1][1]) != 0 {
		t.Fatalf("end marker %q", msgs[1])
	}
}

func TestListenAddr(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"tcp://*:5557", ":5557"},
		{"tcp://127.0.0.1:0", "127.0.0.1:0"},
		{"tcp://[::1]:5558", "[::1]:5558"},
	} {
		if got, err := ListenAddr(c.in); err != nil || got != c.want {
			t.Errorf("ListenAddr(%q) = %q, %v; want %q", c.in, got, err, c.want)
		}
	}
	for _, bad := range []string{"", "ipc:///tmp/x", "tcp://host", "tcp://*:99999", "tcp://*:x"} {
		if _, err := ListenAddr(bad); err == nil {
			t.Errorf("ListenAddr(%q) accepted", bad)
		}
	}
}
