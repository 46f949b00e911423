package kveventstest

import (
	"fmt"
	"slices"
)

// The schema, from vLLM's kv_events.py (msgspec structs, omit_defaults):
//
//	EventBatch:       ts: float, events: list, data_parallel_rank: int | None = None
//	BlockStored:      block_hashes: list[ExternalBlockHash], parent_block_hash: ExternalBlockHash | None,
//	                  token_ids: list[int], block_size: int, lora_id: int | None, medium: str | None,
//	                  lora_name: str | None, extra_keys = None, group_idx = None,
//	                  kv_cache_spec_kind = None, kv_cache_spec_sliding_window = None
//	BlockRemoved:     block_hashes, medium: str | None, group_idx = None
//	AllBlocksCleared: (no fields)
//
// EventBatch is array_like (positional) in both encodings. Map encoding
// (vLLM since #42892): one map per event, its tag under "type"; fields
// with a default may be absent, the others must be present. Array
// encoding: positional events, the tag first; trailing fields with a
// default may be absent. ExternalBlockHash is bytes or int; both are
// accepted.

var (
	storedRequired = []string{"block_hashes", "parent_block_hash", "token_ids", "block_size", "lora_id", "medium", "lora_name"}
	storedOptional = []string{"extra_keys", "group_idx", "kv_cache_spec_kind", "kv_cache_spec_sliding_window"}
)

func eventFromMap(v any) (Event, error) {
	m, ok := v.(map[string]any)
	if !ok {
		return Event{}, fmt.Errorf("event is %T, want a map", v)
	}
	tag, ok := m["type"].(string)
	if !ok {
		return Event{}, fmt.Errorf("no string \"type\"")
	}
	e := Event{Type: tag}
	var err error
	switch tag {
	case "BlockStored":
		if err = keys(m, append([]string{"type"}, storedRequired...), storedOptional); err != nil {
			return e, err
		}
		err = e.stored(m["block_hashes"], m["parent_block_hash"], m["token_ids"], m["block_size"], m["lora_id"], m["medium"], m["lora_name"])
	case "BlockRemoved":
		if err = keys(m, []string{"type", "block_hashes", "medium"}, []string{"group_idx"}); err != nil {
			return e, err
		}
		e.BlockHashes, err = hashes(m["block_hashes"])
		if err == nil {
			e.Medium, err = optString(m["medium"])
		}
	case "AllBlocksCleared":
		err = keys(m, []string{"type"}, nil)
	default:
		return e, fmt.Errorf("unknown event type %q", tag)
	}
	if err != nil {
		return e, fmt.Errorf("%s: %v", tag, err)
	}
	if g, ok := m["group_idx"]; ok && g != nil {
		if e.GroupIdx, err = integer(g); err != nil {
			return e, fmt.Errorf("group_idx: %v", err)
		}
	}
	if k, ok := m["kv_cache_spec_kind"]; ok {
		if e.SpecKind, err = optString(k); err != nil {
			return e, fmt.Errorf("kv_cache_spec_kind: %v", err)
		}
	}
	return e, nil
}

// batchFrom decodes the batch, an array [ts, events] or [ts, events,
// data_parallel_rank] in both encodings (vLLM's EventBatch stayed
// array_like when its events became maps), each event with event.
func batchFrom(v any, event func(any) (Event, error)) (Batch, error) {
	a, ok := v.([]any)
	if !ok || len(a) < 2 || len(a) > 3 {
		return Batch{}, fmt.Errorf("batch is %T of %d, want an array of 2 or 3", v, len(a))
	}
	var b Batch
	var err error
	if b.TS, err = float(a[0]); err != nil {
		return b, fmt.Errorf("ts: %v", err)
	}
	if len(a) == 3 && a[2] != nil {
		if b.DataParallelRank, err = integer(a[2]); err != nil {
			return b, fmt.Errorf("data_parallel_rank: %v", err)
		}
	}
	evs, ok := a[1].([]any)
	if !ok {
		return b, fmt.Errorf("events is %T, want an array", a[1])
	}
	for i, ev := range evs {
		e, err := event(ev)
		if err != nil {
			return b, fmt.Errorf("events[%d]: %v", i, err)
		}
		b.Events = append(b.Events, e)
	}
	return b, nil
}

