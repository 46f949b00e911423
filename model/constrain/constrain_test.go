package constrain

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

func mustCompile(t testing.TB, schema string) *Grammar {
	t.Helper()
	g, err := Compile(json.RawMessage(schema), false)
	if err != nil {
		t.Fatalf("Compile(%s): %v", schema, err)
	}
	return g
}

// accepts reports whether text is a complete text of g.
func accepts(g *Grammar, text string) bool {
	s := g.Start()
	return s.FeedBytes([]byte(text)) && s.CanEnd()
}

// prefixOK reports whether text is a prefix of some text of g.
func prefixOK(g *Grammar, text string) bool {
	s := g.Start()
	return s.FeedBytes([]byte(text))
}

const nested = `{
  "type": "object",
  "properties": {
    "name": {"type": "string", "description": "who"},
    "age": {"type": "integer"},
    "score": {"type": ["number", "null"]},
    "ok": {"type": "boolean"},
    "tags": {"type": "array", "items": {"type": "string", "enum": ["a", "b\"c", "ü<>"]}, "minItems": 1, "maxItems": 3},
    "kind": {"enum": ["x", 1, 12, null, {"b": 1, "a": [true]}]},
    "addr": {"type": "object", "properties": {"city": {"type": "string"}, "zip": {"const": "0042"}},
             "required": ["zip"], "additionalProperties": false},
    "meta": {"type": "object"},
    "any": {},
    "pair": {"anyOf": [{"type": "string"}, {"type": "array", "items": {"type": "integer"}, "maxItems": 2}, {"type": "null"}]}
  },
  "required": ["name", "age", "tags", "addr"],
  "additionalProperties": false
}`

func TestAcceptsAndRefuses(t *testing.T) {
	g := mustCompile(t, nested)
	good := []string{
		`{"name":"Al","age":3,"tags":["a"],"addr":{"zip":"0042"}}`,
		` {"age": -0, "name": "\"\\\/\b\f\n\r\t\u00e9x", "tags":["b\"c", "ü<>"], "addr":{"city":"","zip":"0042"}}`,
		`{"addr":{"zip":"0042","city":"Zürich 日本 🎉"},"tags":["a","a","a"],"age":120,"name":"","score":null}`,
		`{"name":"x","age":1,"tags":["a"],"addr":{"zip":"0042"},"score":-1.5e+10,"ok":false,"kind":12}`,
		`{"name":"x","age":1,"tags":["a"],"addr":{"zip":"0042"},"kind":{"a":[true],"b":1}}`,
		`{"name":"x","age":1,"tags":["a"],"addr":{"zip":"0042"},"kind":1,"meta":{"k":[1,{"z":null}],"":"v"}}`,
		`{"name":"x","age":1,"tags":["a"],"addr":{"zip":"0042"},"any":[[],{},"s",0.5,true],"pair":[1,2]}`,
		`{"name":"x","age":1,"tags":["a"],"addr":{"zip":"0042"},"pair":"s","ok":true,"score":0}`,
	}
	for _, s := range good {
		if !accepts(g, s) {
			t.Errorf("refused valid %s", s)
		}
		var v any
		if err := json.Unmarshal([]byte(s), &v); err != nil {
			t.Fatalf("test case %s is not JSON: %v", s, err)
		}
	}
	bad := []string{
		`{"name":"Al","age":3,"tags":["a"]}`,                                            // addr required
		`{"name":"Al","age":3.5,"tags":["a"],"addr":{"zip":"0042"}}`,                    // integer
		`{"name":"Al","age":3,"tags":[],"addr":{"zip":"0042"}}`,                         // minItems
		`{"name":"Al","age":3,"tags":["a","a","a","a"],"addr":{"zip":"0042"}}`,          // maxItems
		`{"name":"Al","age":3,"tags":["c"],"addr":{"zip":"0042"}}`,                      // enum
		`{"name":"Al","name":"B","age":3,"tags":["a"],"addr":{"zip":"0042"}}`,           // duplicate
		`{"name":"Al","age":3,"tags":["a"],"addr":{"zip":"0042"},"x":1}`,                // undeclared
		`{"name":"Al","age":03,"tags":["a"],"addr":{"zip":"0042"}}`,                     // leading zero
		`{"name":"A` + "\x01" + `","age":3,"tags":["a"],"addr":{"zip":"0042"}}`,         // control char
		`{"name":"A` + "\xc0\xaf" + `","age":3,"tags":["a"],"addr":{"zip":"0042"}}`,     // overlong
		`{"name":"A` + "\xed\xa0\x80" + `","age":3,"tags":["a"],"addr":{"zip":"0042"}}`, // surrogate
		`{"name":"A\x","age":3,"tags":["a"],"addr":{"zip":"0042"}}`,                     // bad escape
		`{"name":"A\u12g4","age":3,"tags":["a"],"addr":{"zip":"0042"}}`,                 // bad hex
		`{"name":"Al","age":3,"tags":["a"],"addr":{"zip":"0042"},"kind":2}`,             // enum number
		`{"name":"Al","age":3,"tags":["a"],"addr":{"zip":"0042"},"kind":{"a":[true],"b":2}}`,
		`{"name":"Al","age":3,"tags":["a"],"addr":{"zip":"0042"},"pair":{}}`, // anyOf
		`{"name":"Al","age":3,"tags":["a"],"addr":{"zip":"0042"},"pair":[1,2,3]}`,
		`{"name":"Al",  "age":3,"tags":["a"],"addr":{"zip":"0042"}}`, // two spaces
		`{ "name":"Al","age":3,"tags":["a"],"addr":{"zip":"0042"}}`,  // space after {
		`{"name":"Al","age":3,"tags":["a"],"addr":{"zip":"0042"}} `,  // trailing
		`{"name":"Al","age":3,"tags":["a"],"addr":{"zip":"0042"}}{`,
		`{"name":"Al","age":1234567890123456,"tags":["a"],"addr":{"zip":"0042"}}`, // 16 digits
		`{"name":"Al","age":3,"tags":["a"],"addr":{"zip":"0042"},"score":1e100}`,  // 3 exponent digits
	}
	for _, s := range bad {
		if accepts(g, s) {
			t.Errorf("accepted invalid %q", s)
		}
	}
	// Incomplete texts are prefixes, not texts.
	for _, s := range []string{`{"name":"Al`, `{"age":1`, `{"kind":1`, ``, ` `} {
		if !prefixOK(g, s) || accepts(g, s) {
			t.Errorf("%q: want a prefix but not a text", s)
		}
	}
}

