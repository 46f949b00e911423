package openai

// EachMember calls f with each member of the JSON object b, in order: its
// key as written (a JSON string, quotes included) and the bounds of its
// value in b (b[start:end], without the space around it). It reports false
// when b is not an object. It allocates nothing: a caller picks out the
// members it needs without decoding the others.
//
// b should be valid JSON (json.Valid, or a body encoding/json decoded):
// the scan relies on it to split members, not to check them. On invalid
// JSON it does not fail but may split wrongly, and reports false if it
// meets a member it cannot split at all (after calling f for the members
// before it).
func EachMember(b []byte, f func(rawKey []byte, start, end int)) bool {
	i := skipSpace(b, 0)
	if i == len(b) || b[i] != '{' {
		return false
	}
	i = skipSpace(b, i+1)
	if i < len(b) && b[i] == '}' {
		return true
	}
	for i < len(b) && b[i] == '"' {
		end := skipString(b, i)
		rawKey := b[i:end]
		if len(rawKey) < 2 || rawKey[len(rawKey)-1] != '"' {
			return false // unterminated
		}
		if i = skipSpace(b, end); i == len(b) || b[i] != ':' {
			return false
		}
		if i = skipSpace(b, i+1); i == len(b) {
			return false
		}
		vend := skipValue(b, i)
		f(rawKey, i, vend)
		i = skipSpace(b, vend)
		if i == len(b) || b[i] != ',' {
			return true // '}', or the end of a truncated object
		}
		i = skipSpace(b, i+1) // past ','
	}
	return false // a member that does not start with a key
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
		if i = plainEnd(b, i, 0); i >= len(b) {
			break
		}
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
