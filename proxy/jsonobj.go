package proxy

import (
	"bytes"
	"encoding/json"
	"errors"
	"strconv"

	"github.com/kvlease/kvlease/openai"
)

// field is one member of a JSON object: its key as it was written (a JSON
// string, quotes included; nil for a member the proxy added), its value as
// raw JSON and where that value starts in the parsed text (-1 for an added
// member). key is set only when rawKey is nil or holds escapes: a plain
// key is compared in place, so parsing allocates no string per member.
type field struct {
	key    string
	rawKey []byte
	val    json.RawMessage
	off    int
}

// is reports whether f's key is key.
func (f *field) is(key string) bool {
	if f.rawKey == nil || f.key != "" {
		return f.key == key
	}
	return string(f.rawKey[1:len(f.rawKey)-1]) == key
}

// name returns f's key.
func (f *field) name() string {
	if f.rawKey == nil || f.key != "" {
		return f.key
	}
	return string(f.rawKey[1 : len(f.rawKey)-1])
}

// object is a JSON object that keeps its members' order, so the legs the
// proxy builds differ from the client's body only where they must.
// Values are raw: only the members the proxy edits are ever decoded.
type object []field

var (
	errNotObject = errors.New("not a JSON object")
	errNotJSON   = errors.New("not valid JSON")
)

// parseObject parses b, which must be exactly one JSON object. A key given
// twice keeps its first position and its last value (encoding/json's
// reading). Keys and values alias b.
//
// It validates b (openai.Valid: json.Valid's answers, faster), then splits
// the members with a scanner that relies on that validity: several times
// faster than a json.Decoder walk and without its allocations, which
// matters on the proxy's path.
func parseObject(b []byte) (object, error) {
	return parseObjectInto(nil, b)
}

// parseObjectInto is parseObject appending the members to dst[:0], so a
// caller can reuse a member list.
func parseObjectInto(dst object, b []byte) (object, error) {
	if !openai.Valid(b) {
		return nil, errNotJSON
	}
	return parseValidObject(dst, b)
}

// parseValidObject is parseObjectInto for b already known to be valid
// JSON (a member of a validated document).
func parseValidObject(dst object, b []byte) (object, error) {
	o := dst[:0]
	if o == nil {
		o = make(object, 0, 16)
	}
	var err error
	isObject := openai.EachMember(b, func(rawKey []byte, start, end int) {
		var key string // set only for a key with escapes
		if err == nil && bytes.IndexByte(rawKey, '\\') >= 0 {
			key, err = unquote(rawKey)
		}
		if err == nil {
			o = o.merge(field{key: key, rawKey: rawKey, val: b[start:end], off: start})
		}
	})
	switch {
	case !isObject:
		return nil, errNotObject
	case err != nil:
		return nil, err
	}
	return o, nil
}

// unquote returns the string a valid JSON string literal denotes.
func unquote(raw []byte) (string, error) {
	var s string
	err := json.Unmarshal(raw, &s)
	return s, err
}

// merge adds parsed member f, or gives an earlier member of the same key
// f's value.
func (o object) merge(f field) object {
	for k := range o {
		g := &o[k]
		same := false
		if f.key == "" && g.key == "" {
			same = bytes.Equal(f.rawKey, g.rawKey) // both plain
		} else {
			same = g.is(f.name())
		}
		if same {
			g.val, g.off = f.val, f.off
			return o
		}
	}
	return append(o, f)
}

// index returns the position of key's member, or -1.
func (o object) index(key string) int {
	for i := range o {
		if o[i].is(key) {
			return i
		}
	}
	return -1
}

// get returns the value of key, or nil when absent.
func (o object) get(key string) json.RawMessage {
	if i := o.index(key); i >= 0 {
		return o[i].val
	}
	return nil
}

// has reports whether key is present.
func (o object) has(key string) bool { return o.index(key) >= 0 }

// set replaces the value of key, or appends the member. key must need no
// escaping in JSON (the proxy's keys are plain ASCII names).
func (o *object) set(key string, val json.RawMessage) {
	if i := o.index(key); i >= 0 {
		(*o)[i].val, (*o)[i].off = val, -1
		return
	}
	*o = append(*o, field{key: key, val: val, off: -1})
}

// del removes key if present.
func (o *object) del(key string) {
	if i := o.index(key); i >= 0 {
		*o = append((*o)[:i], (*o)[i+1:]...)
	}
}

// appendJSON appends o as JSON, keys and values as they came.
func (o object) appendJSON(dst []byte) []byte {
	dst = append(dst, '{')
	for i := range o {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = o[i].appendMember(dst)
	}
	return append(dst, '}')
}

func (f *field) appendMember(dst []byte) []byte {
	if f.rawKey != nil {
		dst = append(dst, f.rawKey...)
	} else {
		dst = append(dst, '"')
		dst = append(dst, f.key...)
		dst = append(dst, '"')
	}
	dst = append(dst, ':')
	return append(dst, f.val...)
}

