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
// string: escapes resolved, invalid UTF-8 and lone surrogates replaced by
// U+FFFD.
func readString(b []byte, i int) (string, int) {
	if i >= len(b) || b[i] != '"' {
		return "", -1
	}
	j := i + 1
	for j < len(b) && plainASCII[b[j]] {
		j++
	}
	if j < len(b) && b[j] == '"' {
		return string(b[i+1 : j]), j + 1
	}
	end := stringEnd(b, i)
	if end < 0 {
		return "", -1
	}
	s := b[i+1 : end-1]
	if !hasByte(s[j-i-1:], '\\') && utf8.Valid(s) {
		return string(s), end
	}
	return unquote(s), end
}

// plainASCII says which bytes a string holds as they are and that need no
// UTF-8 check: printable ASCII but the quote and the backslash.
var plainASCII = func() (t [256]bool) {
	for c := 0x20; c < 0x80; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

func hasByte(s []byte, c byte) bool {
	for _, x := range s {
		if x == c {
			return true
		}
	}
	return false
}

// unquote decodes s, the inside of a valid JSON string, as encoding/json
// does: escapes resolved, a \u escape pair that is a valid surrogate pair
// joined, any other surrogate escape and each byte of invalid UTF-8
// replaced by U+FFFD.
func unquote(s []byte) string {
	var buf [64]byte // most strings with escapes are short: no second copy
	out := buf[:0]
	for r := 0; r < len(s); {
		c := s[r]
		switch {
		case c == '\\':
			e := s[r+1]
			r += 2
			switch e {
			case 'b':
				out = append(out, '\b')
			case 'f':
				out = append(out, '\f')
			case 'n':
				out = append(out, '\n')
			case 'r':
				out = append(out, '\r')
			case 't':
				out = append(out, '\t')
			case 'u':
				rr := hex4(s[r:])
				r += 4
				if utf16.IsSurrogate(rr) {
					if r+6 <= len(s) && s[r] == '\\' && s[r+1] == 'u' {
						if d := utf16.DecodeRune(rr, hex4(s[r+2:])); d != utf8.RuneError {
							out = utf8.AppendRune(out, d)
							r += 6
							break
						}
					}
					rr = utf8.RuneError
				}
				out = utf8.AppendRune(out, rr)
			default: // '"', '\\', '/'
				out = append(out, e)
			}
		case c < utf8.RuneSelf:
			out = append(out, c)
			r++
		default:
			rr, size := utf8.DecodeRune(s[r:])
			out = utf8.AppendRune(out, rr)
			r += size
		}
	}
	return string(out)
}

// hex4 is the value of the four hex digits at the start of s (valid JSON
// guarantees them).
func hex4(s []byte) rune {
	var r rune
	for _, c := range s[:4] {
		r = r<<4 | rune(unhex(c))
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
