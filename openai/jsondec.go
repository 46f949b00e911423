package openai

import (
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// The readers below decode request bodies in one pass, without reflection,
// to the same values encoding/json gives. Each takes the index of a value
// in b (space skipped) and returns the index just past it, or -1 when the
// value is not one they are sure about: invalid JSON, another type, or a
// form whose reading by encoding/json they do not reproduce. On -1 the
// caller decodes the whole body again with encoding/json, which decides
// and words the error, so the two can differ only in speed. FuzzDecode
// checks that they never differ otherwise.

// readString reads the string at b[i] as encoding/json decodes it into a
// string: escapes resolved, a \u escape pair that is a valid surrogate
// pair joined, any other surrogate escape and each byte of invalid UTF-8
// replaced by U+FFFD. It checks the string as it goes, in one pass.
func readString(b []byte, i int) (string, int) {
	if i >= len(b) || b[i] != '"' {
		return "", -1
	}
	start := i + 1
	j := plainEnd(b, start, highBits)
	if j < len(b) && b[j] == '"' { // the common case: printable ASCII
		return string(b[start:j]), j + 1
	}
	// out is the string, once it differs from its text: from the first
	// escape or invalid byte on; nil until then.
	var buf [64]byte
	var out []byte
	for j < len(b) {
		switch c := b[j]; {
		case c == '"':
			if out == nil {
				return string(b[start:j]), j + 1
			}
			return string(out), j + 1
		case c < 0x20:
			return "", -1
		case c == '\\':
			if out == nil {
				out = beginOut(buf[:0], b, start, j)
			}
			if out, j = appendEscape(out, b, j); j < 0 {
				return "", -1
			}
		default: // UTF-8
			rr, size := utf8.DecodeRune(b[j:])
			if rr == utf8.RuneError && size == 1 {
				if out == nil {
					out = beginOut(buf[:0], b, start, j)
				}
				out = utf8.AppendRune(out, rr)
			} else if out != nil {
				out = append(out, b[j:j+size]...)
			}
			j += size
		}
		k := plainEnd(b, j, highBits)
		if out != nil {
			out = append(out, b[j:k]...)
		}
		j = k
	}
	return "", -1
}

// plainASCII says which bytes a string holds as they are and that need no
// UTF-8 check: printable ASCII but the quote and the backslash.
var plainASCII = func() (t [256]bool) {
	for c := 0x20; c < 0x80; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// beginOut begins readString's out with b[start:j], the string's text so
// far, in buf when what is left of b fits (most such strings are short),
// else in storage of that size, up to a bound (append grows it past).
func beginOut(buf, b []byte, start, j int) []byte {
	if n := min(len(b)-start, 1<<14); n > cap(buf) {
		buf = make([]byte, 0, n)
	}
	return append(buf, b[start:j]...)
}

// appendEscape appends the escape at b[j] (a backslash) to out and returns
// the index past it, or -1 when it is not valid JSON.
func appendEscape(out, b []byte, j int) ([]byte, int) {
	if j+1 >= len(b) {
		return out, -1
	}
	switch e := b[j+1]; e {
	case '"', '\\', '/':
		return append(out, e), j + 2
	case 'b':
		return append(out, '\b'), j + 2
	case 'f':
		return append(out, '\f'), j + 2
	case 'n':
		return append(out, '\n'), j + 2
	case 'r':
		return append(out, '\r'), j + 2
	case 't':
		return append(out, '\t'), j + 2
	case 'u':
		rr := hex4(b, j+2)
		if rr < 0 {
			return out, -1
		}
		j += 6
		if utf16.IsSurrogate(rr) {
			if j+1 < len(b) && b[j] == '\\' && b[j+1] == 'u' {
				if d := utf16.DecodeRune(rr, hex4(b, j+2)); d != utf8.RuneError {
					return utf8.AppendRune(out, d), j + 6
				}
			}
			rr = utf8.RuneError // a lone surrogate, as encoding/json reads it
		}
		return utf8.AppendRune(out, rr), j
	}
	return out, -1
}

// hex4 is the value of the four hex digits at b[i], or -1.
func hex4(b []byte, i int) rune {
	if len(b)-i < 4 {
		return -1
	}
	var r rune
	for _, c := range b[i : i+4] {
		d := unhex(c)
		if d < 0 {
			return -1
		}
		r = r<<4 | rune(d)
	}
	return r
}

// isLiteral reports whether the literal lit (null, true, false) stands at
// b[i]; what follows it is checked by the caller.
func isLiteral(b []byte, i int, lit string) bool {
	return len(b)-i >= len(lit) && string(b[i:i+len(lit)]) == lit
}

// readInt reads the integer at b[i] as encoding/json decodes a number into
// a signed integer of the given bits: an integer literal in range. A
// fraction, an exponent or a value out of range is for encoding/json to
// refuse (-1).
func readInt(b []byte, i int, bits uint) (int64, int) {
	end := numberEnd(b, i)
	if end < 0 {
		return 0, -1
	}
	digits := b[i:end]
	neg := digits[0] == '-'
	if neg {
		digits = digits[1:]
	}
	var n int64
	if len(digits) > 18 { // may overflow int64: let strconv say
		v, err := strconv.ParseInt(string(b[i:end]), 10, 64)
		if err != nil {
			return 0, -1
		}
		n, neg = v, false
	} else {
		for _, c := range digits {
			if c < '0' || c > '9' {
				return 0, -1 // a fraction or an exponent
			}
			n = n*10 + int64(c-'0')
		}
	}
	if neg {
		n = -n
	}
	if bits < 64 {
		if lim := int64(1) << (bits - 1); n < -lim || n >= lim {
			return 0, -1
		}
	}
	return n, end
}

// readFloat reads the number at b[i] as encoding/json decodes it into a
// float64 (out of range is its error: -1).
func readFloat(b []byte, i int) (float64, int) {
	end := numberEnd(b, i)
	if end < 0 {
		return 0, -1
	}
	f, err := strconv.ParseFloat(string(b[i:end]), 64)
	if err != nil {
		return 0, -1
	}
	return f, end
}

// readBool reads true or false at b[i].
func readBool(b []byte, i int) (bool, int) {
	switch {
	case isLiteral(b, i, "true"):
		return true, i + 4
	case isLiteral(b, i, "false"):
		return false, i + 5
	}
	return false, -1
}

// eachElement calls f with the index of each element of the array at b[i]
// (space skipped); f returns the index past the element, or -1 to stop.
// It returns the index past the array, or -1. An empty array calls f
// never.
func eachElement(b []byte, i int, f func(i int) int) int { return eachItem(b, i, '[', ']', f) }

// countElements counts the elements of the array that starts at b[0],
// without checking it: on invalid JSON the count is only a guess, so it
// serves as a capacity, not as a length.
func countElements(b []byte) int {
	n := 0
	for i := skipSpace(b, 1); i < len(b) && b[i] != ']'; n++ {
		j := skipSpace(b, skipValue(b, i))
		if j < len(b) && b[j] == ',' {
			j = skipSpace(b, j+1)
		}
		if j <= i { // not an element: stop guessing
			break
		}
		i = j
	}
	return n
}

// eachField calls f with each member of the object at b[i]: its key, and
// the index of its value (space skipped); f returns the index past the
// value, or -1 to stop. It returns the index past the object, or -1. A key
// with an escape or a byte outside ASCII is -1: encoding/json matches
// field names after unquoting and up to Unicode case folding, and such
// keys are rare enough to leave to it.
func eachField(b []byte, i int, f func(key []byte, i int) int) int {
	return eachItem(b, i, '{', '}', func(i int) int {
		if b[i] != '"' {
			return -1
		}
		j := i + 1
		for j < len(b) && plainASCII[b[j]] {
			j++
		}
		if j >= len(b) || b[j] != '"' {
			return -1
		}
		key := b[i+1 : j]
		if i = skipSpace(b, j+1); i >= len(b) || b[i] != ':' {
			return -1
		}
		return f(key, skipSpace(b, i+1))
	})
}

// eachItem calls f with the index of each item of the container that opens
// at b[i] and closes with close.
func eachItem(b []byte, i int, open, close byte, f func(i int) int) int {
	if i >= len(b) || b[i] != open {
		return -1
	}
	i = skipSpace(b, i+1)
	if i < len(b) && b[i] == close {
		return i + 1
	}
	for {
		if i >= len(b) {
			return -1
		}
		if i = f(i); i < 0 {
			return -1
		}
		if i = skipSpace(b, i); i >= len(b) {
			return -1
		}
		switch b[i] {
		case ',':
			i = skipSpace(b, i+1)
		case close:
			return i + 1
		default:
			return -1
		}
	}
}

// foldsTo reports whether key, ASCII and not one of names, matches one of
// them up to case, as encoding/json would match it to that field.
func foldsTo(key []byte, names []string) bool {
	for _, n := range names {
		if len(n) == len(key) && strings.EqualFold(string(key), n) {
			return true
		}
	}
	return false
}

// readInt32s reads an array of int32s as encoding/json decodes it into a
// nil []int32: null elements are 0, [] is empty and not nil.
func readInt32s(b []byte, i int) ([]int32, int) {
	return readArray(b, i, func(b []byte, i int) (int32, int) {
		n, end := readInt(b, i, 32)
		return int32(n), end
	})
}

// readStrings reads an array of strings as encoding/json decodes it into a
// nil []string: null elements are "", [] is empty and not nil.
func readStrings(b []byte, i int) ([]string, int) { return readArray(b, i, readString) }

// readArray reads an array of T as encoding/json decodes it into a nil
// []T: null elements are T's zero value, [] is empty and not nil.
func readArray[T any](b []byte, i int, read func([]byte, int) (T, int)) ([]T, int) {
	if i >= len(b) || b[i] != '[' {
		return nil, -1
	}
	out := make([]T, 0, countElements(b[i:]))
	end := eachElement(b, i, func(i int) int {
		var v T
		end := setVal(&v, b, i, read)
		out = append(out, v)
		return end
	})
	return out, end
}

// decodeObject reads the object at b[i], depth containers deep, as
// encoding/json decodes it into a struct whose JSON names are names.
// member decodes the member key, its value at index i, and returns the
// field's bit (0 when key is no name) and the index past the value, or -1.
// A field given twice and a key that matches a name only up to case are
// left to encoding/json (-1); any other key is odd: its value is skipped.
func decodeObject(b []byte, i, depth int, names []string, member func(key []byte, i int) (uint64, int)) (end int, odd bool) {
	var seen uint64
	end = eachField(b, i, func(key []byte, i int) int {
		bit, end := member(key, i)
		if bit == 0 {
			if foldsTo(key, names) {
				return -1
			}
			odd = true
			return valueEnd(b, i, depth+1)
		}
		if seen&bit != 0 {
			return -1 // encoding/json's reading of a repeated array or object is its own
		}
		seen |= bit
		return end
	})
	return end, odd
}