func eventFromArray(v any) (Event, error) {
	a, ok := v.([]any)
	if !ok || len(a) == 0 {
		return Event{}, fmt.Errorf("event is %T, want a non-empty array", v)
	}
	tag, ok := a[0].(string)
	if !ok {
		return Event{}, fmt.Errorf("tag is %T, want a string", a[0])
	}
	e := Event{Type: tag}
	var err error
	switch tag {
	case "BlockStored":
		if len(a) < 1+len(storedRequired)-1 || len(a) > 1+len(storedRequired)+len(storedOptional) {
			return e, fmt.Errorf("BlockStored of %d elements", len(a))
		}
		// lora_name came after the first array layout: absent means None.
		var loraName any
		if len(a) > 7 {
			loraName = a[7]
		}
		err = e.stored(a[1], a[2], a[3], a[4], a[5], a[6], loraName)
		if err == nil && len(a) > 9 && a[9] != nil {
			e.GroupIdx, err = integer(a[9])
		}
	case "BlockRemoved":
		if len(a) < 3 || len(a) > 4 {
			return e, fmt.Errorf("BlockRemoved of %d elements", len(a))
		}
		e.BlockHashes, err = hashes(a[1])
		if err == nil {
			e.Medium, err = optString(a[2])
		}
	case "AllBlocksCleared":
		if len(a) != 1 {
			return e, fmt.Errorf("AllBlocksCleared of %d elements", len(a))
		}
	default:
		return e, fmt.Errorf("unknown event type %q", tag)
	}
	if err != nil {
		return e, fmt.Errorf("%s: %v", tag, err)
	}
	return e, nil
}

func (e *Event) stored(hs, parent, tokens, blockSize, loraID, medium, loraName any) error {
	var err error
	if e.BlockHashes, err = hashes(hs); err != nil {
		return fmt.Errorf("block_hashes: %v", err)
	}
	if parent != nil {
		p, err := hash(parent)
		if err != nil {
			return fmt.Errorf("parent_block_hash: %v", err)
		}
		e.Parent = &p
	}
	ts, ok := tokens.([]any)
	if !ok {
		return fmt.Errorf("token_ids is %T, want an array", tokens)
	}
	for _, t := range ts {
		x, err := integer(t)
		if err != nil {
			return fmt.Errorf("token_ids: %v", err)
		}
		e.TokenIDs = append(e.TokenIDs, x)
	}
	if e.BlockSize, err = integer(blockSize); err != nil {
		return fmt.Errorf("block_size: %v", err)
	}
	if loraID != nil {
		id, err := integer(loraID)
		if err != nil {
			return fmt.Errorf("lora_id: %v", err)
		}
		e.LoRAID = &id
	}
	if e.Medium, err = optString(medium); err != nil {
		return fmt.Errorf("medium: %v", err)
	}
	if loraName != nil {
		name, err := optString(loraName)
		if err != nil {
			return fmt.Errorf("lora_name: %v", err)
		}
		e.LoRAName = &name
	}
	return nil
}

// keys checks that m has every required key and no key outside required
// and optional.
func keys(m map[string]any, required, optional []string) error {
	for _, k := range required {
		if _, ok := m[k]; !ok {
			return fmt.Errorf("missing field %q", k)
		}
	}
	for k := range m {
		if !slices.Contains(required, k) && !slices.Contains(optional, k) {
			return fmt.Errorf("unknown field %q", k)
		}
	}
	return nil
}

func hash(v any) (string, error) {
	switch x := v.(type) {
	case []byte:
		if len(x) == 0 || len(x) > 64 {
			return "", fmt.Errorf("a %d-byte hash", len(x))
		}
		return string(x), nil
	case int64:
		if x < 0 {
			return "", fmt.Errorf("negative hash %d", x)
		}
		return fmt.Sprintf("int:%d", x), nil
	case uint64:
		return fmt.Sprintf("int:%d", x), nil
	}
	return "", fmt.Errorf("hash is %T, want bytes or an integer", v)
}

func hashes(v any) ([]string, error) {
	a, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf("%T, want an array", v)
	}
	out := make([]string, len(a))
	for i, x := range a {
		h, err := hash(x)
		if err != nil {
			return nil, err
		}
		out[i] = h
	}
	return out, nil
}

func integer(v any) (int64, error) {
	if x, ok := v.(int64); ok {
		return x, nil
	}
	return 0, fmt.Errorf("%T, want an integer", v)
}

func float(v any) (float64, error) {
	if x, ok := v.(float64); ok {
		return x, nil
	}
	return 0, fmt.Errorf("%T, want a float", v)
}

func optString(v any) (string, error) {
	if v == nil {
		return "", nil
	}
	if s, ok := v.(string); ok {
		return s, nil
	}
	return "", fmt.Errorf("%T, want a string or nil", v)
}
