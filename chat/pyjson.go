package chat

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/ardanlabs/jinja"
)

// pyJSON is Hugging Face's tojson filter: Python's json.dumps with
// ensure_ascii=False by default and json.dumps's keyword arguments
// ensure_ascii, indent, separators and sort_keys. Templates print tool
// schemas and call arguments with it, so every byte counts: dict keys in
// insertion order, ", " and ": " between items (",", ": " with an
// indent), floats as Python's repr, non-ASCII text as is.
type pyJSON struct {
	asciiOnly bool
	indent    string // "" with hasIndent: newlines without indentation
	hasIndent bool
	itemSep   string
	keySep    string
	sortKeys  bool
}

func tojsonFilter(args []jinja.Value, kwargs map[string]jinja.Value) (jinja.Value, error) {
	if len(args) == 0 {
		return jinja.Undefined(), fmt.Errorf("tojson: no value")
	}
	p := pyJSON{itemSep: ", ", keySep: ": "}
	pos := args[1:] // json.dumps's keyword arguments may be given by position too
	arg := func(i int, name string) (jinja.Value, bool) {
		if v, ok := kwargs[name]; ok {
			return v, true
		}
		if i < len(pos) {
			return pos[i], true
		}
		return jinja.Undefined(), false
	}
	for name := range kwargs {
		switch name {
		case "ensure_ascii", "indent", "separators", "sort_keys":
		default:
			return jinja.Undefined(), fmt.Errorf("tojson() got an unexpected keyword argument '%s'", name)
		}
	}
	if v, ok := arg(0, "ensure_ascii"); ok {
		p.asciiOnly = v.IsTruthy()
	}
	if v, ok := arg(1, "indent"); ok && !v.IsNone() && !v.IsUndefined() {
		p.hasIndent = true
		p.itemSep = ","
		switch {
		case v.IsInt():
			p.indent = strings.Repeat(" ", max(0, int(v.AsInt())))
		case v.IsString():
			p.indent = v.AsString()
		default:
			return jinja.Undefined(), fmt.Errorf("tojson: indent must be an integer or a string")
		}
	}
	if v, ok := arg(2, "separators"); ok && !v.IsNone() && !v.IsUndefined() {
		if !v.IsList() || v.AsList().Len() != 2 || !v.AsList().Get(0).IsString() || !v.AsList().Get(1).IsString() {
			return jinja.Undefined(), fmt.Errorf("tojson: separators must be two strings")
		}
		p.itemSep, p.keySep = v.AsList().Get(0).AsString(), v.AsList().Get(1).AsString()
	}
	if v, ok := arg(3, "sort_keys"); ok {
		p.sortKeys = v.IsTruthy()
	}
	var b strings.Builder
	if err := p.write(&b, args[0], 0); err != nil {
		return jinja.Undefined(), err
	}
	return jinja.NewString(b.String()), nil
}

func (p *pyJSON) newline(b *strings.Builder, depth int) {
	if !p.hasIndent {
		return
	}
	b.WriteByte('\n')
	for range depth {
		b.WriteString(p.indent)
	}
}

func (p *pyJSON) write(b *strings.Builder, v jinja.Value, depth int) error {
	switch {
	case v.IsNone():
		b.WriteString("null")
	case v.IsBool():
		if v.AsBool() {
			b.WriteString("true")
		} else {
			b.WriteString("false")
		}
	case v.IsInt():
		b.WriteString(strconv.FormatInt(v.AsInt(), 10))
	case v.IsFloat():
		b.WriteString(pyFloat(v.AsFloat(), true))
	case v.IsString():
		p.writeString(b, v.AsString())
	case v.IsList():
		l := v.AsList()
		if l.Len() == 0 {
			b.WriteString("[]")
			return nil
		}
		b.WriteByte('[')
		for i, it := range l.Items {
			if i > 0 {
				b.WriteString(p.itemSep)
			}
			p.newline(b, depth+1)
			if err := p.write(b, it, depth+1); err != nil {
				return err
			}
		}
		p.newline(b, depth)
		b.WriteByte(']')
	case v.IsDict():
		d := v.AsDict()
		if d.Len() == 0 {
			b.WriteString("{}")
			return nil
		}
		keys := d.OrderedKeys()
		if p.sortKeys {
			sort.Strings(keys)
		}
		b.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				b.WriteString(p.itemSep)
			}
			p.newline(b, depth+1)
			p.writeString(b, k)
			b.WriteString(p.keySep)
			val, _ := d.Get(k)
			if err := p.write(b, val, depth+1); err != nil {
				return err
			}
		}
		p.newline(b, depth)
		b.WriteByte('}')
	case v.IsUndefined():
		//lint:ignore ST1005 Python's json.dumps message, word for word (the reference renderer's)
		return fmt.Errorf("Object of type Undefined is not JSON serializable")
	default:
		//lint:ignore ST1005 Python's json.dumps message, word for word (the reference renderer's)
		return fmt.Errorf("Object of type %s is not JSON serializable", kindName(v))
	}
	return nil
}