// $ref to the root's $defs (and definitions) compiles the definition in
// place, as schema generators write nested types.
func TestRefs(t *testing.T) {
	g := mustCompile(t, `{"$defs":{"Addr":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"],"additionalProperties":false},
		"a~1b":{"enum":["x","y"]}},
		"definitions":{"N":{"type":"integer"}},
		"type":"object","properties":{"home":{"$ref":"#/$defs/Addr","description":"where"},"work":{"$ref":"#/$defs/Addr"},
		"k":{"$ref":"#/$defs/a~01b"},"n":{"$ref":"#/definitions/N"}},"required":["home"],"additionalProperties":false}`)
	for _, good := range []string{`{"home":{"city":"A"}}`, `{"home":{"city":"A"},"work":{"city":"B"},"k":"y","n":3}`} {
		if !accepts(g, good) {
			t.Errorf("refused %s", good)
		}
	}
	for _, bad := range []string{`{"home":{}}`, `{"home":{"city":"A"},"k":"z"}`, `{"home":{"city":"A"},"n":1.5}`} {
		if accepts(g, bad) {
			t.Errorf("accepted %s", bad)
		}
	}
}

func TestTopLevelValues(t *testing.T) {
	cases := []struct {
		schema string
		good   []string
		bad    []string
	}{
		{`{"type":"string"}`, []string{`""`, `"a b"`, ` "x"`}, []string{`"`, `"a""`, `1`}},
		{`{"type":"number"}`, []string{`0`, `-0.5`, `12e3`, `1E-02`, `3.25`}, []string{`-`, `1.`, `.5`, `01`, `1e`, `+1`, `0x1`}},
		{`{"type":"integer"}`, []string{`0`, `-7`, `123456789012345`}, []string{`1.0`, `1e3`, `-`}},
		{`{"type":"boolean"}`, []string{`true`, `false`}, []string{`tru`, `null`, `True`}},
		{`{"type":"null"}`, []string{`null`}, []string{`nul`, `0`}},
		{`{"type":"array","items":{"type":"integer"},"maxItems":0}`, []string{`[]`}, []string{`[1]`}},
		{`{"enum":[1,12,123]}`, []string{`1`, `12`, `123`}, []string{`2`, `1234`, `13`}},
		{`{"type":"object","properties":{},"additionalProperties":false}`, []string{`{}`}, []string{`{"a":1}`}},
		{`{"type":"object","additionalProperties":{"type":"integer"}}`, []string{`{}`, `{"a":1,"a":2}`}, []string{`{"a":"x"}`}},
		{`true`, []string{`{"a":[null]}`, `"s"`, `-1`}, []string{`{a:1}`}},
		{`{"type":"string","minLength":2,"maxLength":3}`, []string{`"ab"`, `"日本語"`, `"a\n"`, `"🎉x"`}, []string{`"a"`, `"abcd"`, `"\u0041b"`, `""`}},
		{`{"type":["string","null"],"maxLength":0}`, []string{`""`, `null`}, []string{`"a"`}},
		{`{"oneOf":[{"type":"integer","minimum":1},{"type":"string","maxLength":1}],"description":"d"}`, []string{`1`, `"a"`}, []string{`0`, `"ab"`, `null`}},
		{`{"$defs":{"A":{"type":"boolean"}},"allOf":[{"$ref":"#/$defs/A"}],"title":"t"}`, []string{`true`}, []string{`1`}},
		{`{"type":"integer","minimum":-5,"maximum":120}`, []string{`0`, `-0`, `-5`, `7`, `120`, `99`}, []string{`-6`, `121`, `1000`, `-10`, `0.5`}},
		{`{"type":"number","exclusiveMinimum":0.5,"exclusiveMaximum":3}`, []string{`1`, `2`}, []string{`0`, `3`, `1.5`, `-1`}},
		{`{"type":"integer","minimum":10}`, []string{`10`, `123456789012345`}, []string{`9`, `0`, `-11`}},
		{`{"type":"integer","maximum":-10}`, []string{`-10`, `-999`}, []string{`-9`, `-0`, `0`, `5`}},
	}
	for _, c := range cases {
		g := mustCompile(t, c.schema)
		for _, s := range c.good {
			if !accepts(g, s) {
				t.Errorf("%s: refused %q", c.schema, s)
			}
		}
		for _, s := range c.bad {
			if accepts(g, s) {
				t.Errorf("%s: accepted %q", c.schema, s)
			}
		}
	}
	// A number at the top level may end or go on: EOS and digits are both
	// allowed; after a closed value only the end is.
	g := mustCompile(t, `{"type":"integer"}`)
	s := g.Start()
	s.FeedBytes([]byte("12"))
	if !s.CanEnd() || s.Done() {
		t.Errorf("after 12: CanEnd %v Done %v, want true false", s.CanEnd(), s.Done())
	}
	g = mustCompile(t, `{"type":"string"}`)
	s = g.Start()
	s.FeedBytes([]byte(`"x"`))
	if !s.Done() {
		t.Error("a closed string is not Done")
	}
}

