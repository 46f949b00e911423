package openai

// EachMember calls f with each member of the JSON object b, in order: its
// key as written (a JSON string, quotes included) and the bounds of its
// value in b (b[start:end], without the space around it). b must be valid
// JSON (json.Valid, or a body encoding/json decoded); EachMember reports
// false, calling f for nothing, when b is not an object. It allocates
// nothing: a caller picks out the members it needs without decoding the
// others.
func EachMember(b []byte, f func(rawKey []byte, start, end int)) bool {
	i := skipSpace(b, 0)
	if i == len(b) || b[i] != '{' {
		return false
	}
	i = skipSpace(b, i+1)
	if i < len(b) && b[i] == '}' {
		return true
	}
	for i < len(b) {
		end := skipString(b, i)
		rawKey := b[i:end]
		i = skipSpace(b, skipSpace(b, end)+1) // past ':'
		vend := skipValue(b, i)
		f(rawKey, i, vend)
		i = skipSpace(b, vend)
		if i >= len(b) || b[i] == '}' {
			break
		}
		i = skipSpace(b, i+1) // past ','
	}
	return true
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// skipString returns the index just past the string starting at b[i].
func skipString(b []byte, i int) int {
	for i++; i < len(b); i++ {
		switch b[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
	return len(b)
}

// skipValue returns the index just past the value starting at b[i].
func skipValue(b []byte, i int) int {
	if i >= len(b) {
		return len(b)
	}
	switch b[i] {
	case '"':
		return skipString(b, i)
	case '{', '[':
		depth := 0
		for ; i < len(b); i++ {
			switch b[i] {
			case '"':
				i = skipString(b, i) - 1
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return i + 1
				}
			}
		}
		return len(b)
	}
	for ; i < len(b); i++ { // number, true, false, null
		switch b[i] {
		case ',', '}', ']', ' ', '\t', '\n', '\r':
			return i
		}
	}
	return i
}