func kindName(v jinja.Value) string {
	if v.IsCallable() {
		return "function"
	}
	return "object"
}

// writeString writes s as json.dumps does: '"', '\\' and the control
// characters escaped (\n, \r, \t, \b, \f by name, the others as \u00XX),
// and with ensure_ascii everything past ASCII as \uXXXX (surrogate pairs
// beyond the BMP). Invalid UTF-8 cannot reach here from Python; it is
// written as U+FFFD, as Go decoded it.
func (p *pyJSON) writeString(b *strings.Builder, s string) {
	const hex = "0123456789abcdef"
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"':
			b.WriteString(`\"`)
		case r == '\\':
			b.WriteString(`\\`)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r == '\b':
			b.WriteString(`\b`)
		case r == '\f':
			b.WriteString(`\f`)
		case r < 0x20 || (p.asciiOnly && r >= 0x7f):
			if r > 0xffff {
				r -= 0x10000
				for _, u := range [2]rune{0xd800 + r>>10, 0xdc00 + r&0x3ff} {
					b.WriteString(`\u`)
					b.WriteByte(hex[u>>12&15])
					b.WriteByte(hex[u>>8&15])
					b.WriteByte(hex[u>>4&15])
					b.WriteByte(hex[u&15])
				}
				continue
			}
			b.WriteString(`\u`)
			b.WriteByte(hex[r>>12&15])
			b.WriteByte(hex[r>>8&15])
			b.WriteByte(hex[r>>4&15])
			b.WriteByte(hex[r&15])
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
}

// pyFloat is Python's repr of a float (json.dumps writes floats so):
// the shortest digits that read back, in positional notation when the
// decimal exponent is in [-4, 16) (with ".0" for whole numbers), else
// as d.ddde±XX. json selects NaN, Infinity and -Infinity for the
// non-finite values.
func pyFloat(f float64, forJSON bool) string {
	switch {
	case math.IsNaN(f):
		if forJSON {
			return "NaN"
		}
		return "nan"
	case math.IsInf(f, 1):
		if forJSON {
			return "Infinity"
		}
		return "inf"
	case math.IsInf(f, -1):
		if forJSON {
			return "-Infinity"
		}
		return "-inf"
	}
	e := strconv.FormatFloat(f, 'e', -1, 64) // [-]d[.ddd]e±XX
	neg := e[0] == '-'
	if neg {
		e = e[1:]
	}
	mant, expS, _ := strings.Cut(e, "e")
	exp, _ := strconv.Atoi(expS)
	digits := strings.Replace(mant, ".", "", 1)
	var s string
	if exp >= -4 && exp < 16 {
		if exp < 0 {
			s = "0." + strings.Repeat("0", -exp-1) + digits
		} else if len(digits) <= exp+1 {
			s = digits + strings.Repeat("0", exp+1-len(digits)) + ".0"
		} else {
			s = digits[:exp+1] + "." + digits[exp+1:]
		}
	} else {
		s = digits[:1]
		if len(digits) > 1 {
			s += "." + digits[1:]
		}
		sign := "+"
		if exp < 0 {
			sign, exp = "-", -exp
		}
		s += "e" + sign + fmt.Sprintf("%02d", exp)
	}
	if neg {
		s = "-" + s
	}
	return s
}
