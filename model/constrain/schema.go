package constrain

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// Bounds of a compiled grammar. A schema over them is refused with an
// *Error naming the bound.
const (
	// MaxDepth bounds the nesting of objects and arrays, in a schema and in
	// free-form values (json_object, or a schema without a type): a
	// free-form value opens no container deeper than this.
	MaxDepth = 32
	// MaxProperties bounds the declared properties of one object schema.
	MaxProperties = 64
	// MaxEnum bounds the values of one enum.
	MaxEnum = 256
	// MaxLiteralBytes bounds the JSON encoding of one enum value or
	// property name.
	MaxLiteralBytes = 1024
	// MaxSchemaNodes bounds the subschemas of one schema.
	MaxSchemaNodes = 4096
	// MaxTools bounds the tools of one request.
	MaxTools = 128
	// MaxParallelCalls bounds the calls of one answer when parallel tool
	// calls are allowed.
	MaxParallelCalls = 16
)

// Number limits. They restrict what is generated, never what is valid: a
// number has at most maxIntDigits digits before the point, maxFracDigits
// after it and maxExpDigits in its exponent, so every generated number
// parses as a finite float64 and every generated integer is exact in one.
const (
	maxIntDigits  = 15
	maxFracDigits = 15
	maxExpDigits  = 2
)

// Error is a schema kvlease cannot compile: an unsupported keyword, a bad
// value, a bound exceeded. Path is the JSON pointer of the subschema
// ("" at the root); Keyword the keyword at fault, if one is.
type Error struct {
	Path    string
	Keyword string
	Msg     string
}

func (e *Error) Error() string {
	at := e.Path
	if at == "" {
		at = "the root"
	}
	return fmt.Sprintf("constrain: schema at %s: %s", at, e.Msg)
}

// kinds is a set of JSON types.
type kinds uint8

const (
	kObject kinds = 1 << iota
	kArray
	kString
	kNumber
	kInteger
	kBoolean
	kNull

	kAll = kObject | kArray | kString | kNumber | kInteger | kBoolean | kNull
)

var kindNames = map[string]kinds{
	"object": kObject, "array": kArray, "string": kString, "number": kNumber,
	"integer": kInteger, "boolean": kBoolean, "null": kNull,
}

// literals is a sorted set of byte strings: JSON encodings of enum values,
// or quoted property names, or tool-call prefixes. The candidates that
// share a prefix are a contiguous range, and a candidate that equals the
// prefix comes first in it.
type literals struct {
	s [][]byte
}

func newLiterals(s [][]byte) *literals {
	slices.SortFunc(s, bytes.Compare)
	s = slices.CompactFunc(s, bytes.Equal)
	return &literals{s: s}
}

// node is a compiled schema.
type node struct {
	kinds kinds
	// enum, when set, is the whole value: one of these encodings.
	enum *literals

	// Objects. props are sorted by their quoted, encoded names (keys.s
	// holds them in the same order); required and a frame's used set are
	// bit sets over props. With freeKeys (no properties declared, and
	// additional properties allowed) any key may appear, with values of
	// extra.
	props    []*node
	keys     *literals
	required uint64
	freeKeys bool
	extra    *node

	// Arrays: items of items, at least minItems, at most maxItems (-1:
	// unbounded).
	items    *node
	minItems int
	maxItems int

	// Numbers: rng bounds them (nil: unbounded).
	rng *numRange

	// Strings: at least minLen characters, at most maxLen (-1: unbounded;
	// the zero node is unbounded only through anyNode and stringBounds).
	minLen int
	maxLen int

	// Tool calls: the value is one of alts (a literal prefix that names
	// the call), then the value of altNodes[i], then suffix.
	alts     *literals
	altNodes []*node
	suffix   *literals
}

// anyNode is a free-form JSON value of any type.
var anyNode = func() *node {
	n := &node{kinds: kAll, freeKeys: true, maxItems: -1, maxLen: -1}
	n.extra, n.items = n, n
	return n
}()

// Grammar is a compiled schema: what a generated text must be. It is
// immutable and safe to share between requests and goroutines.
type Grammar struct {
	root *node
	// auto: the text is either a tool call (root) or free text, chosen
	// by its first byte.
	auto bool
	// calls are the tool names of a ToolCalls grammar, by alt index.
	calls []string
}