func TestCompileErrors(t *testing.T) {
	cases := []struct {
		schema, keyword string
	}{
		{`{"type":"string","pattern":"^a"}`, "pattern"},
		{`{"type":"object","properties":{"a":{"type":"string","format":"date","maxLength":3}}}`, "format"},
		{`{"$ref":"#/$defs/x"}`, "$ref"},
		{`{"type":"number","multipleOf":2}`, "multipleOf"},
		{`{"type":"string","minimum":1}`, "minimum"},
		{`{"type":"integer","minimum":3,"maximum":2}`, "minimum"},
		{`{"type":"integer","exclusiveMinimum":true}`, "exclusiveMinimum"},
		{`{"oneOf":[{"type":"string"},{"type":"string","minLength":2}]}`, "oneOf"},
		{`{"allOf":[{"type":"string"},{"minLength":2}]}`, "allOf"},
		{`{"anyOf":[{"type":"string"},{"type":"null"}],"minLength":2}`, "minLength"},
		{`{"type":"strange"}`, "type"},
		{`{"enum":[]}`, "enum"},
		{`{"type":"array","minItems":3,"maxItems":2}`, "minItems"},
		{`{"anyOf":[{"type":"object"},{"type":"object"}]}`, "anyOf"},
		{`{"anyOf":[{"type":"integer"},{"type":"number"}]}`, "anyOf"},
		{`{"type":"string","properties":{}}`, "properties"},
		{`{"type":"object","required":["z"],"additionalProperties":false}`, "required"},
		{`{"type":"string","enum":[1,2]}`, "enum"},
		{`{"type":"integer","maxLength":3}`, "maxLength"},
		{`{"anyOf":[{"type":"string"}],"type":"string"}`, "type"},
		{`{"type":"string","minLength":3,"maxLength":2}`, "minLength"},
		{`{"type":"string","minLength":-1}`, "minLength"},
	}
	for _, c := range cases {
		_, err := Compile(json.RawMessage(c.schema), false)
		var e *Error
		if !errors.As(err, &e) || e.Keyword != c.keyword {
			t.Errorf("%s: got %v, want an error naming %q", c.schema, err, c.keyword)
		}
	}
	for _, c := range []struct{ schema, keyword string }{
		{`{"$ref":"#/$defs/x"}`, "$ref"},
		{`{"$defs":{"n":{"type":"object","properties":{"c":{"$ref":"#/$defs/n"}}}},"$ref":"#/$defs/n"}`, "$ref"},
		{`{"$defs":{"a":{"type":"string"}},"type":"object","properties":{"x":{"$ref":"#/$defs/a","type":"string"}}}`, "type"},
		{`{"$ref":"http://example.com/s.json"}`, "$ref"},
	} {
		_, err := Compile(json.RawMessage(c.schema), false)
		var e *Error
		if !errors.As(err, &e) || e.Keyword != c.keyword {
			t.Errorf("%s: got %v, want an error naming %q", c.schema, err, c.keyword)
		}
	}
	if _, err := Compile(json.RawMessage(`[1]`), false); err == nil {
		t.Error("a non-object schema compiled")
	}
	deep := strings.Repeat(`{"type":"array","items":`, MaxDepth+2) + `{}` + strings.Repeat(`}`, MaxDepth+2)
	if _, err := Compile(json.RawMessage(deep), false); err == nil {
		t.Error("a schema deeper than MaxDepth compiled")
	}
	// strict: OpenAI's rules.
	if _, err := Compile(json.RawMessage(`{"type":"object","properties":{"a":{"type":"string"}},"required":["a"]}`), true); err == nil {
		t.Error("strict accepted an object without additionalProperties false")
	}
	if _, err := Compile(json.RawMessage(`{"type":"object","properties":{"a":{"type":"string"}},"additionalProperties":false}`), true); err == nil {
		t.Error("strict accepted an optional property")
	}
	if _, err := Compile(json.RawMessage(`{"type":"object","properties":{"a":{"type":["string","null"]}},"required":["a"],"additionalProperties":false}`), true); err != nil {
		t.Errorf("strict refused a strict schema: %v", err)
	}
}

