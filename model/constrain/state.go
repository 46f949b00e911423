package constrain

// maxNest bounds the open containers of a value: a schema nests at most
// MaxDepth+1 containers, so this only stops free-form values.
const maxNest = 2*MaxDepth + 2

type mode uint8

const (
	mValue    mode = iota // the start of a value of cur
	mString               // inside a free string (a value, or a key with key set)
	mLit                  // matching lits[lo:hi] at pos
	mNumber               // inside a number
	mObjFirst             // after '{'
	mObjKey               // after ',' in an object
	mColon                // after a key
	mObjNext              // after a member's value
	mArrFirst             // after '['
	mArrNext              // after an item
	mEnd                  // the text is complete
	mAuto                 // the first byte of an auto tool-choice answer
	mFree                 // free text: anything goes
)

// What a literal match is for.
const (
	litValue  uint8 = iota // an enum value, true, false or null
	litKey                 // a declared property name, quoted
	litAlt                 // a tool call's prefix
	litSuffix              // a tool call's closing
)

// Number sub-states.
const (
	nSign   uint8 = iota // after '-'
	nZero                // after a leading 0
	nInt                 // in the integer digits
	nDot                 // after '.'
	nFrac                // in the fraction digits
	nExp                 // after 'e'
	nExpSgn              // after the exponent's sign
	nExpDig              // in the exponent digits
)

// frame is an open container. Frames are never modified once reachable
// from a State: a change copies the frame, so copies of a State share
// their stacks safely.
type frame struct {
	up    *frame
	n     *node
	used  uint64 // objects: the declared properties given so far
	count int32  // arrays: the items so far
	key   int32  // objects: the property whose value comes next (-1 free)
	array bool
	call  bool // a tool call: after its value comes n.suffix
}

var (
	boolLits = newLiterals([][]byte{[]byte("true"), []byte("false")})
	nullLits = newLiterals([][]byte{[]byte("null")})
)

// State is a position in a grammar: the text fed so far is a prefix of at
// least one complete text of the grammar, and Feed accepts exactly the
// bytes that keep it so. Its zero value is not usable; get one from
// Grammar.Start. A State is a small value: copying it copies the position
// (copies share immutable frames). Not safe for concurrent use; copies
// are independent.
type State struct {
	top  *frame
	cur  *node // mValue: the value's node; mLit: the node whose lits match
	lits *literals
	lo   int32
	hi   int32
	pos  int32
	call int32 // the tool call being generated (its alt index)
	// slen counts a bounded string's characters (bounded: cur's minLen
	// or maxLen applies).
	slen int32
	// nval is a bounded number's digits so far (its magnitude), neg its
	// sign.
	nval int64
	neg  bool

	depth   uint8
	mode    mode
	purpose uint8
	num     uint8
	digits  uint8
	esc     uint8 // mString: 1 after '\', 2..5 while (esc-1) hex digits remain
	need    uint8 // mString: UTF-8 continuation bytes still to come
	clo     byte  // the range of the next continuation byte
	chi     byte
	space   bool // one space may come now
	key     bool // mString: the string is a free property name
	bounded bool // mString: cur's minLength or maxLength applies
	integer bool // mNumber: no fraction, no exponent
	inArgs  bool // inside a tool call's arguments
}

// Start is the position before the first byte. One space may precede the
// value (a SentencePiece model's first token often carries one; see
// Vocab.Start for a start that depends on the vocabulary).
func (g *Grammar) Start() State {
	if g.auto {
		return State{mode: mAuto, cur: g.root, space: true}
	}
	return State{mode: mValue, cur: g.root, space: true}
}

// Done reports whether the text is complete and nothing may follow: the
// only choice left is to end.
func (s *State) Done() bool {
	if s.mode == mNumber && s.top == nil && s.numberEnds() {
		// A number at the top level is done when it cannot grow.
		switch s.num {
		case nZero:
			return s.integer
		case nInt:
			return s.integer && s.digits == maxIntDigits
		case nExpDig:
			return s.digits == maxExpDigits
		}
	}
	return s.mode == mEnd
}

// CanEnd reports whether the text may end here (a complete value, or free
// text).
func (s *State) CanEnd() bool {
	switch s.mode {
	case mEnd, mFree:
		return true
	case mNumber:
		return s.top == nil && s.numberEnds()
	case mLit:
		return s.top == nil && s.purpose == litValue && int(s.pos) == len(s.lits.s[s.lo])
	}
	return false
}