// CallName is the name of the tool of a call (State.Call).
func (g *Grammar) CallName(i int) string { return g.calls[i] }

// Any is the grammar of any JSON object (response_format json_object):
// OpenAI's JSON mode answers with an object.
func Any() *Grammar {
	n := &node{kinds: kObject, freeKeys: true, extra: anyNode, maxItems: -1, maxLen: -1}
	return &Grammar{root: n}
}

// Compile compiles a JSON Schema (the subset described in the package
// documentation). With strict, OpenAI's structured-output rules also
// apply: every object sets additionalProperties false and requires every
// property.
func Compile(schema json.RawMessage, strict bool) (*Grammar, error) {
	c := compiler{strict: strict, resolving: map[string]bool{}}
	var root struct {
		Defs        map[string]json.RawMessage `json:"$defs"`
		Definitions map[string]json.RawMessage `json:"definitions"`
	}
	if json.Unmarshal(schema, &root) == nil {
		c.defs, c.definitions = root.Defs, root.Definitions
	}
	n, err := c.compile(schema, "", 0)
	if err != nil {
		return nil, err
	}
	return &Grammar{root: n}, nil
}

type compiler struct {
	strict bool
	nodes  int
	// The root's definitions, for $ref; resolving holds the references
	// being compiled, to refuse recursion.
	defs, definitions map[string]json.RawMessage
	resolving         map[string]bool
}

// annotations are keywords that describe and never constrain: accepted
// and ignored.
var annotations = map[string]bool{
	"title": true, "description": true, "$schema": true, "$id": true, "$comment": true,
	"default": true, "examples": true, "deprecated": true, "readOnly": true, "writeOnly": true,
	"strict": true,
}

var known = map[string]bool{
	"type": true, "properties": true, "required": true, "additionalProperties": true,
	"items": true, "minItems": true, "maxItems": true, "enum": true, "const": true, "anyOf": true, "oneOf": true, "allOf": true,
	"$ref": true, "$defs": true, "definitions": true, "minLength": true, "maxLength": true,
	"minimum": true, "maximum": true, "exclusiveMinimum": true, "exclusiveMaximum": true,
}

func errAt(path, kw, format string, args ...any) *Error {
	return &Error{Path: path, Keyword: kw, Msg: fmt.Sprintf(format, args...)}
}