// allowedBytes probes every byte from s.
func allowedBytes(s *State) []byte {
	var out []byte
	for b := 0; b < 256; b++ {
		st := *s
		if st.Feed(byte(b)) {
			out = append(out, byte(b))
		}
	}
	return out
}

// generate walks g at random: each step picks an allowed byte, with
// weights that favour closing once the text is long, until the text is
// complete or it ends at random where it may. It fails the test if a
// position allows nothing.
func generate(t testing.TB, g *Grammar, rng *rand.Rand) []byte {
	s := g.Start()
	var out []byte
	for steps := 0; ; steps++ {
		if s.Done() || (s.CanEnd() && rng.IntN(8) == 0) {
			return out
		}
		if steps > 100000 {
			t.Fatalf("no end after %d bytes: %q", steps, out)
		}
		al := allowedBytes(&s)
		if len(al) == 0 {
			t.Fatalf("a dead position after %q", out)
		}
		long := len(out) > 60
		weights := make([]float64, len(al))
		total := 0.0
		for i, b := range al {
			w := 1.0
			switch b {
			case '"', '}', ']':
				w = 6
				if long {
					w = 500
				}
			case '{', '[':
				w = 0.6
				if long {
					w = 0.001
				}
			case ',':
				w = 2
				if long {
					w = 0.3
				}
			case '\\':
				w = 0.5
			case ' ':
				w = 0.5
			}
			if b >= 0x80 {
				w = 0.05
				if s.need > 0 {
					w = 1
				}
			}
			weights[i] = w
			total += w
		}
		x := rng.Float64() * total
		pick := al[len(al)-1]
		for i, w := range weights {
			if x < w {
				pick = al[i]
				break
			}
			x -= w
		}
		if !s.Feed(pick) {
			t.Fatalf("Feed refused an allowed byte %q after %q", pick, out)
		}
		out = append(out, pick)
	}
}