// Free reports whether the text is free: an auto tool-choice answer that
// chose text, where every byte is accepted.
func (s *State) Free() bool { return s.mode == mFree }

// InArgs reports whether the next byte is part of a tool call's
// arguments (the call's name is Grammar.CallName(Call())).
func (s *State) InArgs() bool { return s.inArgs }

// Call is the index of the tool call being (or last) generated.
func (s *State) Call() int { return int(s.call) }

// FeedBytes feeds p and reports whether all of it was accepted. After
// false the State is invalid.
func (s *State) FeedBytes(p []byte) bool {
	for _, b := range p {
		if !s.Feed(b) {
			return false
		}
	}
	return true
}

// Feed accepts b if it keeps the text a prefix of the grammar's language.
// After false the State is invalid: callers that probe copy it first.
func (s *State) Feed(b byte) bool {
	for {
		switch s.mode {
		case mValue:
			return s.valueStart(b)
		case mString:
			return s.stringByte(b)
		case mLit:
			ok, again := s.litByte(b)
			if !again {
				return ok
			}
		case mNumber:
			ok, again := s.numberByte(b)
			if !again {
				return ok
			}
		case mObjFirst, mObjKey:
			return s.objKey(b)
		case mColon:
			if b != ':' {
				return false
			}
			f := s.top
			s.mode, s.space = mValue, true
			if f.key < 0 {
				s.cur = f.n.extra
			} else {
				s.cur = f.n.props[f.key]
			}
			return true
		case mObjNext:
			return s.objNext(b)
		case mArrFirst, mArrNext:
			return s.arrByte(b)
		case mAuto:
			if b == ' ' && s.space {
				s.space = false
				return true
			}
			// The model chooses: the grammar's first byte starts a call,
			// anything else is text.
			s.mode = mValue
			s.space = false
			if !s.valueStart(b) {
				s.mode = mFree
			}
			return true
		case mFree:
			return true
		default: // mEnd
			return false
		}
	}
}

func (s *State) push(n *node, array bool) bool {
	if s.depth >= maxNest {
		return false
	}
	s.top = &frame{up: s.top, n: n, key: -1, array: array}
	s.depth++
	return true
}

func (s *State) pop() {
	s.top = s.top.up
	s.depth--
}

func (s *State) startLit(l *literals, purpose uint8) {
	s.mode, s.purpose, s.lits, s.lo, s.hi, s.pos = mLit, purpose, l, 0, int32(len(l.s)), 0
}

func (s *State) valueStart(b byte) bool {
	n := s.cur
	if b == ' ' && s.space {
		s.space = false
		return true
	}
	s.space = false
	if n.alts != nil && (b != '[' || n.kinds&kArray == 0) {
		s.startLit(n.alts, litAlt)
		ok, _ := s.litByte(b)
		return ok
	}
	if n.enum != nil {
		s.startLit(n.enum, litValue)
		ok, _ := s.litByte(b)
		return ok
	}
	switch {
	case b == '{' && n.kinds&kObject != 0:
		if !s.push(n, false) {
			return false
		}
		s.mode = mObjFirst
		return true
	case b == '[' && n.kinds&kArray != 0:
		if !s.push(n, true) {
			return false
		}
		s.mode = mArrFirst
		return true
	case b == '"' && n.kinds&kString != 0:
		s.mode, s.key, s.esc, s.need = mString, false, 0, 0
		s.bounded, s.slen = n.minLen > 0 || n.maxLen >= 0, 0
		return true
	case (b == '-' || isDigit(b)) && n.kinds&(kNumber|kInteger) != 0:
		s.mode, s.integer, s.digits = mNumber, n.kinds&kNumber == 0 || n.rng != nil, 0
		s.nval, s.neg = 0, b == '-'
		if b == '-' {
			s.num = nSign
			return n.rng == nil || n.rng.lo <= 0
		}
		s.num = nSign
		ok, _ := s.numberByte(b)
		return ok
	case (b == 't' || b == 'f') && n.kinds&kBoolean != 0:
		s.startLit(boolLits, litValue)
		ok, _ := s.litByte(b)
		return ok
	case b == 'n' && n.kinds&kNull != 0:
		s.startLit(nullLits, litValue)
		ok, _ := s.litByte(b)
		return ok
	}
	return false
}