// edit is one change appendEdited makes to an object: set key to val
// (appended after the members when absent, unless ifPresent), or delete
// it (del).
type edit struct {
	key       string
	val       json.RawMessage
	del       bool
	ifPresent bool
}

// appendEdited appends o as JSON with edits applied, as set and del would
// in the edits' order, without copying o's member list. Each key appears
// in edits at most once.
func (o object) appendEdited(dst []byte, edits []edit) []byte {
	dst = append(dst, '{')
	n := 0
	for i := range o {
		f := &o[i]
		val := f.val
		if k := editFor(edits, f); k >= 0 {
			if edits[k].del {
				continue
			}
			val = edits[k].val
		}
		if n > 0 {
			dst = append(dst, ',')
		}
		n++
		g := field{key: f.key, rawKey: f.rawKey, val: val}
		dst = g.appendMember(dst)
	}
	for _, e := range edits {
		if e.del || e.ifPresent || o.has(e.key) {
			continue
		}
		if n > 0 {
			dst = append(dst, ',')
		}
		n++
		g := field{key: e.key, val: e.val}
		dst = g.appendMember(dst)
	}
	return append(dst, '}')
}

func editFor(edits []edit, f *field) int {
	for k := range edits {
		if f.is(edits[k].key) {
			return k
		}
	}
	return -1
}

// member returns the member key of a parsed (so valid) object parsed as an
// object into dst, and where its value starts in o's text.
func (o object) member(dst object, key string) (object, int, error) {
	i := o.index(key)
	if i < 0 {
		return nil, 0, errNotObject
	}
	m, err := parseValidObject(dst, o[i].val)
	return m, o[i].off, err
}

// isTrue reports whether a raw value is the literal true.
func isTrue(v json.RawMessage) bool { return string(bytes.TrimSpace(v)) == "true" }

// isNullOrAbsent reports whether a raw value is missing or null.
func isNullOrAbsent(v json.RawMessage) bool {
	v = bytes.TrimSpace(v)
	return len(v) == 0 || string(v) == "null"
}

// cachedTokens reads usage.prompt_tokens_details.cached_tokens from a
// response object; ok is false when it is not there.
func cachedTokens(resp object) (n int64, ok bool) {
	var scratch [2][16]field
	usage, _, err := resp.member(scratch[0][:0], "usage")
	if err != nil {
		return 0, false
	}
	details, _, err := usage.member(scratch[1][:0], "prompt_tokens_details")
	if err != nil {
		return 0, false
	}
	n, err = strconv.ParseInt(string(bytes.TrimSpace(details.get("cached_tokens"))), 10, 64)
	return n, err == nil
}

// withCachedTokens returns body with usage.prompt_tokens_details.cached_tokens
// set to n, creating prompt_tokens_details when missing. A body that is not
// an object with a usage object is returned unchanged (false).
//
// It splices: the result is body with only the bytes of that one value
// replaced (or the member inserted), so the rest of the answer passes as D
// wrote it, at the cost of one copy. It does not validate body first (D's
// answer is passed on either way, and a scan of the whole answer would
// cost more than the splice): a valid body gets a valid result; an invalid
// one stays invalid, spliced or not.
func withCachedTokens(body []byte, n int64) ([]byte, bool) {
	var scratch [3][16]field
	resp, err := parseValidObject(scratch[0][:0], body)
	if err != nil {
		return body, false
	}
	usage, uoff, err := resp.member(scratch[1][:0], "usage")
	if err != nil {
		return body, false
	}
	var num [20]byte
	val := strconv.AppendInt(num[:0], n, 10)
	var at, end int // body[at:end] is replaced by pre, val, post
	var pre, post string
	switch d := usage.index("prompt_tokens_details"); {
	case d < 0:
		// Insert the member before usage's closing brace.
		at = uoff + closingBrace(resp.get("usage"))
		end = at
		pre, post = `"prompt_tokens_details":{"cached_tokens":`, "}"
		if len(usage) > 0 {
			pre = "," + pre
		}
	case isNullOrAbsent(usage[d].val):
		at, end = uoff+usage[d].off, uoff+usage[d].off+len(usage[d].val)
		pre, post = `{"cached_tokens":`, "}"
	default:
		details, err := parseValidObject(scratch[2][:0], usage[d].val)
		if err != nil {
			return body, false
		}
		doff := uoff + usage[d].off
		if c := details.index("cached_tokens"); c >= 0 {
			at, end = doff+details[c].off, doff+details[c].off+len(details[c].val)
		} else {
			at = doff + closingBrace(usage[d].val)
			end = at
			pre = `"cached_tokens":`
			if len(details) > 0 {
				pre = "," + pre
			}
		}
	}
	out := make([]byte, 0, len(body)+len(pre)+len(val)+len(post))
	out = append(out, body[:at]...)
	out = append(out, pre...)
	out = append(out, val...)
	out = append(out, post...)
	return append(out, body[end:]...), true
}

// closingBrace returns the index of the closing brace of a raw object
// value (its last byte, values being trimmed of space).
func closingBrace(v json.RawMessage) int { return len(v) - 1 }