// validate checks v against the schema subset, the test's reference.
func validate(v any, schema any) error {
	sc, ok := schema.(map[string]any)
	if !ok {
		return nil // true: anything
	}
	if e, ok := sc["enum"]; ok {
		for _, x := range e.([]any) {
			if jsonEqual(x, v) {
				return nil
			}
		}
		return fmt.Errorf("%v is not in the enum", v)
	}
	if c, ok := sc["const"]; ok {
		if !jsonEqual(c, v) {
			return fmt.Errorf("%v is not the const", v)
		}
		return nil
	}
	if br, ok := sc["anyOf"]; ok {
		for _, b := range br.([]any) {
			if validate(v, b) == nil {
				return nil
			}
		}
		return fmt.Errorf("%v matches no anyOf branch", v)
	}
	if ty, ok := sc["type"]; ok {
		var names []string
		switch x := ty.(type) {
		case string:
			names = []string{x}
		case []any:
			for _, n := range x {
				names = append(names, n.(string))
			}
		}
		match := false
		for _, n := range names {
			if typeOf(v, n) {
				match = true
			}
		}
		if !match {
			return fmt.Errorf("%v is not of type %v", v, ty)
		}
	}
	switch x := v.(type) {
	case float64:
		if m, ok := sc["minimum"].(float64); ok && x < m {
			return fmt.Errorf("%v < minimum %v", x, m)
		}
		if m, ok := sc["maximum"].(float64); ok && x > m {
			return fmt.Errorf("%v > maximum %v", x, m)
		}
		if m, ok := sc["exclusiveMinimum"].(float64); ok && x <= m {
			return fmt.Errorf("%v <= exclusiveMinimum %v", x, m)
		}
		if m, ok := sc["exclusiveMaximum"].(float64); ok && x >= m {
			return fmt.Errorf("%v >= exclusiveMaximum %v", x, m)
		}
	case string:
		n := float64(len([]rune(x)))
		if m, ok := sc["minLength"].(float64); ok && n < m {
			return fmt.Errorf("%q is shorter than minLength %v", x, m)
		}
		if m, ok := sc["maxLength"].(float64); ok && n > m {
			return fmt.Errorf("%q is longer than maxLength %v", x, m)
		}
	case map[string]any:
		props, _ := sc["properties"].(map[string]any)
		for _, r := range asList(sc["required"]) {
			if _, ok := x[r.(string)]; !ok {
				return fmt.Errorf("missing required %q", r)
			}
		}
		for k, val := range x {
			if p, ok := props[k]; ok {
				if err := validate(val, p); err != nil {
					return fmt.Errorf("%s: %w", k, err)
				}
				continue
			}
			ap, has := sc["additionalProperties"]
			if has && ap == false {
				return fmt.Errorf("undeclared property %q", k)
			}
			if has {
				if err := validate(val, ap); err != nil {
					return fmt.Errorf("%s: %w", k, err)
				}
			}
		}
	case []any:
		if m, ok := sc["minItems"].(float64); ok && float64(len(x)) < m {
			return fmt.Errorf("%d items < minItems %v", len(x), m)
		}
		if m, ok := sc["maxItems"].(float64); ok && float64(len(x)) > m {
			return fmt.Errorf("%d items > maxItems %v", len(x), m)
		}
		for i, e := range x {
			if err := validate(e, sc["items"]); err != nil {
				return fmt.Errorf("[%d]: %w", i, err)
			}
		}
	}
	return nil
}

func asList(v any) []any { l, _ := v.([]any); return l }

func typeOf(v any, name string) bool {
	switch name {
	case "object":
		_, ok := v.(map[string]any)
		return ok
	case "array":
		_, ok := v.([]any)
		return ok
	case "string":
		_, ok := v.(string)
		return ok
	case "number":
		_, ok := v.(float64)
		return ok
	case "integer":
		f, ok := v.(float64)
		return ok && f == math.Trunc(f)
	case "boolean":
		_, ok := v.(bool)
		return ok
	case "null":
		return v == nil
	}
	return false
}

func jsonEqual(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return bytes.Equal(x, y)
}