func isDigit(b byte) bool { return b >= '0' && b <= '9' }

func isHex(b byte) bool {
	return isDigit(b) || (b >= 'a' && b <= 'f') || (b >= 'A' && b <= 'F')
}

// valueDone moves past a complete value to what its container expects.
func (s *State) valueDone() {
	f := s.top
	switch {
	case f == nil:
		s.mode = mEnd
	case f.call:
		s.inArgs = false
		s.startLit(f.n.suffix, litSuffix)
	case f.array:
		nf := *f
		nf.count++
		s.top = &nf
		s.mode = mArrNext
	default:
		s.mode = mObjNext
	}
}

func (s *State) stringByte(b byte) bool {
	switch {
	case s.esc == 1:
		switch b {
		case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			s.esc = 0
		case 'u':
			if s.bounded {
				// \u escapes may pair into one character from two:
				// bounded strings write characters as they are.
				return false
			}
			s.esc = 5
		default:
			return false
		}
		return true
	case s.esc > 1:
		if !isHex(b) {
			return false
		}
		s.esc--
		if s.esc == 1 {
			s.esc = 0
		}
		return true
	case s.need > 0:
		if b < s.clo || b > s.chi {
			return false
		}
		s.need--
		s.clo, s.chi = 0x80, 0xBF
		return true
	}
	switch {
	case b == '"':
		if s.bounded && int(s.slen) < s.cur.minLen {
			return false
		}
		if s.key {
			f := *s.top
			f.key = -1
			s.top = &f
			s.mode = mColon
		} else {
			s.valueDone()
		}
		return true
	case b < 0x20:
		return false
	}
	if s.bounded {
		// A character starts here: count it.
		if s.cur.maxLen >= 0 && int(s.slen) >= s.cur.maxLen {
			return false
		}
		s.slen++
	}
	switch {
	case b == '\\':
		s.esc = 1
		return true
	case b < 0x80:
		return true
	}
	return s.utf8Lead(b)
}

// utf8Lead accepts the lead byte of a multi-byte UTF-8 sequence and sets
// the range of the next byte so that overlong forms and surrogates are
// refused (RFC 3629).
func (s *State) utf8Lead(b byte) bool {
	s.clo, s.chi = 0x80, 0xBF
	switch {
	case b >= 0xC2 && b <= 0xDF:
		s.need = 1
	case b == 0xE0:
		s.need, s.clo = 2, 0xA0
	case b >= 0xE1 && b <= 0xEC, b == 0xEE, b == 0xEF:
		s.need = 2
	case b == 0xED:
		s.need, s.chi = 2, 0x9F
	case b == 0xF0:
		s.need, s.clo = 3, 0x90
	case b >= 0xF1 && b <= 0xF3:
		s.need = 3
	case b == 0xF4:
		s.need, s.chi = 3, 0x8F
	default:
		return false
	}
	return true
}

// litByte narrows the candidates by b. again is set when b ended a
// number-like literal implicitly: the value is done and b is fed again.
func (s *State) litByte(b byte) (ok, again bool) {
	pos := int(s.pos)
	lo, hi := int(s.lo), int(s.hi)
	c := s.lits.s
	nlo := lo
	for nlo < hi && (len(c[nlo]) <= pos || c[nlo][pos] < b) {
		nlo++
	}
	nhi := nlo
	for nhi < hi && len(c[nhi]) > pos && c[nhi][pos] == b {
		nhi++
	}
	if nlo == nhi {
		if s.purpose == litValue && len(c[lo]) == pos {
			s.valueDone()
			return false, true
		}
		return false, false
	}
	if s.purpose == litKey && !s.anyUnused(nlo, nhi) {
		return false, false
	}
	s.lo, s.hi, s.pos = int32(nlo), int32(nhi), int32(pos+1)
	if len(c[nlo]) != pos+1 || nhi-nlo > 1 {
		return true, false
	}
	// Complete, and nothing longer shares the prefix.
	switch s.purpose {
	case litValue:
		s.valueDone()
	case litKey:
		f := *s.top
		f.used |= 1 << nlo
		f.key = int32(nlo)
		s.top = &f
		s.mode = mColon
	case litAlt:
		n := s.cur
		if !s.push(n, false) {
			return false, false
		}
		s.top.call = true
		s.call = int32(nlo)
		s.inArgs = true
		s.mode, s.cur, s.space = mValue, n.altNodes[nlo], false
	case litSuffix:
		s.pop()
		s.valueDone()
	}
	return true, false
}

