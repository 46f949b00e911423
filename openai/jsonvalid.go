package openai

import (
	"encoding/binary"
	"math/bits"
)

// maxJSONDepth is the deepest nesting Valid accepts: encoding/json's
// scanner refuses more than 10,000 open arrays and objects.
const maxJSONDepth = 10000

// Valid reports whether b is exactly one JSON value with optional space
// around it, as json.Valid does (strings are not checked for UTF-8,
// nesting deeper than 10,000 is refused), without its per-byte state
// function calls: the proxy checks every client body and prefill answer
// with it, and a scan with EachMember may follow it. FuzzValid checks
// that both agree.
func Valid(b []byte) bool {
	i := valueEnd(b, skipSpace(b, 0), 0)
	return i >= 0 && skipSpace(b, i) == len(b)
}

// valueEnd returns the index just past the JSON value that starts at b[i],
// checked as Valid checks a whole text, or -1 when no valid value starts
// there. depth is the number of arrays and objects open around it, which
// counts towards the nesting limit.
func valueEnd(b []byte, i, depth int) int {
	// open holds one byte per open container: '[' or '{'; the first 64
	// live on the stack.
	var stack [64]byte
	open := stack[:0]
	for {
		// A value starts at b[i].
		if i >= len(b) {
			return -1
		}
		switch c := b[i]; c {
		case '{', '[':
			if depth+len(open) >= maxJSONDepth {
				return -1
			}
			open = append(open, c)
			i = skipSpace(b, i+1)
			if i < len(b) && b[i] == c+2 { // '}' or ']': empty
				open = open[:len(open)-1]
				i++
				break
			}
			if c == '{' {
				if i = objectKey(b, i); i < 0 {
					return -1
				}
			}
			continue
		case '"':
			if i = stringEnd(b, i); i < 0 {
				return -1
			}
		case 't':
			if i = literalEnd(b, i, "true"); i < 0 {
				return -1
			}
		case 'f':
			if i = literalEnd(b, i, "false"); i < 0 {
				return -1
			}
		case 'n':
			if i = literalEnd(b, i, "null"); i < 0 {
				return -1
			}
		default:
			if i = numberEnd(b, i); i < 0 {
				return -1
			}
		}
		// A value ended at b[i]: close containers, or go to the next
		// element.
		for {
			if len(open) == 0 {
				return i
			}
			if i = skipSpace(b, i); i >= len(b) {
				return -1
			}
			top := open[len(open)-1]
			if b[i] == top+2 {
				open = open[:len(open)-1]
				i++
				continue
			}
			if b[i] != ',' {
				return -1
			}
			i = skipSpace(b, i+1)
			if top == '{' {
				if i = objectKey(b, i); i < 0 {
					return -1
				}
			}
			break
		}
	}
}

// objectKey checks a key and its colon at b[i] and returns the index of
// the value after them, or -1.
func objectKey(b []byte, i int) int {
	if i >= len(b) || b[i] != '"' {
		return -1
	}
	if i = stringEnd(b, i); i < 0 {
		return -1
	}
	if i = skipSpace(b, i); i >= len(b) || b[i] != ':' {
		return -1
	}
	return skipSpace(b, i+1)
}

// stringEnd returns the index just past the string starting at b[i], or
// -1 when it is not a valid one.
func stringEnd(b []byte, i int) int {
	for i++; i < len(b); i++ {
		i = plainEnd(b, i, 0)
		if i >= len(b) {
			break
		}
		c := b[i]
		switch {
		case c == '"':
			return i + 1
		case c < 0x20:
			return -1
		case c == '\\':
			if i++; i >= len(b) {
				return -1
			}
			switch b[i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				if i+4 >= len(b) {
					return -1
				}
				for _, h := range b[i+1 : i+5] {
					if !isHex(h) {
						return -1
					}
				}
				i += 4
			default:
				return -1
			}
		}
	}
	return -1
}

// plainStringByte says which bytes a string holds as they are: all but
// the quote, the backslash and control characters.
var plainStringByte = func() (t [256]bool) {
	for c := 0x20; c < 256; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// Masks for plainEnd: every byte's high bit, and bytes repeated.
const (
	highBits = 0x8080808080808080
	ones     = 0x0101010101010101
)

// plainEnd returns the index of the first byte at or after b[i] that a
// string does not hold as it is (a quote, a backslash, a control
// character), or with ascii a byte outside ASCII too, or len(b). It looks
// at eight bytes at a time: prompts are most of a request's bytes.
func plainEnd(b []byte, i int, ascii uint64) int {
	for ; i+8 <= len(b); i += 8 {
		x := binary.LittleEndian.Uint64(b[i:])
		q, bs := x^('"'*ones), x^('\\'*ones)
		// A byte is flagged when it is below 0x20, zero after the xor
		// with '"' or '\\', or (ascii) has its high bit set. A borrow
		// can flag a byte wrongly only above one flagged rightly, so the
		// lowest flag is right.
		m := (x-0x20*ones)&^x | (q-ones)&^q | (bs-ones)&^bs
		if m = m&highBits | x&ascii; m != 0 {
			return i + bits.TrailingZeros64(m)/8
		}
	}
	for i < len(b) && plainStringByte[b[i]] && (ascii == 0 || b[i] < 0x80) {
		i++
	}
	return i
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

// literalEnd returns the index just past lit at b[i], or -1.
func literalEnd(b []byte, i int, lit string) int {
	if len(b)-i < len(lit) || string(b[i:i+len(lit)]) != lit {
		return -1
	}
	return i + len(lit)
}

// numberEnd returns the index just past the number starting at b[i], or
// -1 when none starts there.
func numberEnd(b []byte, i int) int {
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i >= len(b):
		return -1
	case b[i] == '0':
		i++
	case '1' <= b[i] && b[i] <= '9':
		i = digitsEnd(b, i)
	default:
		return -1
	}
	if i < len(b) && b[i] == '.' {
		j := digitsEnd(b, i+1)
		if j == i+1 {
			return -1
		}
		i = j
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		j := digitsEnd(b, i)
		if j == i {
			return -1
		}
		i = j
	}
	return i
}

func digitsEnd(b []byte, i int) int {
	for i < len(b) && '0' <= b[i] && b[i] <= '9' {
		i++
	}
	return i
}
