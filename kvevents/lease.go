package kvevents

import (
	"fmt"
	"time"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/kvlease/kvlease/xfer"
)

// encodeLeaseBatch returns the msgpack payload of a batch of lease events:
// the same envelope as encodeBatch, [ts, events, data_parallel_rank], in
// the same encoding, with these events (map keys in order; the array
// encoding has the same values in that order after the tag):
//
//	LeaseGranted:  lease_id, request_id, num_blocks, num_tokens, expires_in_ms
//	LeaseClaimed:  lease_id, request_id, peer_engine_id
//	LeaseRenewed:  lease_id, request_id, peer_engine_id, expires_in_ms
//	LeaseReleased: lease_id, request_id, reason, held_ms, read
//
// lease_id is the id P granted as kv_transfer_params' lease_id carries it
// (16 hex digits); request_id is the engine's request id; peer_engine_id is the
// decode engine's id from its handshake; expires_in_ms is the time left on
// the lease; reason is one of kvlease_leases_released_total's reason
// labels; held_ms is the lease's life; read says whether a decode engine
// finished reading its blocks (an unread release stranded them).
func encodeLeaseBatch(enc Encoding, ts float64, rank int, events []xfer.LeaseEvent) []byte {
	return encodeEnvelope(ts, rank, func(e *msgpack.Encoder) { encodeLeaseEvents(e, enc, events) })
}

func encodeLeaseEvents(e *msgpack.Encoder, enc Encoding, events []xfer.LeaseEvent) {
	e.EncodeArrayLen(len(events))
	for i := range events {
		ev := &events[i]
		w := fieldWriter{e: e, enc: enc}
		switch ev.Kind {
		case xfer.LeaseGranted:
			w.begin(ev, 5)
			w.int("num_blocks", int64(ev.Blocks))
			w.int("num_tokens", int64(ev.Tokens))
			w.int("expires_in_ms", ms(ev.ExpiresIn))
		case xfer.LeaseClaimed:
			w.begin(ev, 3)
			w.str("peer_engine_id", ev.Peer)
		case xfer.LeaseRenewed:
			w.begin(ev, 4)
			w.str("peer_engine_id", ev.Peer)
			w.int("expires_in_ms", ms(ev.ExpiresIn))
		case xfer.LeaseReleased:
			w.begin(ev, 5)
			w.str("reason", ev.Reason.String())
			w.int("held_ms", ms(ev.Held))
			w.key("read")
			e.EncodeBool(ev.Read)
		default:
			panic(fmt.Sprintf("kvevents: lease event kind %d", ev.Kind))
		}
	}
}

func ms(d time.Duration) int64 { return d.Milliseconds() }

// fieldWriter writes one event as a map keyed by field name with the tag
// under "type", or as an array with the tag first.
type fieldWriter struct {
	e   *msgpack.Encoder
	enc Encoding
}

// begin writes the tag and the fields every lease event has, for an
// event of n fields in all (the tag not counted).
func (w fieldWriter) begin(ev *xfer.LeaseEvent, n int) {
	if w.enc == EncodingArray {
		w.e.EncodeArrayLen(n + 1)
	} else {
		w.e.EncodeMapLen(n + 1)
		w.e.EncodeString("type")
	}
	w.e.EncodeString(ev.Kind.String())
	w.str("lease_id", ev.Lease.Hex())
	w.str("request_id", ev.Request)
}

func (w fieldWriter) key(k string) {
	if w.enc == EncodingMap {
		w.e.EncodeString(k)
	}
}

func (w fieldWriter) str(k, v string) {
	w.key(k)
	w.e.EncodeString(v)
}

func (w fieldWriter) int(k string, v int64) {
	w.key(k)
	w.e.EncodeInt(v)
}
