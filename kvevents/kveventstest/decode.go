// Package kveventstest is a reference client of vLLM-format KV cache
// events, for tests: a msgpack decoder written from the schema of vLLM's
// kv_events.py (independently of package kvevents' encoder and of any
// msgpack library) and ZMQ SUB and replay clients built on
// github.com/go-zeromq/zmq4 (independently of kvevents' sockets).
package kveventstest

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
)

// Batch is one decoded payload.
type Batch struct {
	TS               float64
	Events           []Event
	DataParallelRank int64
}

// Event is one decoded event. Fields an event kind does not carry are zero.
type Event struct {
	Type string // BlockStored, BlockRemoved, AllBlocksCleared
	// BlockHashes are the hashes as sent: the bytes of a bin hash, or
	// "int:N" for an integer hash.
	BlockHashes []string
	// Parent is nil when the batch sent nil (a prompt's first block).
	Parent    *string
	TokenIDs  []int64
	BlockSize int64
	Medium    string
	// LoRAID and LoRAName are a stored event's adapter; nil when sent nil
	// (the base model).
	LoRAID   *int64
	LoRAName *string
	// GroupIdx and SpecKind are sent by the map encoding only.
	GroupIdx int64
	SpecKind string
}

// Decode decodes a payload of encoding "map" or "array" strictly: an
// unknown field, a missing field without a default, a wrong type or
// trailing bytes are errors.
func Decode(encoding string, payload []byte) (Batch, error) {
	d := &decoder{b: payload}
	v, err := d.value(0)
	if err != nil {
		return Batch{}, err
	}
	if d.i != len(d.b) {
		return Batch{}, fmt.Errorf("%d trailing bytes", len(d.b)-d.i)
	}
	switch encoding {
	case "map":
		return batchFrom(v, eventFromMap)
	case "array":
		return batchFrom(v, eventFromArray)
	}
	return Batch{}, fmt.Errorf("encoding %q", encoding)
}

// decoder reads msgpack (github.com/msgpack/msgpack/blob/master/spec.md)
// into nil, bool, int64, uint64, float64, string, []byte, []any and
// map[string]any.
type decoder struct {
	b []byte
	i int
}

var errShort = errors.New("msgpack: truncated")

func (d *decoder) take(n int) ([]byte, error) {
	if n < 0 || d.i+n > len(d.b) {
		return nil, errShort
	}
	s := d.b[d.i : d.i+n]
	d.i += n
	return s, nil
}

func (d *decoder) uint(n int) (uint64, error) {
	s, err := d.take(n)
	if err != nil {
		return 0, err
	}
	var v uint64
	for _, c := range s {
		v = v<<8 | uint64(c)
	}
	return v, nil
}

func (d *decoder) value(depth int) (any, error) {
	if depth > 32 {
		return nil, errors.New("msgpack: nested too deep")
	}
	s, err := d.take(1)
	if err != nil {
		return nil, err
	}
	c := s[0]
	switch {
	case c <= 0x7f:
		return int64(c), nil
	case c >= 0xe0:
		return int64(int8(c)), nil
	case c&0xf0 == 0x80:
		return d.mapN(int(c&0x0f), depth)
	case c&0xf0 == 0x90:
		return d.arrayN(int(c&0x0f), depth)
	case c&0xe0 == 0xa0:
		return d.str(int(c & 0x1f))
	}
	switch c {
	case 0xc0:
		return nil, nil
	case 0xc2:
		return false, nil
	case 0xc3:
		return true, nil
	case 0xc4, 0xc5, 0xc6:
		n, err := d.uint(1 << (c - 0xc4))
		if err != nil {
			return nil, err
		}
		b, err := d.take(int(n))
		return slices.Clone(b), err
	case 0xca:
		v, err := d.uint(4)
		return float64(math.Float32frombits(uint32(v))), err
	case 0xcb:
		v, err := d.uint(8)
		return math.Float64frombits(v), err
	case 0xcc, 0xcd, 0xce, 0xcf:
		v, err := d.uint(1 << (c - 0xcc))
		if err != nil {
			return nil, err
		}
		if v <= math.MaxInt64 {
			return int64(v), nil
		}
		return v, nil
	case 0xd0, 0xd1, 0xd2, 0xd3:
		n := 1 << (c - 0xd0)
		v, err := d.uint(n)
		if err != nil {
			return nil, err
		}
		shift := 64 - 8*n
		return int64(v<<shift) >> shift, nil
	case 0xd9, 0xda, 0xdb:
		n, err := d.uint(1 << (c - 0xd9))
		if err != nil {
			return nil, err
		}
		return d.str(int(n))
	case 0xdc, 0xdd:
		n, err := d.uint(2 << (c - 0xdc))
		if err != nil {
			return nil, err
		}
		return d.arrayN(int(n), depth)
	case 0xde, 0xdf:
		n, err := d.uint(2 << (c - 0xde))
		if err != nil {
			return nil, err
		}
		return d.mapN(int(n), depth)
	}
	return nil, fmt.Errorf("msgpack: type byte %#x not expected in a KV events payload", c)
}

func (d *decoder) str(n int) (string, error) {
	b, err := d.take(n)
	return string(b), err
}

func (d *decoder) arrayN(n, depth int) ([]any, error) {
	if n > len(d.b)-d.i {
		return nil, errShort
	}
	out := make([]any, n)
	for k := range out {
		v, err := d.value(depth + 1)
		if err != nil {
			return nil, err
		}
		out[k] = v
	}
	return out, nil
}

func (d *decoder) mapN(n, depth int) (map[string]any, error) {
	if n > len(d.b)-d.i {
		return nil, errShort
	}
	out := make(map[string]any, n)
	for range n {
		k, err := d.value(depth + 1)
		if err != nil {
			return nil, err
		}
		ks, ok := k.(string)
		if !ok {
			return nil, fmt.Errorf("msgpack: map key %T, want a string", k)
		}
		if _, dup := out[ks]; dup {
			return nil, fmt.Errorf("msgpack: duplicate key %q", ks)
		}
		if out[ks], err = d.value(depth + 1); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// Seq decodes a sequence number frame (8 bytes, big-endian, signed: the
// replay's end marker is -1).
func Seq(b []byte) (int64, error) {
	if len(b) != 8 {
		return 0, fmt.Errorf("sequence frame of %d bytes, want 8", len(b))
	}
	return int64(binary.BigEndian.Uint64(b)), nil
}