var fuzzSchemas = []string{
	nested,
	`{"type":"object"}`,
	`{}`,
	`{"type":"array","items":{"type":"object","properties":{"id":{"type":"integer"},"v":{"type":["string","number","boolean","null"]}},"required":["id","v"]}}`,
	`{"type":"object","properties":{"e":{"enum":["a","ab","abc",0,-1.5,[1,2],{"k":"v"}]}},"required":["e"]}`,
	`{"type":"object","additionalProperties":{"type":"array","items":{"type":"number"},"maxItems":4}}`,
	`{"type":"object","properties":{"code":{"type":"string","minLength":3,"maxLength":5},"note":{"type":["string","null"],"maxLength":2},` +
		`"tags":{"type":"array","items":{"type":"string","minLength":1}}},"required":["code","note","tags"]}`,
	`{"type":"object","properties":{"age":{"type":"integer","minimum":0,"maximum":130},"t":{"type":"number","exclusiveMinimum":-273.15,"maximum":-200},` +
		`"big":{"type":["integer","null"],"minimum":1000000},"ns":{"type":"array","items":{"type":"integer","minimum":-3,"exclusiveMaximum":4}}},` +
		`"required":["age","t","big","ns"]}`,
}

// TestGeneratedTextsValidate is the property: every text a random walk of
// the automaton completes parses as JSON and validates against the schema.
func TestGeneratedTextsValidate(t *testing.T) {
	n := 300
	if testing.Short() {
		n = 50
	}
	for si, schema := range fuzzSchemas {
		g := mustCompile(t, schema)
		var sc any
		if err := json.Unmarshal([]byte(schema), &sc); err != nil {
			t.Fatal(err)
		}
		rng := rand.New(rand.NewPCG(uint64(si), 7))
		for i := 0; i < n; i++ {
			out := generate(t, g, rng)
			var v any
			if err := json.Unmarshal(out, &v); err != nil {
				t.Fatalf("schema %d: %q does not parse: %v", si, out, err)
			}
			if err := validate(v, sc); err != nil {
				t.Fatalf("schema %d: %q does not validate: %v", si, out, err)
			}
		}
	}
	g := Any()
	rng := rand.New(rand.NewPCG(99, 7))
	for i := 0; i < n; i++ {
		out := generate(t, g, rng)
		var v map[string]any
		if err := json.Unmarshal(out, &v); err != nil {
			t.Fatalf("json_object: %q is not an object: %v", out, err)
		}
	}
}

// FuzzFeed feeds arbitrary bytes: whatever a State accepts and calls
// complete parses and validates.
func FuzzFeed(f *testing.F) {
	f.Add(0, []byte(`{"name":"x","age":1,"tags":["a"],"addr":{"zip":"0042"}}`))
	f.Add(1, []byte(`{"a":[1,{"b":null}],"c":"\u0041"}`))
	f.Add(3, []byte(`[{"id":1,"v":true}]`))
	grammars := make([]*Grammar, len(fuzzSchemas))
	schemas := make([]any, len(fuzzSchemas))
	for i, s := range fuzzSchemas {
		grammars[i] = mustCompile(f, s)
		_ = json.Unmarshal([]byte(s), &schemas[i])
	}
	f.Fuzz(func(t *testing.T, which int, text []byte) {
		i := int(uint(which) % uint(len(grammars)))
		s := grammars[i].Start()
		for j, b := range text {
			if !s.Feed(b) {
				text = text[:j]
				break
			}
		}
		if !s.CanEnd() {
			return
		}
		var v any
		if err := json.Unmarshal(text, &v); err != nil {
			t.Fatalf("accepted %q, which does not parse: %v", text, err)
		}
		if err := validate(v, schemas[i]); err != nil {
			t.Fatalf("accepted %q, which does not validate: %v", text, err)
		}
	})
}

// TestMarshalledValuesAccepted: encoding/json's compact encodings of
// values that validate are texts of the grammar (the automaton does not
// refuse valid output it could produce).
func TestMarshalledValuesAccepted(t *testing.T) {
	g := mustCompile(t, nested)
	vals := []map[string]any{
		{"name": "a\tb<", "age": 7, "tags": []string{"b\"c"}, "addr": map[string]any{"zip": "0042", "city": "Ünïcødé"}},
		{"name": "", "age": -12, "tags": []string{"a", "ü<>"}, "addr": map[string]any{"zip": "0042"}, "score": 2.5, "kind": nil, "meta": map[string]any{"x": []any{1, "y"}}},
	}
	for _, v := range vals {
		var buf bytes.Buffer
		e := json.NewEncoder(&buf)
		e.SetEscapeHTML(false)
		_ = e.Encode(v)
		text := strings.TrimSpace(buf.String())
		if !accepts(g, text) {
			t.Errorf("refused %s", text)
		}
	}
}