func (s *State) anyUnused(lo, hi int) bool {
	used := s.top.used
	for i := lo; i < hi; i++ {
		if used&(1<<i) == 0 {
			return true
		}
	}
	return false
}

func (s *State) objKey(b byte) bool {
	n := s.top.n
	if b == ' ' && s.space {
		s.space = false
		return true
	}
	first := s.mode == mObjFirst
	s.space = false
	switch b {
	case '"':
		if n.freeKeys {
			s.mode, s.key, s.esc, s.need, s.bounded = mString, true, 0, 0, false
			return true
		}
		s.startLit(n.keys, litKey)
		ok, _ := s.litByte(b)
		return ok
	case '}':
		if first && n.required&^s.top.used == 0 {
			s.pop()
			s.valueDone()
			return true
		}
	}
	return false
}

func (s *State) objNext(b byte) bool {
	f := s.top
	n := f.n
	switch b {
	case ',':
		if n.freeKeys || f.used != 1<<len(n.props)-1 {
			s.mode, s.space = mObjKey, true
			return true
		}
	case '}':
		if n.required&^f.used == 0 {
			s.pop()
			s.valueDone()
			return true
		}
	}
	return false
}

func (s *State) arrByte(b byte) bool {
	f := s.top
	n := f.n
	more := n.maxItems < 0 || int(f.count) < n.maxItems
	if s.mode == mArrNext {
		switch {
		case b == ',' && more:
			s.mode, s.cur, s.space = mValue, n.items, true
			return true
		case b == ']' && int(f.count) >= n.minItems:
			s.pop()
			s.valueDone()
			return true
		}
		return false
	}
	if b == ']' && n.minItems == 0 {
		s.pop()
		s.valueDone()
		return true
	}
	if !more {
		return false
	}
	s.mode, s.cur, s.space = mValue, n.items, false
	return s.valueStart(b)
}

// numberEnds reports whether the number so far is complete (and within
// its bounds).
func (s *State) numberEnds() bool {
	switch s.num {
	case nZero, nInt:
		return s.cur.rng == nil || s.cur.rng.contains(s.neg, s.nval)
	case nFrac, nExpDig:
		return true
	}
	return false
}

// numberByte extends the number by b. again is set when b ended it: the
// value is done and b is fed again.
func (s *State) numberByte(b byte) (ok, again bool) {
	d := isDigit(b)
	switch s.num {
	case nSign:
		switch {
		case b == '0':
			s.num = nZero
			return s.cur.rng == nil || s.cur.rng.contains(false, 0), false
		case d:
			s.num, s.digits, s.nval = nInt, 1, int64(b-'0')
			return s.cur.rng == nil || s.cur.rng.feasible(s.neg, s.nval, 1), false
		}
		return false, false
	case nZero, nInt:
		switch {
		case d && s.num == nInt && s.digits < maxIntDigits &&
			(s.cur.rng == nil || s.cur.rng.feasible(s.neg, s.nval*10+int64(b-'0'), int(s.digits)+1)):
			s.digits++
			s.nval = s.nval*10 + int64(b-'0')
			return true, false
		case b == '.' && !s.integer:
			s.num = nDot
			return true, false
		case (b == 'e' || b == 'E') && !s.integer:
			s.num = nExp
			return true, false
		}
	case nDot:
		if d {
			s.num, s.digits = nFrac, 1
			return true, false
		}
		return false, false
	case nFrac:
		switch {
		case d && s.digits < maxFracDigits:
			s.digits++
			return true, false
		case b == 'e' || b == 'E':
			s.num = nExp
			return true, false
		}
	case nExp:
		switch {
		case b == '+' || b == '-':
			s.num = nExpSgn
			return true, false
		case d:
			s.num, s.digits = nExpDig, 1
			return true, false
		}
		return false, false
	case nExpSgn:
		if d {
			s.num, s.digits = nExpDig, 1
			return true, false
		}
		return false, false
	case nExpDig:
		if d && s.digits < maxExpDigits {
			s.digits++
			return true, false
		}
	}
	if !s.numberEnds() || d {
		return false, false
	}
	s.valueDone()
	return false, true
}
