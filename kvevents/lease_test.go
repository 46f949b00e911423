package kvevents

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/kvlease/kvlease/kvevents/kveventstest"
	"github.com/kvlease/kvlease/wire"
	"github.com/kvlease/kvlease/xfer"
)

func sampleLeases() ([]xfer.LeaseEvent, []kveventstest.Lease) {
	const id = wire.LeaseID(1<<63 + 5) // beyond int64: sent unsigned
	in := []xfer.LeaseEvent{
		{Kind: xfer.LeaseGranted, Lease: id, Request: "r1", Blocks: 3, Tokens: 40, ExpiresIn: 30 * time.Second},
		{Kind: xfer.LeaseClaimed, Lease: id, Request: "r1", Peer: "decode-7"},
		{Kind: xfer.LeaseRenewed, Lease: id, Request: "r1", Peer: "decode-7", ExpiresIn: 20*time.Second + 400*time.Microsecond},
		{Kind: xfer.LeaseReleased, Lease: id, Request: "r1", Reason: wire.ReasonReadDone, Held: 1500 * time.Millisecond, Read: true},
		{Kind: xfer.LeaseReleased, Lease: 9, Request: "r2", Reason: wire.ReasonUnclaimed, Held: 10 * time.Second},
	}
	want := []kveventstest.Lease{
		{Type: "LeaseGranted", LeaseID: id.Hex(), RequestID: "r1", NumBlocks: 3, NumTokens: 40, ExpiresInMs: 30000},
		{Type: "LeaseClaimed", LeaseID: id.Hex(), RequestID: "r1", Peer: "decode-7"},
		{Type: "LeaseRenewed", LeaseID: id.Hex(), RequestID: "r1", Peer: "decode-7", ExpiresInMs: 20000},
		{Type: "LeaseReleased", LeaseID: id.Hex(), RequestID: "r1", Reason: "read_done", HeldMs: 1500, Read: true},
		{Type: "LeaseReleased", LeaseID: "0000000000000009", RequestID: "r2", Reason: "unclaimed", HeldMs: 10000},
	}
	return in, want
}

// TestLeaseTopic: lease events go to the lease topic's subscribers only,
// numbered on their own, not replayed; the KV events subscribers and the
// replay see the KV events alone, numbered without gaps.
func TestLeaseTopic(t *testing.T) {
	for _, enc := range []Encoding{EncodingMap, EncodingArray} {
		t.Run(enc.String(), func(t *testing.T) {
			p := newPublisher(t, Config{Topic: "kv@10.0.0.1:8000@m", LeaseTopic: "kvlease-leases@10.0.0.1:8000",
				ReplayEndpoint: "tcp://127.0.0.1:0", Encoding: enc})
			kv, err := kveventstest.Subscribe(endpoint(p.Addr()), "kv@")
			if err != nil {
				t.Fatal(err)
			}
			defer kv.Close()
			leases, err := kveventstest.Subscribe(endpoint(p.Addr()), "kvlease-leases@")
			if err != nil {
				t.Fatal(err)
			}
			defer leases.Close()
			waitFor(t, "both subscriptions", func() bool {
				p.mu.Lock()
				defer p.mu.Unlock()
				k, l := 0, 0
				for s := range p.subs {
					if s.matches(p.cfg.Topic) {
						k++
					}
					if s.matches(p.cfg.LeaseTopic) {
						l++
					}
				}
				return k == 1 && l == 1
			})
			kvIn, kvWant := sample()
			lIn, lWant := sampleLeases()
			now := time.Unix(1700000000, 0)
			p.PublishLeases(now, lIn[:3])
			p.Publish(now, kvIn)
			p.PublishLeases(now, lIn[3:])
			p.PublishLeases(now, nil) // nothing: no message, no number
			p.Publish(now, kvIn)

			var got []kveventstest.Lease
			for seq := int64(0); seq < 2; seq++ {
				m, err := leases.Next(10 * time.Second)
				if err != nil {
					t.Fatal(err)
				}
				if m.Topic != "kvlease-leases@10.0.0.1:8000" || m.Seq != seq {
					t.Fatalf("lease message topic %q seq %d, want seq %d", m.Topic, m.Seq, seq)
				}
				b, err := kveventstest.DecodeLeases(enc.String(), m.Payload)
				if err != nil {
					t.Fatal(err)
				}
				if b.TS != 1700000000 {
					t.Errorf("ts %v", b.TS)
				}
				got = append(got, b.Events...)
			}
			if !reflect.DeepEqual(got, lWant) {
				t.Errorf("lease events:\n got %+v\nwant %+v", got, lWant)
			}
			for seq := int64(0); seq < 2; seq++ {
				m, err := kv.Next(10 * time.Second)
				if err != nil {
					t.Fatal(err)
				}
				if m.Topic != "kv@10.0.0.1:8000@m" || m.Seq != seq {
					t.Fatalf("KV message topic %q seq %d, want seq %d", m.Topic, m.Seq, seq)
				}
				b, err := kveventstest.Decode(enc.String(), m.Payload)
				if err != nil {
					t.Fatal(err)
				}
				sameEvents(t, enc, b.Events, kvWant)
			}
			if m, err := leases.Next(50 * time.Millisecond); err == nil {
				t.Errorf("an extra lease message: %+v", m)
			}
			replay, err := kveventstest.Replay(endpoint(p.ReplayAddr()), 0, 10*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			if len(replay) != 2 || replay[0].Seq != 0 || replay[1].Seq != 1 {
				t.Errorf("replay %+v: want the two KV batches", replay)
			}
			if s := p.Stats(); s.Published != 2 || s.LeaseBatches != 2 {
				t.Errorf("stats %+v", s)
			}
		})
	}
}

func TestLeaseTopicValidation(t *testing.T) {
	for _, c := range []struct{ topic, lease string }{
		{"", "kvlease-leases"},  // a subscriber of every KV event would get lease events
		{"kv@a", "kv@a/leases"}, // the KV subscription matches the lease topic
		{"leases@a", "leases@"}, // and the other way round
		{"kv@a", "kv@a"},        // the same topic
		{"kv", strings.Repeat("l", 256)},
	} {
		if _, err := New(Config{Endpoint: "tcp://127.0.0.1:0", Topic: c.topic, LeaseTopic: c.lease}); err == nil {
			t.Errorf("topic %q, lease topic %q: accepted", c.topic, c.lease)
		}
	}
	// Without a lease topic, lease events are not sent.
	p := newPublisher(t, Config{})
	lIn, _ := sampleLeases()
	p.PublishLeases(time.Now(), lIn)
	if s := p.Stats(); s.LeaseBatches != 0 || s.DroppedBatches != 0 {
		t.Errorf("stats %+v", s)
	}
}