func (c *compiler) compile(raw json.RawMessage, path string, depth int) (*node, error) {
	c.nodes++
	if c.nodes > MaxSchemaNodes {
		return nil, errAt(path, "", "the schema has more than %d subschemas", MaxSchemaNodes)
	}
	if depth > MaxDepth {
		return nil, errAt(path, "", "the schema nests deeper than %d levels", MaxDepth)
	}
	raw = bytes.TrimSpace(raw)
	if string(raw) == "true" {
		return anyNode, nil
	}
	var kw map[string]json.RawMessage
	if len(raw) == 0 || raw[0] != '{' || json.Unmarshal(raw, &kw) != nil {
		return nil, errAt(path, "", "a schema must be an object")
	}
	var unsupported []string
	for k := range kw {
		if !known[k] && !annotations[k] {
			unsupported = append(unsupported, k)
		}
	}
	if len(unsupported) > 0 {
		sort.Strings(unsupported)
		return nil, errAt(path, unsupported[0], "unsupported keyword(s): %s (supported: type, properties, required, additionalProperties, items, minItems, maxItems, minLength, maxLength, minimum, maximum, exclusiveMinimum, exclusiveMaximum, enum, const, anyOf and oneOf of distinct types, allOf of one schema, $ref to $defs)",
			strings.Join(unsupported, ", "))
	}
	if v, ok := kw["$ref"]; ok {
		return c.ref(v, kw, path, depth)
	}
	if v, ok := kw["enum"]; ok {
		return c.enum(v, kw, path, "enum")
	}
	if v, ok := kw["const"]; ok {
		return c.enum(append(append([]byte{'['}, v...), ']'), kw, path, "const")
	}
	for _, comb := range []string{"anyOf", "oneOf", "allOf"} {
		v, ok := kw[comb]
		if !ok {
			continue
		}
		for k := range kw {
			if k != comb && k != "$defs" && k != "definitions" && !annotations[k] {
				return nil, errAt(path, k, "%s together with %s is not supported: put it in the branches", k, comb)
			}
		}
		if comb == "allOf" {
			// One branch is that branch (as generators wrap a $ref to give
			// it a description); several would need intersecting schemas.
			var branches []json.RawMessage
			if json.Unmarshal(v, &branches) != nil || len(branches) != 1 {
				return nil, errAt(path, "allOf", "allOf is supported with one schema only")
			}
			return c.compile(branches[0], path+"/allOf/0", depth)
		}
		// Branches of distinct types: a value matches at most one, so
		// oneOf is anyOf.
		return c.anyOf(v, path, depth, comb)
	}
	n := &node{kinds: kAll, maxItems: -1, maxLen: -1}
	if t, ok := kw["type"]; ok {
		k, err := parseType(t, path)
		if err != nil {
			return nil, err
		}
		n.kinds = k
	}
	if n.kinds&kNumber != 0 {
		n.kinds &^= kInteger // every integer is a number
	}
	if n.kinds&kObject != 0 {
		if err := c.object(n, kw, path, depth); err != nil {
			return nil, err
		}
	} else if _, ok := firstOf(kw, "properties", "required", "additionalProperties"); ok {
		k, _ := firstOf(kw, "properties", "required", "additionalProperties")
		return nil, errAt(path, k, "%s needs type object", k)
	}
	if n.kinds&kArray != 0 {
		if err := c.array(n, kw, path, depth); err != nil {
			return nil, err
		}
	} else if k, ok := firstOf(kw, "items", "minItems", "maxItems"); ok {
		return nil, errAt(path, k, "%s needs type array", k)
	}
	if n.kinds&kString != 0 {
		if err := stringBounds(n, kw, path); err != nil {
			return nil, err
		}
	} else if k, ok := firstOf(kw, "minLength", "maxLength"); ok {
		return nil, errAt(path, k, "%s needs type string", k)
	}
	if k, ok := firstOf(kw, "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"); ok {
		if n.kinds&(kNumber|kInteger) == 0 {
			return nil, errAt(path, k, "%s needs type number or integer", k)
		}
		r, err := numberRange(kw, path)
		if err != nil {
			return nil, err
		}
		n.rng = r
	}
	return n, nil
}

// numRange bounds a number: generated as an integer in [lo, hi].
type numRange struct{ lo, hi int64 }

// maxMagnitude is the largest integer of maxIntDigits digits.
const maxMagnitude = 999_999_999_999_999

// numberRange reads minimum, maximum, exclusiveMinimum and
// exclusiveMaximum as the integers they allow (of at most maxIntDigits
// digits): a bounded number is generated as an integer, which every
// bound that has one in range admits.
func numberRange(kw map[string]json.RawMessage, path string) (*numRange, error) {
	r := &numRange{lo: -maxMagnitude, hi: maxMagnitude}
	clamp := func(f float64) int64 {
		return int64(math.Max(-maxMagnitude-1, math.Min(maxMagnitude+1, f)))
	}
	for _, k := range []string{"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"} {
		v, ok := kw[k]
		if !ok {
			continue
		}
		var f float64
		if json.Unmarshal(v, &f) != nil {
			return nil, errAt(path, k, "%s must be a number", k)
		}
		switch k {
		case "minimum":
			r.lo = max(r.lo, clamp(math.Ceil(f)))
		case "maximum":
			r.hi = min(r.hi, clamp(math.Floor(f)))
		case "exclusiveMinimum":
			r.lo = max(r.lo, clamp(math.Floor(f))+1)
		case "exclusiveMaximum":
			r.hi = min(r.hi, clamp(math.Ceil(f))-1)
		}
	}
	if r.lo > r.hi {
		return nil, errAt(path, "minimum", "no integer of at most %d digits is within the bounds", maxIntDigits)
	}
	return r, nil
}

