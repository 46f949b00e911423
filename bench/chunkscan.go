package bench

import (
	"encoding/json"
	"unicode/utf8"
)

// event is what the client reads of a response or stream event: the text
// pieces in the order chunk.text joins them, whether a choice finished,
// the usage, and the server's error.
type event struct {
	pieces   [][]byte // valid until the data they came from is reused
	choices  int
	finished bool
	usage    bool
	prompt   int
	output   int
	failure  string
	slow     chunk // the encoding/json fallback's target
}

// textLen returns the length of the text the event carries.
func (e *event) textLen() int {
	n := 0
	for _, p := range e.pieces {
		n += len(p)
	}
	return n
}

// decode reads data into e. Most events take a hand-written scan that
// reads only the fields the client needs without allocating; whatever it
// is unsure of (escapes in a needed string, a case-insensitive key match,
// a duplicate key, a type it does not expect, invalid JSON) goes to
// encoding/json, whose results and errors are the reference.
func (e *event) decode(data []byte) error {
	e.reset()
	if s := (chunkScanner{data: data, e: e}); s.scan() {
		return nil
	}
	e.reset()
	c := &e.slow
	*c = chunk{}
	if err := json.Unmarshal(data, c); err != nil {
		return err
	}
	e.failure = c.failure(data)
	e.choices = len(c.Choices)
	e.finished = c.finished()
	if c.Usage != nil {
		e.usage, e.prompt, e.output = true, c.Usage.PromptTokens, c.Usage.CompletionTokens
	}
	if t := c.text(); t != "" {
		e.pieces = append(e.pieces, []byte(t))
	}
	return nil
}

func (e *event) reset() {
	clear(e.pieces)
	e.pieces = e.pieces[:0]
	e.choices, e.finished, e.usage, e.prompt, e.output, e.failure = 0, false, false, 0, 0, ""
}

// maxScanDepth bounds the nesting the scanner skips through; deeper
// events go to encoding/json.
const maxScanDepth = 32

// maxScanChoices bounds the choices of one event the scanner handles.
const maxScanChoices = 8

// Text slots of one choice, in the order chunk.text joins them.
const (
	slotText = iota
	slotDeltaReasoning
	slotDeltaContent
	slotMessageReasoning
	slotMessageContent
	numSlots
)

// chunkScanner is a strict JSON scanner for the chunk shape. Each method
// returns false when the scan must give up (to encoding/json).
type chunkScanner struct {
	data []byte
	i    int
	e    *event
	// slots holds each choice's text pieces until the end, when they are
	// put in order.
	slots [maxScanChoices][numSlots][]byte
}

func (s *chunkScanner) scan() bool {
	s.ws()
	if !s.consume('{') {
		return false
	}
	ok := s.fields(chunkKeys, func(field int) bool {
		switch field {
		case 0:
			return s.choices()
		case 1:
			return s.usage()
		case 2:
			return s.null() // an error: encoding/json tells it
		default:
			v, ok := s.plainString()
			if ok && string(v) == "error" {
				return false
			}
			return ok
		}
	})
	if !ok {
		return false
	}
	s.ws()
	if s.i != len(s.data) {
		return false
	}
	for c := range s.e.choices {
		for _, p := range s.slots[c] {
			if len(p) > 0 {
				s.e.pieces = append(s.e.pieces, p)
			}
		}
	}
	return true
}

func (s *chunkScanner) choices() bool {
	s.ws()
	if s.peek() == 'n' {
		return s.null()
	}
	if !s.consume('[') {
		return false
	}
	s.ws()
	if s.consume(']') {
		return true
	}
	for {
		c := s.e.choices
		if c == maxScanChoices {
			return false
		}
		s.e.choices++
		s.ws()
		if !s.consume('{') || !s.choice(c) {
			return false
		}
		s.ws()
		if s.consume(']') {
			return true
		}
		if !s.consume(',') {
			return false
		}
	}
}

func (s *chunkScanner) choice(c int) bool {
	return s.fields(choiceKeys, func(field int) bool {
		switch field {
		case 0:
			v, ok := s.textString()
			s.slots[c][slotText] = v
			return ok
		case 1:
			return s.content(c, slotDeltaReasoning, slotDeltaContent)
		case 2:
			return s.content(c, slotMessageReasoning, slotMessageContent)
		default:
			s.ws()
			if s.peek() == 'n' {
				return s.null()
			}
			v, ok := s.skipString()
			if ok && len(v) > 2 { // more than ""
				s.e.finished = true
			}
			return ok
		}
	})
}

