package kveventstest

import (
	"fmt"
	"slices"
	"strings"
)

// The lease events' schema (kvlease's own, on --kv-events-lease-topic),
// in the same envelope as the KV events: (ts, events, data_parallel_rank).
// Each event's fields, in order after the tag:
var leaseFields = map[string][]string{
	"LeaseGranted":  {"lease_id", "request_id", "num_blocks", "num_tokens", "expires_in_ms"},
	"LeaseClaimed":  {"lease_id", "request_id", "peer_engine_id"},
	"LeaseRenewed":  {"lease_id", "request_id", "peer_engine_id", "expires_in_ms"},
	"LeaseReleased": {"lease_id", "request_id", "reason", "held_ms", "read"},
}

// Lease is one decoded lease event. Fields its type does not carry are
// zero.
type Lease struct {
	Type                 string
	LeaseID              string // 16 hex digits
	RequestID, Peer      string
	NumBlocks, NumTokens int64
	ExpiresInMs, HeldMs  int64
	Reason               string
	Read                 bool
}

// LeaseBatch is one decoded lease payload.
type LeaseBatch struct {
	TS               float64
	Events           []Lease
	DataParallelRank int64
}

// DecodeLeases decodes a lease events payload of encoding "map" or
// "array" strictly: every field present, none unknown, each of its type.
func DecodeLeases(encoding string, payload []byte) (LeaseBatch, error) {
	d := &decoder{b: payload}
	v, err := d.value(0)
	if err != nil {
		return LeaseBatch{}, err
	}
	if d.i != len(d.b) {
		return LeaseBatch{}, fmt.Errorf("%d trailing bytes", len(d.b)-d.i)
	}
	var lb LeaseBatch
	var ts, rank, events any
	if encoding != "map" && encoding != "array" {
		return lb, fmt.Errorf("encoding %q", encoding)
	}
	// The batch is an array in both encodings, as the KV events' is.
	a, ok := v.([]any)
	if !ok || len(a) != 3 {
		return lb, fmt.Errorf("batch is %T of %d, want an array of 3", v, len(a))
	}
	ts, events, rank = a[0], a[1], a[2]
	if lb.TS, err = float(ts); err != nil {
		return lb, fmt.Errorf("ts: %v", err)
	}
	if lb.DataParallelRank, err = integer(rank); err != nil {
		return lb, fmt.Errorf("data_parallel_rank: %v", err)
	}
	evs, ok := events.([]any)
	if !ok {
		return lb, fmt.Errorf("events is %T, want an array", events)
	}
	for i, ev := range evs {
		l, err := leaseEvent(encoding, ev)
		if err != nil {
			return lb, fmt.Errorf("events[%d]: %v", i, err)
		}
		lb.Events = append(lb.Events, l)
	}
	return lb, nil
}

// leaseEvent decodes one event into its fields by name, then into a Lease.
func leaseEvent(encoding string, v any) (Lease, error) {
	var tag string
	vals := map[string]any{}
	if encoding == "map" {
		m, ok := v.(map[string]any)
		if !ok {
			return Lease{}, fmt.Errorf("event is %T, want a map", v)
		}
		if tag, ok = m["type"].(string); !ok {
			return Lease{}, fmt.Errorf("no string \"type\"")
		}
		names, known := leaseFields[tag]
		if !known {
			return Lease{}, fmt.Errorf("unknown event type %q", tag)
		}
		if err := keys(m, append([]string{"type"}, names...), nil); err != nil {
			return Lease{}, fmt.Errorf("%s: %v", tag, err)
		}
		vals = m
	} else {
		a, ok := v.([]any)
		if !ok || len(a) == 0 {
			return Lease{}, fmt.Errorf("event is %T, want a non-empty array", v)
		}
		if tag, ok = a[0].(string); !ok {
			return Lease{}, fmt.Errorf("tag is %T, want a string", a[0])
		}
		names, known := leaseFields[tag]
		if !known {
			return Lease{}, fmt.Errorf("unknown event type %q", tag)
		}
		if len(a) != 1+len(names) {
			return Lease{}, fmt.Errorf("%s: %d fields, want %d", tag, len(a)-1, len(names))
		}
		for i, n := range names {
			vals[n] = a[1+i]
		}
	}
	l := Lease{Type: tag}
	for _, name := range leaseFields[tag] {
		x := vals[name]
		var err error
		switch name {
		case "lease_id":
			// 16 lowercase hex digits, as kv_transfer_params' lease_id.
			h, ok := x.(string)
			if !ok || len(h) != 16 || strings.Trim(h, "0123456789abcdef") != "" || h == "0000000000000000" {
				err = fmt.Errorf("%v, want 16 lowercase hex digits, not all zero", x)
			}
			l.LeaseID = h
		case "request_id", "peer_engine_id", "reason":
			s, ok := x.(string)
			if !ok {
				err = fmt.Errorf("%T, want a string", x)
			}
			switch name {
			case "request_id":
				l.RequestID = s
			case "peer_engine_id":
				l.Peer = s
			default:
				l.Reason = s
			}
		case "read":
			b, ok := x.(bool)
			if !ok {
				err = fmt.Errorf("%T, want a bool", x)
			}
			l.Read = b
		default:
			var n int64
			if n, err = integer(x); err == nil && n < 0 {
				err = fmt.Errorf("%d, want at least 0", n)
			}
			*map[string]*int64{"num_blocks": &l.NumBlocks, "num_tokens": &l.NumTokens,
				"expires_in_ms": &l.ExpiresInMs, "held_ms": &l.HeldMs}[name] = n
		}
		if err != nil {
			return l, fmt.Errorf("%s.%s: %v", tag, name, err)
		}
	}
	if tag == "LeaseReleased" && !slices.Contains(releaseReasons, l.Reason) {
		return l, fmt.Errorf("LeaseReleased.reason %q is not one of %v", l.Reason, releaseReasons)
	}
	return l, nil
}

// releaseReasons are kvlease_leases_released_total's reason labels, as
// docs/protocol.md lists them ("Release reasons").
var releaseReasons = []string{"read_done", "rejected", "aborted", "undelivered", "peer_lost", "expired", "fallback", "shutdown", "unclaimed"}
