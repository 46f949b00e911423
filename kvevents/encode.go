package kvevents

import (
	"bytes"
	"fmt"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/kvlease/kvlease/kvblock"
)

// Encoding is how events are laid out in msgpack.
type Encoding uint8

const (
	// EncodingMap encodes each event as a map keyed by field name, the
	// event's tag under "type", in a positional batch [ts, events,
	// data_parallel_rank]: vLLM since vllm-project/vllm#42892 (v0.26.0 and
	// later), which dropped array_like from the event structs and kept it
	// on the batch. llm-d's decoder (llm-d-kv-cache's VLLMAdapter, the
	// router's) reads the batch positionally and each event in either
	// form.
	EncodingMap Encoding = iota
	// EncodingArray encodes the events positionally too, the event's tag
	// first: vLLM before #42892 (msgspec's array_like event structs).
	EncodingArray
)

func (e Encoding) String() string {
	if e == EncodingArray {
		return "array"
	}
	return "map"
}

// ParseEncoding parses "map" or "array".
func ParseEncoding(s string) (Encoding, error) {
	switch s {
	case "map":
		return EncodingMap, nil
	case "array":
		return EncodingArray, nil
	}
	return 0, fmt.Errorf("kvevents: encoding %q: want map or array", s)
}

// kvCacheSpecKind is what newer vLLM sends for the one group of a
// full-attention model; kvlease's pool is one such group (group_idx 0).
const kvCacheSpecKind = "full_attention"

// encodeBatch returns the msgpack payload of one batch: the array [ts,
// events, data_parallel_rank], with vLLM's field names and order.
//
// The fields follow vLLM's msgspec structs with omit_defaults: in the map
// encoding a field equal to its default (extra_keys, the sliding window:
// None) is left out, and fields without a default (lora_id, medium,
// lora_name) are always present, nil when kvlease has no value. The array
// encoding is the older vLLM layout, whose BlockStored ends at lora_name
// and whose BlockRemoved ends at medium. Block hashes are kvlease's 128-bit
// chained prefix hashes (kvblock.Hash), sent as 16-byte msgpack bin (vLLM's
// default ExternalBlockHash form, bytes); the parent of a prompt's first
// block is nil,
// as in vLLM, and so is the parent of an offload tier's event (the tiers
// know hashes only: no tokens, no parent, as vLLM's offloading events).
func encodeBatch(enc Encoding, ts float64, rank int, events []kvblock.Event) []byte {
	return encodeEnvelope(ts, rank, func(e *msgpack.Encoder) { encodeEvents(e, enc, events) })
}

// encodeEnvelope returns the payload [ts, events, data_parallel_rank]
// whose events array the function writes. The batch is positional in
// every encoding: vLLM's EventBatch kept array_like when #42892 made the
// events maps, and llm-d's decoder reads it as an array (a map-encoded
// batch decodes there as zero events, silently).
func encodeEnvelope(ts float64, rank int, events func(*msgpack.Encoder)) []byte {
	var buf bytes.Buffer
	e := msgpack.NewEncoder(&buf)
	// Writes to a bytes.Buffer do not fail, so neither does the encoder:
	// its errors are ignored.
	e.EncodeArrayLen(3)
	e.EncodeFloat64(ts)
	events(e)
	e.EncodeInt(int64(rank))
	return buf.Bytes()
}

func encodeEvents(e *msgpack.Encoder, enc Encoding, events []kvblock.Event) {
	e.EncodeArrayLen(len(events))
	for i := range events {
		ev := &events[i]
		switch ev.Kind {
		case kvblock.BlockStored:
			encodeStored(e, enc, ev)
		case kvblock.BlockRemoved:
			encodeRemoved(e, enc, ev)
		case kvblock.AllBlocksCleared:
			if enc == EncodingArray {
				e.EncodeArrayLen(1)
			} else {
				e.EncodeMapLen(1)
				e.EncodeString("type")
			}
			e.EncodeString("AllBlocksCleared")
		default:
			panic(fmt.Sprintf("kvevents: event kind %d", ev.Kind))
		}
	}
}