// feasible reports whether some integer in r is written with the digits
// p (k of them, no leading zero unless p is 0) followed by at most
// maxIntDigits-k more, negative with neg.
func (r *numRange) feasible(neg bool, p int64, k int) bool {
	if p == 0 { // a leading 0 is the whole number; -0 is 0
		return r.lo <= 0 && 0 <= r.hi
	}
	width := int64(1)
	for j := k; j <= maxIntDigits; j++ {
		a, b := p*width, p*width+width-1
		if neg {
			a, b = -b, -a
		}
		if a <= r.hi && b >= r.lo {
			return true
		}
		width *= 10
	}
	return false
}

// contains reports whether the integer ±p is in r.
func (r *numRange) contains(neg bool, p int64) bool {
	if neg {
		p = -p
	}
	return r.lo <= p && p <= r.hi
}

// MaxStringLength bounds minLength and maxLength.
const MaxStringLength = 1 << 20

// stringBounds reads minLength and maxLength (in characters, as JSON
// Schema counts them).
func stringBounds(n *node, kw map[string]json.RawMessage, path string) error {
	var err error
	n.minLen, n.maxLen, err = bounds(kw, path, "minLength", "maxLength", MaxStringLength)
	return err
}

func firstOf(kw map[string]json.RawMessage, names ...string) (string, bool) {
	for _, n := range names {
		if _, ok := kw[n]; ok {
			return n, true
		}
	}
	return "", false
}

func parseType(raw json.RawMessage, path string) (kinds, error) {
	var one string
	if json.Unmarshal(raw, &one) == nil {
		k, ok := kindNames[one]
		if !ok {
			return 0, errAt(path, "type", "unknown type %q", one)
		}
		return k, nil
	}
	var many []string
	if json.Unmarshal(raw, &many) != nil || len(many) == 0 {
		return 0, errAt(path, "type", "type must be a type name or a non-empty array of them")
	}
	var k kinds
	for _, s := range many {
		t, ok := kindNames[s]
		if !ok {
			return 0, errAt(path, "type", "unknown type %q", s)
		}
		k |= t
	}
	return k, nil
}

func (c *compiler) object(n *node, kw map[string]json.RawMessage, path string, depth int) error {
	var props map[string]json.RawMessage
	if v, ok := kw["properties"]; ok && json.Unmarshal(v, &props) != nil {
		return errAt(path, "properties", "properties must be an object of schemas")
	}
	var required []string
	if v, ok := kw["required"]; ok && json.Unmarshal(v, &required) != nil {
		return errAt(path, "required", "required must be an array of property names")
	}
	additional := json.RawMessage("true")
	if v, ok := kw["additionalProperties"]; ok {
		additional = bytes.TrimSpace(v)
	}
	if c.strict {
		if string(additional) != "false" {
			return errAt(path, "additionalProperties", "strict mode needs additionalProperties false on every object")
		}
		for name := range props {
			if !slices.Contains(required, name) {
				return errAt(path, "required", "strict mode needs every property required; %q is not", name)
			}
		}
	}
	names := make([]string, 0, len(props))
	for name := range props {
		names = append(names, name)
	}
	for _, r := range required {
		if _, ok := props[r]; !ok {
			if string(additional) == "false" {
				return errAt(path, "required", "required property %q is not in properties and additionalProperties is false", r)
			}
			names = append(names, r) // any value
		}
	}
	if len(names) > MaxProperties {
		return errAt(path, "properties", "an object may declare at most %d properties, got %d", MaxProperties, len(names))
	}
	if len(names) == 0 && string(additional) != "false" {
		n.freeKeys = true
		n.extra = anyNode
		if string(additional) != "true" {
			x, err := c.compile(additional, path+"/additionalProperties", depth+1)
			if err != nil {
				return err
			}
			n.extra = x
		}
		return nil
	}
	type entry struct {
		key  []byte
		name string
	}
	entries := make([]entry, 0, len(names))
	for _, name := range names {
		k := encodeString(name)
		if len(k) > MaxLiteralBytes {
			return errAt(path, "properties", "a property name is longer than %d bytes", MaxLiteralBytes)
		}
		entries = append(entries, entry{k, name})
	}
	slices.SortFunc(entries, func(a, b entry) int { return bytes.Compare(a.key, b.key) })
	keys := make([][]byte, len(entries))
	n.props = make([]*node, len(entries))
	for i, e := range entries {
		keys[i] = e.key
		sub, ok := props[e.name]
		if !ok {
			n.props[i] = anyNode
		} else {
			x, err := c.compile(sub, path+"/properties/"+pointerEscape(e.name), depth+1)
			if err != nil {
				return err
			}
			n.props[i] = x
		}
		if slices.Contains(required, e.name) {
			n.required |= 1 << i
		}
	}
	n.keys = &literals{s: keys}
	return nil
}