// content reads a delta or message object.
func (s *chunkScanner) content(c, reasoning, content int) bool {
	s.ws()
	if !s.consume('{') {
		return false
	}
	return s.fields(contentKeys, func(field int) bool {
		s.ws()
		if s.peek() == 'n' {
			return s.null() // leaves the field empty, as encoding/json does
		}
		v, ok := s.textString()
		if field == 0 {
			s.slots[c][content] = v
		} else {
			s.slots[c][reasoning] = v
		}
		return ok
	})
}

func (s *chunkScanner) usage() bool {
	s.ws()
	if s.peek() == 'n' {
		return s.null()
	}
	if !s.consume('{') {
		return false
	}
	s.e.usage = true
	return s.fields(usageKeys, func(field int) bool {
		n, ok := s.smallInt()
		if field == 0 {
			s.e.prompt = n
		} else {
			s.e.output = n
		}
		return ok
	})
}

// object reads the members of an object whose "{" was consumed, calling
// member with each key (without quotes) when the scanner is at its value.
// The keys each object of the chunk shape is read for, in the order of
// the field index fields passes on.
var (
	chunkKeys   = []string{"choices", "usage", "error", "object"}
	choiceKeys  = []string{"text", "delta", "message", "finish_reason"}
	contentKeys = []string{"content", "reasoning_content"}
	usageKeys   = []string{"prompt_tokens", "completion_tokens"}
)

// fields reads the members of an object (its '{' already consumed): field
// is called with the index in names of each known key, the value's scan
// left to it; other keys' values are skipped. A key seen twice, or one
// that encoding/json would match to a name by case folding, gives up, as
// encoding/json's own rules then decide. len(names) <= 8.
func (s *chunkScanner) fields(names []string, field func(i int) bool) bool {
	var seen uint8
	return s.object(func(key []byte) bool {
		i := 0
		for i < len(names) && string(key) != names[i] {
			i++
		}
		if i == len(names) {
			if foldsTo(key, names...) {
				return false
			}
			return s.skip(0)
		}
		if seen&(1<<i) != 0 {
			return false
		}
		seen |= 1 << i
		return field(i)
	})
}

func (s *chunkScanner) object(member func(key []byte) bool) bool {
	s.ws()
	if s.consume('}') {
		return true
	}
	for {
		s.ws()
		k, ok := s.plainString()
		if !ok {
			return false
		}
		s.ws()
		if !s.consume(':') || !member(k) {
			return false
		}
		s.ws()
		if s.consume('}') {
			return true
		}
		if !s.consume(',') {
			return false
		}
	}
}

// plainString reads a string without escapes or invalid UTF-8 and returns
// its contents.
func (s *chunkScanner) plainString() ([]byte, bool) {
	s.ws()
	if !s.consume('"') {
		return nil, false
	}
	start := s.i
	ascii := true
	for ; s.i < len(s.data); s.i++ {
		switch b := s.data[s.i]; {
		case b == '"':
			v := s.data[start:s.i]
			s.i++
			return v, ascii || utf8.Valid(v)
		case b == '\\' || b < 0x20:
			return nil, false
		case b >= 0x80:
			ascii = false
		}
	}
	return nil, false
}

// textString reads a string and returns its contents: those of the data
// when it has neither escapes nor invalid UTF-8, or else a copy unquoted
// by encoding/json (generated text has quotes and newlines now and then).
func (s *chunkScanner) textString() ([]byte, bool) {
	s.ws()
	start := s.i
	if v, ok := s.plainString(); ok {
		return v, true
	}
	s.i = start
	raw, ok := s.skipString()
	if !ok {
		return nil, false
	}
	var str string
	if json.Unmarshal(raw, &str) != nil {
		return nil, false
	}
	return []byte(str), true
}

