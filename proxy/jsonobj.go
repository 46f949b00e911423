package proxy

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strconv"
)

// field is one member of a JSON object: its key and its value as raw JSON.
type field struct {
	key string
	val json.RawMessage
}

// object is a JSON object that keeps its members' order, so the legs the
// proxy builds differ from the client's body only where they must.
// Values are raw: only the members the proxy edits are ever decoded.
type object []field

var errNotObject = errors.New("not a JSON object")

// parseObject parses b, which must be exactly one JSON object. A key given
// twice keeps its first position and its last value (encoding/json's
// reading). The values alias b.
func parseObject(b []byte) (object, error) {
	b = bytes.TrimSpace(b)
	if len(b) == 0 || b[0] != '{' {
		return nil, errNotObject
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if _, err := dec.Token(); err != nil {
		return nil, err
	}
	var o object
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, err
		}
		key, ok := tok.(string)
		if !ok {
			return nil, errNotObject
		}
		start := dec.InputOffset()
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, err
		}
		// Alias the input rather than keep Decode's copy: the input
		// outlives the object and this saves a copy per member.
		raw := bytes.TrimLeft(b[start:dec.InputOffset()], " \t\r\n:")
		o.set(key, raw)
	}
	if _, err := dec.Token(); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("data after the JSON object")
	}
	return o, nil
}

// get returns the value of key, or nil when absent.
func (o object) get(key string) json.RawMessage {
	for _, f := range o {
		if f.key == key {
			return f.val
		}
	}
	return nil
}

// has reports whether key is present.
func (o object) has(key string) bool { return o.get(key) != nil }

// set replaces the value of key, or appends the member.
func (o *object) set(key string, val json.RawMessage) {
	for i := range *o {
		if (*o)[i].key == key {
			(*o)[i].val = val
			return
		}
	}
	*o = append(*o, field{key, val})
}

// del removes key if present.
func (o *object) del(key string) {
	for i := range *o {
		if (*o)[i].key == key {
			*o = append((*o)[:i], (*o)[i+1:]...)
			return
		}
	}
}

// clone returns a copy whose member list can be edited independently (the
// values are shared; they are never modified in place).
func (o object) clone() object { return append(object(nil), o...) }

// appendJSON appends o as compact-keyed JSON (values as they came).
func (o object) appendJSON(dst []byte) []byte {
	dst = append(dst, '{')
	for i, f := range o {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = strconv.AppendQuote(dst, f.key)
		dst = append(dst, ':')
		dst = append(dst, f.val...)
	}
	return append(dst, '}')
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
	usage, err := parseObject(resp.get("usage"))
	if err != nil {
		return 0, false
	}
	details, err := parseObject(usage.get("prompt_tokens_details"))
	if err != nil {
		return 0, false
	}
	n, err = strconv.ParseInt(string(bytes.TrimSpace(details.get("cached_tokens"))), 10, 64)
	return n, err == nil
}

// withCachedTokens returns body with usage.prompt_tokens_details.cached_tokens
// set to n, creating prompt_tokens_details when missing. A body that is not
// an object with a usage object is returned unchanged (false).
func withCachedTokens(body []byte, n int64) ([]byte, bool) {
	resp, err := parseObject(body)
	if err != nil {
		return body, false
	}
	usage, err := parseObject(resp.get("usage"))
	if err != nil {
		return body, false
	}
	var details object
	if d := usage.get("prompt_tokens_details"); !isNullOrAbsent(d) {
		if details, err = parseObject(d); err != nil {
			return body, false
		}
	}
	details.set("cached_tokens", strconv.AppendInt(nil, n, 10))
	usage.set("prompt_tokens_details", details.appendJSON(nil))
	resp.set("usage", usage.appendJSON(nil))
	return resp.appendJSON(make([]byte, 0, len(body)+16)), true
}