func pointerEscape(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}

func (c *compiler) array(n *node, kw map[string]json.RawMessage, path string, depth int) error {
	n.items = anyNode
	if v, ok := kw["items"]; ok {
		x, err := c.compile(v, path+"/items", depth+1)
		if err != nil {
			return err
		}
		n.items = x
	}
	var err error
	n.minItems, n.maxItems, err = bounds(kw, path, "minItems", "maxItems", 1<<20)
	return err
}

// bounds reads a pair of bounds such as minItems and maxItems: integers
// in [0, limit], min 0 and max -1 (none) when absent, min ≤ max.
func bounds(kw map[string]json.RawMessage, path, minKey, maxKey string, limit int) (lo, hi int, err error) {
	hi = -1
	for _, k := range []string{minKey, maxKey} {
		v, ok := kw[k]
		if !ok {
			continue
		}
		var x int
		if json.Unmarshal(v, &x) != nil || x < 0 || x > limit {
			return 0, 0, errAt(path, k, "%s must be an integer in [0, %d]", k, limit)
		}
		if k == minKey {
			lo = x
		} else {
			hi = x
		}
	}
	if hi >= 0 && lo > hi {
		return 0, 0, errAt(path, minKey, "%s %d is more than %s %d", minKey, lo, maxKey, hi)
	}
	return lo, hi, nil
}

// enum compiles enum (or const, given as a one-value array) to literals:
// each value's canonical encoding (compact, object keys sorted, no HTML
// escaping, numbers as written).
func (c *compiler) enum(raw json.RawMessage, kw map[string]json.RawMessage, path, name string) (*node, error) {
	for k := range kw {
		if k != name && k != "type" && !annotations[k] {
			return nil, errAt(path, k, "%s together with %s is not supported", k, name)
		}
	}
	var vals []json.RawMessage
	if json.Unmarshal(raw, &vals) != nil || len(vals) == 0 {
		return nil, errAt(path, name, "enum must be a non-empty array")
	}
	if len(vals) > MaxEnum {
		return nil, errAt(path, name, "enum has %d values; at most %d are allowed", len(vals), MaxEnum)
	}
	allowed := kAll
	if t, ok := kw["type"]; ok {
		k, err := parseType(t, path)
		if err != nil {
			return nil, err
		}
		allowed = k
	}
	lits := make([][]byte, 0, len(vals))
	for _, v := range vals {
		enc, k, err := canonical(v)
		if err != nil {
			return nil, errAt(path, name, "an enum value is not valid JSON")
		}
		if allowed&k == 0 && !(k == kInteger && allowed&kNumber != 0) && !(k == kNumber && allowed&kInteger != 0 && isIntegral(enc)) {
			continue // a value of the wrong type can never validate
		}
		if len(enc) > MaxLiteralBytes {
			return nil, errAt(path, name, "an enum value's encoding is longer than %d bytes", MaxLiteralBytes)
		}
		lits = append(lits, enc)
	}
	if len(lits) == 0 {
		return nil, errAt(path, name, "no %s value has the schema's type", name)
	}
	return &node{kinds: kAll, enum: newLiterals(lits), maxItems: -1, maxLen: -1}, nil
}

func isIntegral(num []byte) bool {
	f, err := strconv.ParseFloat(string(num), 64)
	return err == nil && f == float64(int64(f))
}

// canonical re-encodes a JSON value compactly with sorted keys, strings
// escaped as encodeString does, numbers kept as written.
func canonical(raw json.RawMessage) ([]byte, kinds, error) {
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, 0, err
	}
	var b []byte
	b = appendCanonical(b, v)
	var k kinds
	switch x := v.(type) {
	case map[string]any:
		k = kObject
	case []any:
		k = kArray
	case string:
		k = kString
	case json.Number:
		k = kNumber
		if _, err := x.Int64(); err == nil {
			k = kInteger
		}
	case bool:
		k = kBoolean
	case nil:
		k = kNull
	}
	return b, k, nil
}