// skipString reads a valid string, escapes allowed, and returns it with
// its quotes.
func (s *chunkScanner) skipString() ([]byte, bool) {
	s.ws()
	start := s.i
	if !s.consume('"') {
		return nil, false
	}
	for s.i < len(s.data) {
		b := s.data[s.i]
		s.i++
		switch {
		case b == '"':
			return s.data[start:s.i], true
		case b < 0x20:
			return nil, false
		case b == '\\':
			if s.i >= len(s.data) {
				return nil, false
			}
			esc := s.data[s.i]
			s.i++
			switch esc {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				if s.i+4 > len(s.data) {
					return nil, false
				}
				for _, h := range s.data[s.i : s.i+4] {
					if !isHex(h) {
						return nil, false
					}
				}
				s.i += 4
			default:
				return nil, false
			}
		}
	}
	return nil, false
}

// smallInt reads a non-negative integer of at most 15 digits.
func (s *chunkScanner) smallInt() (int, bool) {
	s.ws()
	start, n := s.i, 0
	for s.i < len(s.data) && s.data[s.i] >= '0' && s.data[s.i] <= '9' {
		n = n*10 + int(s.data[s.i]-'0')
		s.i++
	}
	digits := s.i - start
	if digits == 0 || digits > 15 || (digits > 1 && s.data[start] == '0') {
		return 0, false
	}
	if s.i < len(s.data) {
		switch s.data[s.i] {
		case '.', 'e', 'E':
			return 0, false
		}
	}
	return n, true
}

// skip reads any valid JSON value.
func (s *chunkScanner) skip(depth int) bool {
	if depth > maxScanDepth {
		return false
	}
	s.ws()
	switch b := s.peek(); {
	case b == '"':
		_, ok := s.skipString()
		return ok
	case b == '{':
		s.i++
		return s.object(func([]byte) bool { return s.skip(depth + 1) })
	case b == '[':
		s.i++
		s.ws()
		if s.consume(']') {
			return true
		}
		for {
			if !s.skip(depth + 1) {
				return false
			}
			s.ws()
			if s.consume(']') {
				return true
			}
			if !s.consume(',') {
				return false
			}
		}
	case b == 't':
		return s.literal("true")
	case b == 'f':
		return s.literal("false")
	case b == 'n':
		return s.null()
	case b == '-' || (b >= '0' && b <= '9'):
		return s.number()
	}
	return false
}

// number reads a number as the JSON grammar defines it.
func (s *chunkScanner) number() bool {
	s.consume('-')
	switch {
	case s.consume('0'):
	case s.digits() == 0:
		return false
	}
	if s.consume('.') && s.digits() == 0 {
		return false
	}
	if s.consume('e') || s.consume('E') {
		if !s.consume('+') {
			s.consume('-')
		}
		if s.digits() == 0 {
			return false
		}
	}
	return true
}

func (s *chunkScanner) digits() int {
	start := s.i
	for s.i < len(s.data) && s.data[s.i] >= '0' && s.data[s.i] <= '9' {
		s.i++
	}
	return s.i - start
}

func (s *chunkScanner) null() bool { return s.literal("null") }

func (s *chunkScanner) literal(lit string) bool {
	s.ws()
	if len(s.data)-s.i < len(lit) || string(s.data[s.i:s.i+len(lit)]) != lit {
		return false
	}
	s.i += len(lit)
	return true
}

func (s *chunkScanner) ws() {
	for s.i < len(s.data) {
		switch s.data[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

func (s *chunkScanner) peek() byte {
	if s.i < len(s.data) {
		return s.data[s.i]
	}
	return 0
}

func (s *chunkScanner) consume(b byte) bool {
	if s.i < len(s.data) && s.data[s.i] == b {
		s.i++
		return true
	}
	return false
}

func isHex(b byte) bool {
	return b >= '0' && b <= '9' || b >= 'a' && b <= 'f' || b >= 'A' && b <= 'F'
}

// foldsTo reports whether key matches one of names case-insensitively
// (encoding/json's rule) without matching it exactly: such a key would be
// read into the field by encoding/json, so the scanner gives up. Keys with
// non-ASCII bytes give up too (encoding/json folds some of them).
func foldsTo(key []byte, names ...string) bool {
	for _, b := range key {
		if b >= 0x80 {
			return true
		}
	}
	for _, n := range names {
		if len(n) == len(key) && equalFoldASCII(key, n) {
			return true
		}
	}
	return false
}

func equalFoldASCII(a []byte, b string) bool {
	for i := range a {
		x, y := a[i], b[i]
		if 'A' <= x && x <= 'Z' {
			x += 'a' - 'A'
		}
		if 'A' <= y && y <= 'Z' {
			y += 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}