// encodeLoRAID and encodeLoRAName write a stored event's adapter as vLLM
// does (lora_request.lora_int_id, lora_request.lora_name), nil for the base
// model.
func encodeLoRAID(e *msgpack.Encoder, ev *kvblock.Event) {
	if ev.Adapter.IsBase() {
		e.EncodeNil()
		return
	}
	e.EncodeInt(int64(ev.Adapter.ID))
}

func encodeLoRAName(e *msgpack.Encoder, ev *kvblock.Event) {
	if ev.Adapter.IsBase() {
		e.EncodeNil()
		return
	}
	e.EncodeString(ev.Adapter.Name)
}

func medium(ev *kvblock.Event) string {
	if ev.Medium == "" {
		return "GPU"
	}
	return ev.Medium
}

func encodeHashes(e *msgpack.Encoder, hs []kvblock.Hash) {
	e.EncodeArrayLen(len(hs))
	for _, h := range hs {
		e.EncodeBytes(h[:])
	}
}

func encodeStored(e *msgpack.Encoder, enc Encoding, ev *kvblock.Event) {
	parent := func() {
		// A prompt's first block has no parent; neither does an offload
		// tier's event, which knows hashes only (no tokens, no chain).
		if ev.Parent == kvblock.RootHash || len(ev.Tokens) == 0 {
			e.EncodeNil()
		} else {
			e.EncodeBytes(ev.Parent[:])
		}
	}
	tokens := func() {
		e.EncodeArrayLen(len(ev.Tokens))
		for _, t := range ev.Tokens {
			e.EncodeInt(int64(t))
		}
	}
	if enc == EncodingArray {
		e.EncodeArrayLen(8)
		e.EncodeString("BlockStored")
		encodeHashes(e, ev.Hashes)
		parent()
		tokens()
		e.EncodeInt(int64(ev.BlockSize))
		encodeLoRAID(e, ev)
		e.EncodeString(medium(ev))
		encodeLoRAName(e, ev)
		return
	}
	e.EncodeMapLen(10)
	e.EncodeString("type")
	e.EncodeString("BlockStored")
	e.EncodeString("block_hashes")
	encodeHashes(e, ev.Hashes)
	e.EncodeString("parent_block_hash")
	parent()
	e.EncodeString("token_ids")
	tokens()
	e.EncodeString("block_size")
	e.EncodeInt(int64(ev.BlockSize))
	e.EncodeString("lora_id")
	encodeLoRAID(e, ev)
	e.EncodeString("medium")
	e.EncodeString(medium(ev))
	e.EncodeString("lora_name")
	encodeLoRAName(e, ev)
	e.EncodeString("group_idx")
	e.EncodeInt(0)
	e.EncodeString("kv_cache_spec_kind")
	e.EncodeString(kvCacheSpecKind)
}

func encodeRemoved(e *msgpack.Encoder, enc Encoding, ev *kvblock.Event) {
	if enc == EncodingArray {
		e.EncodeArrayLen(3)
		e.EncodeString("BlockRemoved")
		encodeHashes(e, ev.Hashes)
		e.EncodeString(medium(ev))
		return
	}
	e.EncodeMapLen(4)
	e.EncodeString("type")
	e.EncodeString("BlockRemoved")
	e.EncodeString("block_hashes")
	encodeHashes(e, ev.Hashes)
	e.EncodeString("medium")
	e.EncodeString(medium(ev))
	e.EncodeString("group_idx")
	e.EncodeInt(0)
}

// coalesceRemoved merges runs of consecutive BlockRemoved events of one
// medium into one event with every hash, as vLLM sends one BlockRemoved per
// eviction pass rather than one per block. The pool records one event per
// evicted block; order is kept. The result shares no slice with events.
func coalesceRemoved(events []kvblock.Event) []kvblock.Event {
	out := make([]kvblock.Event, 0, len(events))
	for _, ev := range events {
		if n := len(out); n > 0 && ev.Kind == kvblock.BlockRemoved &&
			out[n-1].Kind == kvblock.BlockRemoved && medium(&out[n-1]) == medium(&ev) {
			out[n-1].Hashes = append(out[n-1].Hashes, ev.Hashes...)
			continue
		}
		if ev.Kind == kvblock.BlockRemoved {
			ev.Hashes = append([]kvblock.Hash(nil), ev.Hashes...)
		}
		out = append(out, ev)
	}
	return out
}
