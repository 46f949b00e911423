package tokenizer

import "unicode/utf8"

// Stream is an incremental detokenizer with stop strings. See the package
// documentation for its guarantees. The zero Stream is usable and has no stop
// strings.
type Stream struct {
	stops       []stopMatcher
	includeStop bool
	// pending holds the text not yet returned: an incomplete UTF-8 tail
	// and, unless includeStop, the longest suffix that is a proper prefix
	// of a stop string.
	pending []byte
	stopped bool
	// matched is the index of the stop string that matched (in the slice
	// given to NewStream), or -1.
	matched int
	// suppressed: stop strings ending at the bytes added now do not stop
	// the stream (vLLM ignores stop strings until min_tokens are out).
	suppressed bool
}

// Suppress makes stop strings that end in the next bytes added not count
// (on) or count again (off). The automata keep running while suppressed,
// so a stop string that began before Suppress(false) and ends after it
// still stops the stream, as in vLLM, where a stop string counts when it
// ends in a token past min_tokens.
func (st *Stream) Suppress(on bool) { st.suppressed = on }

// stopMatcher is a KMP automaton for one stop string: state is the length
// of the longest prefix of s that is a suffix of the text so far.
type stopMatcher struct {
	s     string
	index int   // position in NewStream's argument
	fail  []int // KMP failure function: fail[i] = border length of s[:i+1]
	state int
}

// NewStream returns a Stream that stops at the first occurrence of any of
// stops. Empty stop strings are ignored (an empty string would match before
// any output). includeStop keeps the matched stop string in the output.
// NewStream copies what it needs; the caller may reuse stops.
func NewStream(stops []string, includeStop bool) *Stream {
	st := &Stream{includeStop: includeStop, matched: -1}
	for i, s := range stops {
		if s == "" {
			continue
		}
		st.stops = append(st.stops, stopMatcher{s: s, index: i, fail: kmpFailure(s)})
	}
	return st
}

func kmpFailure(s string) []int {
	fail := make([]int, len(s))
	k := 0
	for i := 1; i < len(s); i++ {
		for k > 0 && s[i] != s[k] {
			k = fail[k-1]
		}
		if s[i] == s[k] {
			k++
		}
		fail[i] = k
	}
	return fail
}

// step advances the automaton by byte b and reports whether the stop string
// now ends at b.
func (m *stopMatcher) step(b byte) bool {
	k := m.state
	if k == len(m.s) { // a previous full match: continue from its border
		k = m.fail[k-1]
	}
	for k > 0 && m.s[k] != b {
		k = m.fail[k-1]
	}
	if m.s[k] == b {
		k++
	}
	m.state = k
	return k == len(m.s)
}

// Add feeds one generated token and returns the text that became final
// (possibly empty) and whether a stop string matched. After a match, Add
// returns ("", true) for any further token. Special tokens (EOS) and ids
// outside the vocabulary add no text.
func (st *Stream) Add(tok int32) (delta string, stopped bool) {
	if st.stopped {
		return "", true
	}
	if !IsByte(tok) {
		return "", false
	}
	one := [1]byte{byte(tok)}
	return st.AddBytes(one[:])
}

// AddBytes feeds the text of one generated token of any tokenizer (one or
// more bytes; none for a special token), as Add does for kvlease's byte
// tokens. When a stop string ends inside b, the rest of b is dropped.
func (st *Stream) AddBytes(b []byte) (delta string, stopped bool) {
	if st.stopped {
		return "", true
	}
	hold := 0
	for _, c := range b {
		st.pending = append(st.pending, c)
		hold = 0
		for i := range st.stops {
			m := &st.stops[i]
			if m.step(c) && !st.suppressed {
				// The first stop string in list order that ends here wins;
				// earlier bytes cannot have completed any (we check each).
				return st.stop(m), true
			}
			if m.state > hold {
				hold = m.state
			}
		}
	}
	if st.includeStop {
		hold = 0
	}
	cut := len(st.pending) - hold
	cut = completeUTF8(st.pending[:cut])
	if cut == 0 {
		return "", false
	}
	delta = string(st.pending[:cut])
	st.pending = st.pending[:copy(st.pending, st.pending[cut:])]
	return delta, false
}

func (st *Stream) stop(m *stopMatcher) string {
	st.stopped = true
	st.matched = m.index
	end := len(st.pending)
	if !st.includeStop {
		// The stop string lies entirely in pending: before this byte we
		// held back at least m.state = len(m.s)-1 bytes.
		end -= len(m.s)
	}
	delta := string(st.pending[:end])
	st.pending = st.pending[:0]
	return delta
}

// completeUTF8 returns the length of the longest prefix of p that does not
// end in an incomplete UTF-8 sequence that later bytes could still complete.
// A sequence that is already invalid counts as complete: it will decode to
// U+FFFD whatever follows.
func completeUTF8(p []byte) int {
	n := len(p)
	// Find the start of the last sequence: at most 3 bytes back.
	for i := n - 1; i >= 0 && i >= n-utf8.UTFMax; i-- {
		if p[i]&0xC0 != 0x80 { // not a continuation byte
			if utf8.FullRune(p[i:]) {
				return n
			}
			return i
		}
	}
	return n
}

// Flush returns the held-back text and empties the Stream. Call it when
// generation ends without a stop string (length limit, EOS, stop token). It
// returns "" after a stop string matched. The Stream may be fed further, but a
// stop string spanning the flush point is then not detected.
func (st *Stream) Flush() string {
	if st.stopped || len(st.pending) == 0 {
		return ""
	}
	s := string(st.pending)
	st.pending = st.pending[:0]
	for i := range st.stops {
		st.stops[i].state = 0
	}
	return s
}

// Stopped reports whether a stop string matched.
func (st *Stream) Stopped() bool { return st.stopped }

// StopIndex returns the index, in the slice given to NewStream, of the stop
// string that matched, or -1. The matched string is vLLM's stop_reason.
func (st *Stream) StopIndex() int {
	if !st.stopped {
		return -1
	}
	return st.matched
}