func appendCanonical(b []byte, v any) []byte {
	switch x := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		b = append(b, '{')
		for i, k := range keys {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, encodeString(k)...)
			b = append(b, ':')
			b = appendCanonical(b, x[k])
		}
		return append(b, '}')
	case []any:
		b = append(b, '[')
		for i, e := range x {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendCanonical(b, e)
		}
		return append(b, ']')
	case string:
		return append(b, encodeString(x)...)
	case json.Number:
		return append(b, x...)
	case bool:
		return strconv.AppendBool(b, x)
	}
	return append(b, "null"...)
}

// encodeString is s as a JSON string, without HTML escaping.
func encodeString(s string) []byte {
	var buf bytes.Buffer
	e := json.NewEncoder(&buf)
	e.SetEscapeHTML(false)
	_ = e.Encode(s) // a string always encodes
	return bytes.TrimRight(buf.Bytes(), "\n")
}

// anyOf merges branches of distinct JSON types into one node: a value's
// first byte then tells which branch it follows. Branches that share a
// type (two object schemas, say) are refused.
func (c *compiler) anyOf(raw json.RawMessage, path string, depth int, kw string) (*node, error) {
	var branches []json.RawMessage
	if json.Unmarshal(raw, &branches) != nil || len(branches) == 0 {
		return nil, errAt(path, kw, "%s must be a non-empty array of schemas", kw)
	}
	n := &node{maxItems: -1, maxLen: -1}
	for i, b := range branches {
		x, err := c.compile(b, fmt.Sprintf("%s/%s/%d", path, kw, i), depth)
		if err != nil {
			return nil, err
		}
		if x.enum != nil {
			return nil, errAt(path, kw, "%s branches with enum or const are not supported", kw)
		}
		xk := x.kinds
		if xk&kNumber != 0 {
			xk |= kInteger
		}
		nk := n.kinds
		if nk&kNumber != 0 {
			nk |= kInteger
		}
		if xk&nk != 0 {
			return nil, errAt(path, kw, "%s branches must have distinct types (branch %d overlaps an earlier one)", kw, i)
		}
		n.kinds |= x.kinds
		if x.kinds&kObject != 0 {
			n.props, n.keys, n.required, n.freeKeys, n.extra = x.props, x.keys, x.required, x.freeKeys, x.extra
		}
		if x.kinds&kArray != 0 {
			n.items, n.minItems, n.maxItems = x.items, x.minItems, x.maxItems
		}
		if x.kinds&kString != 0 {
			n.minLen, n.maxLen = x.minLen, x.maxLen
		}
		if x.kinds&(kNumber|kInteger) != 0 {
			n.rng = x.rng
		}
	}
	return n, nil
}

// ref compiles a $ref to one of the root's $defs (or definitions) where
// it appears, as if the definition were written there. A recursive
// reference is refused: a recursive schema can require values deeper
// than any bound, or than the model will ever finish.
func (c *compiler) ref(raw json.RawMessage, kw map[string]json.RawMessage, path string, depth int) (*node, error) {
	for k := range kw {
		if k != "$ref" && k != "$defs" && k != "definitions" && !annotations[k] {
			return nil, errAt(path, k, "%s together with $ref is not supported", k)
		}
	}
	var ref string
	if json.Unmarshal(raw, &ref) != nil {
		return nil, errAt(path, "$ref", "$ref must be a string")
	}
	var target json.RawMessage
	var ok bool
	if name, found := strings.CutPrefix(ref, "#/$defs/"); found {
		target, ok = c.defs[pointerUnescape(name)]
	} else if name, found := strings.CutPrefix(ref, "#/definitions/"); found {
		target, ok = c.definitions[pointerUnescape(name)]
	}
	if !ok {
		return nil, errAt(path, "$ref", "$ref %q does not name one of the root's $defs or definitions", ref)
	}
	if c.resolving[ref] {
		return nil, errAt(path, "$ref", "$ref %q is recursive; recursive schemas are not supported", ref)
	}
	c.resolving[ref] = true
	defer delete(c.resolving, ref)
	return c.compile(target, path, depth)
}

func pointerUnescape(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~1", "/"), "~0", "~")
}
