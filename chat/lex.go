package chat

import (
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Whitespace control, done here rather than by the library.
//
// Hugging Face renders with trim_blocks and lstrip_blocks: a block or
// comment tag drops the newline right after it, and the spaces before it
// when it starts its line; "-" inside a tag's delimiter strips all the
// whitespace on that side, "+" keeps it. github.com/ardanlabs/jinja
// v1.8.0 applies these to the nearest text on either side even when an
// expression stands between ("{% if x %}{{ x }}\n" loses its newline), so
// lex applies Jinja2's lexer rules itself and hands the library a template
// with no text left: each run of text becomes {{ <textVar>[i] }}, a
// string the render supplies, and the tags lose their "-" and "+". The
// library's own trimming then has nothing to act on.
//
// The rules, as Jinja2's lexer has them: the source's newlines (\r\n, \r,
// \n) become \n and one trailing newline is dropped (keep_trailing_newline
// is off); text before a tag opened with "-" loses its trailing whitespace;
// before a block or comment tag opened without "+", the spaces of the
// tag's line are dropped when nothing else precedes it on the line (the
// text's last line, or all of it when the previous tag ended a line); after
// a tag closed with "-" the following whitespace goes; after a block or
// comment tag closed without "+" (and not {% raw %}) one newline goes.
// Comments vanish; a raw block's content is text. Inside tags, string
// literals and brackets are skipped over, as the lexer does, and the
// filter tojson is renamed to tojsonName.

// textVar holds the texts lex takes out of a template.
const textVar = "__kvlease_text"

// lex returns src rewritten for the library and its texts.
func lex(src string) (string, []string) {
	src = strings.ReplaceAll(src, "\r\n", "\n")
	src = strings.ReplaceAll(src, "\r", "\n")
	src = strings.TrimSuffix(src, "\n")
	var out strings.Builder
	var texts []string
	emit := func(text string) {
		if text == "" {
			return
		}
		out.WriteString("{{ " + textVar + "[" + strconv.Itoa(len(texts)) + "] }}")
		texts = append(texts, text)
	}
	pos, lineStarting := 0, true
	for pos < len(src) {
		j := nextTag(src, pos)
		if j < 0 {
			emit(src[pos:])
			break
		}
		kind := src[j+1]
		k := j + 2
		var sign byte
		if k < len(src) && (src[k] == '-' || src[k] == '+') {
			sign = src[k]
			k++
		}
		emit(stripBefore(src[pos:j], sign, kind != '{', lineStarting))
		switch {
		case kind == '#':
			end := strings.Index(src[k:], "#}")
			if end < 0 { // unterminated: leave it to the library to refuse
				out.WriteString(src[j:])
				return out.String(), texts
			}
			end += k
			var close byte
			if end > k && (src[end-1] == '-' || src[end-1] == '+') {
				close = src[end-1]
			}
			pos = stripAfter(src, end+2, close, true)
		case kind == '%' && isRaw(src, k):
			body, after := rawBlock(src, k)
			if after < 0 {
				out.WriteString(src[j:])
				return out.String(), texts
			}
			rawLineStarting := src[body.start-1] == '\n'
			content := src[body.start:body.end]
			emit(stripBefore(content, body.endSign, true, rawLineStarting))
			pos = stripAfter(src, after, body.closeSign, true)
		default:
			closer := "}}"
			if kind == '%' {
				closer = "%}"
			}
			inner, end, close := tagBody(src, k, closer)
			if end < 0 {
				out.WriteString(src[j:])
				return out.String(), texts
			}
			out.WriteString(src[j:j+2] + " " + inner + " " + closer)
			pos = stripAfter(src, end, close, kind == '%')
		}
		lineStarting = pos > 0 && src[pos-1] == '\n'
	}
	return out.String(), texts
}

// nextTag is the index of the next "{{", "{%" or "{#" at or after pos,
// or -1.
func nextTag(src string, pos int) int {
	for {
		i := strings.IndexByte(src[pos:], '{')
		if i < 0 || pos+i+1 >= len(src) {
			return -1
		}
		pos += i
		if c := src[pos+1]; c == '{' || c == '%' || c == '#' {
			return pos
		}
		pos++
	}
}

// stripBefore is the text before a tag opened with sign: all trailing
// whitespace gone for "-"; for a block or comment tag not opened with
// "+", the spaces of its line gone when they are all the line has
// (lstrip_blocks).
func stripBefore(text string, sign byte, block, lineStarting bool) string {
	if sign == '-' {
		return strings.TrimRightFunc(text, pySpace)
	}
	if sign == '+' || !block {
		return text
	}
	l := strings.LastIndexByte(text, '\n') + 1
	if (l > 0 || lineStarting) && l < len(text) && strings.TrimLeftFunc(text[l:], pySpace) == "" {
		return text[:l]
	}
	return text
}

// stripAfter is the position past a tag's closer at end: past the
// following whitespace for "-", past one newline for a block or comment
// tag (trim_blocks) unless "+".
func stripAfter(src string, end int, close byte, block bool) int {
	switch {
	case close == '-':
		for end < len(src) {
			r, n := utf8.DecodeRuneInString(src[end:])
			if !pySpace(r) {
				break
			}
			end += n
		}
	case close != '+' && block && end < len(src) && src[end] == '\n':
		end++
	}
	return end
}

// pySpace is Python's str.isspace for one character.
func pySpace(r rune) bool {
	return unicode.IsSpace(r) || r >= 0x1c && r <= 0x1f
}

// tagBody reads a {{ }} or {% %} tag's inside from k: it returns the
// inside without its closing "-" or "+" (and with tojson renamed), the
// position past the closer, and the closing sign. end is -1 when the tag
// does not close.
func tagBody(src string, k int, closer string) (inner string, end int, close byte) {
	var b strings.Builder
	depth := 0
	for p := k; p < len(src); {
		c := src[p]
		switch {
		case c == '\'' || c == '"':
			q := p + 1
			for q < len(src) && src[q] != c {
				if src[q] == '\\' {
					q++
				}
				q++
			}
			q = min(q+1, len(src))
			b.WriteString(src[p:q])
			p = q
			continue
		case depth == 0 && (c == '-' || (c == '+' && closer == "%}")) && strings.HasPrefix(src[p+1:], closer):
			return strings.TrimSpace(b.String()), p + 1 + len(closer), c
		case depth == 0 && strings.HasPrefix(src[p:], closer):
			return strings.TrimSpace(b.String()), p + len(closer), 0
		case c == '(' || c == '[' || c == '{':
			depth++
		case (c == ')' || c == ']' || c == '}') && depth > 0:
			depth--
		case c == '|':
			n := p + 1
			for n < len(src) && (src[n] == ' ' || src[n] == '\t' || src[n] == '\n') {
				n++
			}
			if strings.HasPrefix(src[n:], "tojson") && (n+6 == len(src) || !isIdent(src[n+6])) {
				b.WriteString(src[p:n] + tojsonName)
				p = n + 6
				continue
			}
		}
		b.WriteByte(c)
		p++
	}
	return "", -1, 0
}

func isIdent(c byte) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// isRaw reports whether the block tag whose inside starts at k (after
// its sign) is {% raw %}.
func isRaw(src string, k int) bool {
	p := skipSpaces(src, k)
	if !strings.HasPrefix(src[p:], "raw") {
		return false
	}
	p = skipSpaces(src, p+3)
	return strings.HasPrefix(src[p:], "%}") || strings.HasPrefix(src[p:], "-%}")
}

func skipSpaces(src string, p int) int {
	for p < len(src) && (src[p] == ' ' || src[p] == '\t' || src[p] == '\n') {
		p++
	}
	return p
}

// rawSpan is a raw block's content and its {% endraw %}'s signs.
type rawSpan struct {
	start, end         int
	endSign, closeSign byte
}

// rawBlock reads a raw block whose {% raw %} inside starts at k: its
// content and the position past {% endraw %} (-1 when there is none). A
// {% raw -%} strips the whitespace after it; {% raw %} does not drop a
// newline (Jinja2's raw_begin has no trim_blocks).
func rawBlock(src string, k int) (rawSpan, int) {
	p := skipSpaces(src, skipSpaces(src, k)+3)
	start := p + 2
	if src[p] == '-' {
		start = stripAfter(src, p+3, '-', true)
	}
	for q := start; q < len(src); {
		i := strings.Index(src[q:], "{%")
		if i < 0 {
			break
		}
		i += q
		e := i + 2
		var sign byte
		if e < len(src) && (src[e] == '-' || src[e] == '+') {
			sign = src[e]
			e++
		}
		e = skipSpaces(src, e)
		if strings.HasPrefix(src[e:], "endraw") {
			e = skipSpaces(src, e+6)
			var close byte
			if e < len(src) && (src[e] == '-' || src[e] == '+') {
				close = src[e]
				e++
			}
			if strings.HasPrefix(src[e:], "%}") {
				return rawSpan{start, i, sign, close}, e + 2
			}
		}
		q = i + 2
	}
	return rawSpan{}, -1
}