func TestToolCalls(t *testing.T) {
	weather := mustCompile(t, `{"type":"object","properties":{"city":{"type":"string"},"unit":{"enum":["c","f"]}},"required":["city"]}`)
	noArgs := mustCompile(t, `{"type":"object","properties":{},"additionalProperties":false}`)
	tools := []Tool{{Name: "get_weather", Params: weather}, {Name: "get", Params: noArgs}}
	single := ToolCalls(tools, false, false)
	par := ToolCalls(tools, true, false)
	auto := ToolCalls(tools, false, true)

	text := `{"name":"get_weather","arguments":{"city":"Paris","unit":"c"}}`
	if !accepts(single, text) {
		t.Fatalf("refused %s", text)
	}
	for _, bad := range []string{
		`{"name":"get_weather","arguments":{}}`, `{"name":"nope","arguments":{}}`,
		`{"name":"get","arguments":{"x":1}}`, `[` + text + `]`,
	} {
		if accepts(single, bad) {
			t.Errorf("accepted %s", bad)
		}
	}
	ptext := `[` + text + `, {"name":"get","arguments":{}}]`
	if !accepts(par, ptext) || accepts(par, `[]`) || !accepts(par, text) {
		t.Errorf("parallel: %s or a single call refused, or [] accepted", ptext)
	}
	autoPar := ToolCalls(tools, true, true)
	if !accepts(autoPar, text) || !accepts(autoPar, ptext) || !accepts(autoPar, "x[") || accepts(autoPar, "[x") {
		t.Error("auto with parallel calls: a call, an array of calls or text refused")
	}
	p := NewCallParser(par)
	for i := 0; i < len(ptext); i += 5 {
		p.Write([]byte(ptext[i:min(i+5, len(ptext))]))
	}
	calls := p.Calls()
	if len(calls) != 2 || calls[0].Name != "get_weather" || string(calls[0].Args) != `{"city":"Paris","unit":"c"}` ||
		calls[1].Name != "get" || string(calls[1].Args) != `{}` || p.Text() {
		t.Errorf("parsed %+v", calls)
	}
	// auto: a call or text, by the first byte.
	if !accepts(auto, text) || !accepts(auto, "Hello {") || !accepts(auto, " plain") || accepts(auto, `{"name":"x"`) {
		t.Error("auto: wrong choice between a call and text")
	}
	p = NewCallParser(auto)
	p.Write([]byte("Sure."))
	if !p.Text() || len(p.Calls()) != 0 {
		t.Error("auto text read as a call")
	}
	// Every random call parses, validates and reads back.
	var sc any
	_ = json.Unmarshal([]byte(`{"type":"object","properties":{"city":{"type":"string"},"unit":{"enum":["c","f"]}},"required":["city"]}`), &sc)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 200; i++ {
		out := generate(t, par, rng)
		type call struct {
			Name string          `json:"name"`
			Args json.RawMessage `json:"arguments"`
		}
		var v []call
		if bytes.HasPrefix(bytes.TrimSpace(out), []byte("{")) {
			v = make([]call, 1)
			if err := json.Unmarshal(out, &v[0]); err != nil {
				t.Fatalf("%q: %v", out, err)
			}
		} else if err := json.Unmarshal(out, &v); err != nil {
			t.Fatalf("%q: %v", out, err)
		}
		p := NewCallParser(par)
		p.Write(out)
		if len(p.Calls()) != len(v) {
			t.Fatalf("%q: parsed %d calls, want %d", out, len(p.Calls()), len(v))
		}
		for j, c := range p.Calls() {
			if c.Name != v[j].Name || !bytes.Equal(c.Args, v[j].Args) {
				t.Fatalf("%q: call %d read as %s %s", out, j, c.Name, c.Args)
			}
			if c.Name == "get_weather" {
				var a any
				_ = json.Unmarshal(c.Args, &a)
				if err := validate(a, sc); err != nil {
					t.Fatalf("%s: %v", c.Args, err)
				}
			}
		}
	}
}
