package proxy

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"slices"
	"strings"
	"testing"
)

func TestConfigValidate(t *testing.T) {
	ok := DefaultConfig()
	ok.Prefill, ok.Decode = []string{"http://127.0.0.1:8001"}, []string{"http://127.0.0.1:8002/"}
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
	many := make([]string, MaxEngines+1)
	for i := range many {
		many[i] = fmt.Sprintf("http://h:%d", i+1)
	}
	cases := map[string]func(c *Config){
		"Prefill: at least one":  func(c *Config) { c.Prefill = nil },
		"Decode: at least one":   func(c *Config) { c.Decode = nil },
		"Decode[0]":              func(c *Config) { c.Decode = []string{"ftp://x:1"} },
		"listed twice":           func(c *Config) { c.Prefill = []string{"http://a:1", "http://A:01/"} },
		"at most 256":            func(c *Config) { c.Decode = many },
		"Route":                  func(c *Config) { c.Route.StaleAfter = 0 },
		"MaxRequestBytes":        func(c *Config) { c.MaxRequestBytes = 0 },
		"MaxDecodeAttempts":      func(c *Config) { c.MaxDecodeAttempts = -1 },
		"AbortTimeout":           func(c *Config) { c.AbortTimeout = 0 },
		"ScrapeInterval":         func(c *Config) { c.ScrapeInterval = -1 },
		"MaxPrefillAttempts and": func(c *Config) { c.MaxPrefillAttempts = MaxEngines + 1 },
	}
	for want, f := range cases {
		c := ok
		f(&c)
		err := c.Validate()
		if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: Validate = %v", want, err)
		}
		if _, err := New(c); !errors.Is(err, ErrConfig) {
			t.Errorf("%s: New = %v", want, err)
		}
	}
}

func TestParseEngineURL(t *testing.T) {
	good := map[string]string{
		"http://127.0.0.1:8000":  "http://127.0.0.1:8000",
		" http://Host:080/ ":     "http://host:80",
		"https://x":              "https://x:443",
		"http://x":               "http://x:80",
		"http://[::1]:9":         "http://[::1]:9",
		"http://[fe80::1%25]:90": "",
	}
	for in, want := range good {
		got, err := ParseEngineURL(in)
		if want == "" {
			if err == nil {
				t.Errorf("ParseEngineURL(%q) = %q, want an error", in, got)
			}
			continue
		}
		if err != nil || got != want {
			t.Errorf("ParseEngineURL(%q) = %q, %v, want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"", "127.0.0.1:8000", "http://", "http://x:1/v1", "http://x:1?a=b", "http://u@x:1",
		"http://x:0", "http://x:99999", "ftp://x:1", "http://x:1#f", "::"} {
		if got, err := ParseEngineURL(in); err == nil {
			t.Errorf("ParseEngineURL(%q) = %q, want an error", in, got)
		}
	}
}

func TestJSONObject(t *testing.T) {
	o := mustObject(t, ` {"b":1, "a" : [1, 2] ,"b":{"x":null},"c":"\u00e9\"<"} `)
	if got := string(o.appendJSON(nil)); got != `{"b":{"x":null},"a":[1, 2],"c":"\u00e9\"<"}` {
		t.Errorf("round trip %s", got)
	}
	if !slices.Equal(keys(o), []string{"b", "a", "c"}) {
		t.Errorf("keys %v", keys(o))
	}
	o.del("a")
	o.del("zz")
	o.set("d", json.RawMessage("true"))
	if got := string(o.appendJSON(nil)); got != `{"b":{"x":null},"c":"\u00e9\"<","d":true}` {
		t.Errorf("after edits %s", got)
	}
	esc := mustObject(t, `{"a\u0062":{"x":"}"},"\u007f":[1,{"]":2}]}`)
	if esc.get("ab") == nil || string(esc.get("\x7f")) != `[1,{"]":2}]` ||
		string(esc.appendJSON(nil)) != `{"a\u0062":{"x":"}"},"\u007f":[1,{"]":2}]}` {
		t.Errorf("escaped keys: %q -> %s", keys(esc), esc.appendJSON(nil))
	}
	if o, err := parseObject([]byte(" {} ")); err != nil || len(o) != 0 {
		t.Errorf("empty object: %v, %v", o, err)
	}
	for _, bad := range []string{"", "[]", "{", `{"a":}`, `{"a":1}x`, `{"a":1,}`, `"s"`, `{1:2}`} {
		if _, err := parseObject([]byte(bad)); err == nil {
			t.Errorf("parseObject(%q) succeeded", bad)
		}
	}
	body := []byte(`{"id":"x","usage":{"prompt_tokens":3,"prompt_tokens_details":null}}`)
	got, ok := withCachedTokens(body, 5)
	if !ok || string(got) != `{"id":"x","usage":{"prompt_tokens":3,"prompt_tokens_details":{"cached_tokens":5}}}` {
		t.Errorf("withCachedTokens = %s, %v", got, ok)
	}
	// The value is spliced in: everything else passes as D wrote it.
	for in, want := range map[string]string{
		`{"usage":{}}`:                             `{"usage":{"prompt_tokens_details":{"cached_tokens":5}}}`,
		`{"usage": {"a": 1 } , "z":2}`:             `{"usage": {"a": 1 ,"prompt_tokens_details":{"cached_tokens":5}} , "z":2}`,
		`{"usage":{"prompt_tokens_details": { }}}`: `{"usage":{"prompt_tokens_details": { "cached_tokens":5}}}`,
		`{"usage":{"prompt_tokens_details":{"x":[1,{"cached_tokens":0}]}}}`:       `{"usage":{"prompt_tokens_details":{"x":[1,{"cached_tokens":0}],"cached_tokens":5}}}`,
		`{"usage":{"prompt_tokens_details":{"cached_tokens": 16 ,"y":1}}}`:        `{"usage":{"prompt_tokens_details":{"cached_tokens": 5 ,"y":1}}}`,
		`{"usage":{"x":1},"usage":{"prompt_tokens_details":{"cached_tokens":1}}}`: `{"usage":{"x":1},"usage":{"prompt_tokens_details":{"cached_tokens":5}}}`,
	} {
		if got, ok := withCachedTokens([]byte(in), 5); !ok || string(got) != want {
			t.Errorf("withCachedTokens(%s) = %s, %v, want %s", in, got, ok, want)
		}
	}
	// D's answer is not validated first: a broken one must not break the
	// proxy (it passes on, broken).
	for _, b := range []string{`{"`, `{"a"`, `{"a":`, `{"usage":{`, `{"usage":{"prompt_tokens_details":{"cached_tokens":5`, `{"usage" "x"}`, `{1:2}`} {
		withCachedTokens([]byte(b), 5)
	}
	for _, b := range []string{`{"usage":null}`, `[1]`, `{"usage":{"prompt_tokens_details":7}}`} {
		if got, ok := withCachedTokens([]byte(b), 5); ok || string(got) != b {
			t.Errorf("withCachedTokens(%s) = %s, %v: want it unchanged", b, got, ok)
		}
	}
	if n, ok := cachedTokens(mustObject(t, `{"usage":{"prompt_tokens_details":{"cached_tokens":9}}}`)); !ok || n != 9 {
		t.Errorf("cachedTokens = %d, %v", n, ok)
	}
	if _, ok := cachedTokens(mustObject(t, `{"usage":{"prompt_tokens_details":{"cached_tokens":"9"}}}`)); ok {
		t.Error("cachedTokens of a string")
	}
}

func TestEventReader(t *testing.T) {
	in := "data: a\n\n\n: c\ndata: b\r\n\r\ndata: [DONE]\n\ndata: tail"
	er := newEventReader(strings.NewReader(in), 64)
	var got []string
	for {
		ev, err := er.next()
		if len(ev) > 0 {
			got = append(got, string(ev))
		}
		if err != nil {
			if !errors.Is(err, io.EOF) {
				t.Fatal(err)
			}
			break
		}
	}
	want := []string{"data: a\n\n", ": c\ndata: b\r\n\r\n", "data: [DONE]\n\n", "data: tail"}
	if !slices.Equal(got, want) {
		t.Errorf("events %q, want %q", got, want)
	}
	if d := eventData([]byte(": c\ndata: b\r\n\r\n")); string(d) != "b" {
		t.Errorf("eventData = %q", d)
	}
	long := "data: " + strings.Repeat("x", 40000) + "\n\n"
	if _, err := newEventReader(strings.NewReader(long), 30000).next(); !errors.Is(err, errEventTooLong) {
		t.Errorf("a 40 kB line with a 30 kB bound: %v", err)
	}
	if ev, err := newEventReader(strings.NewReader(long), 50000).next(); err != nil || len(ev) != len(long) {
		t.Errorf("a 40 kB line with a 50 kB bound: %d, %v", len(ev), err)
	}
	ev := rewriteUsageEvent([]byte(`data: {"choices":[],"usage":{"prompt_tokens":1}}`+"\n\n"), 4)
	if string(ev) != `data: {"choices":[],"usage":{"prompt_tokens":1,"prompt_tokens_details":{"cached_tokens":4}}}`+"\n\n" {
		t.Errorf("rewritten %q", ev)
	}
	for _, same := range []string{"data: [DONE]\n\n", `data: {"usage":null}` + "\n\n", ": usage\n\n"} {
		if got := rewriteUsageEvent([]byte(same), 4); string(got) != same {
			t.Errorf("rewriteUsageEvent(%q) = %q", same, got)
		}
	}
}

func TestParseLoad(t *testing.T) {
	text := `# HELP vllm:num_requests_waiting Number of requests waiting.
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{model_name="m {odd} \"q\""} 3
vllm:num_requests_waiting{model_name="n"} 2 1700000000
vllm:kv_cache_usage_perc{model_name="m"} 0.5
vllm:kv_cache_usage_perc{model_name="n"} 0.75
vllm:kv_cache_usage_perc{model_name="broken" 9
vllm:num_requests_waiting NaN
vllm:num_requests_running 99
garbage
`
	l, ok := parseLoad([]byte(text))
	if !ok || l.waiting != 5 || l.kvUsage != 0.75 {
		t.Errorf("parseLoad = %+v, %v", l, ok)
	}
	if _, ok := parseLoad([]byte("other 1\n")); ok {
		t.Error("parseLoad found metrics in text without them")
	}
}

func FuzzParseObject(f *testing.F) {
	for _, s := range []string{`{"a":1,"b":[1,{"c":null}],"a":"x"}`, `{}`, `{"usage":{"prompt_tokens_details":{}}}`, `[`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		// Any body, valid or not: withCachedTokens must not fail, and
		// keeps a valid one valid, with the count spliced in.
		if r, ok := withCachedTokens(b, 3); ok && json.Valid(b) {
			ro, err := parseObject(r)
			if err != nil {
				t.Fatalf("withCachedTokens wrote invalid JSON %q", r)
			}
			if n, ok := cachedTokens(ro); !ok || n != 3 {
				t.Fatalf("withCachedTokens(%q) = %q: cached_tokens reads %d, %v", b, r, n, ok)
			}
		} else if !ok && string(r) != string(b) {
			t.Fatalf("withCachedTokens(%q) = %q, false: changed the body", b, r)
		}
		o, err := parseObject(b)
		if err != nil {
			return
		}
		out := o.appendJSON(nil)
		var want, got map[string]any
		if json.Unmarshal(b, &want) != nil {
			t.Fatalf("parseObject accepted what encoding/json refuses: %q", b)
		}
		if err := json.Unmarshal(out, &got); err != nil {
			t.Fatalf("appendJSON wrote invalid JSON %q: %v", out, err)
		}
		wb, _ := json.Marshal(want)
		gb, _ := json.Marshal(got)
		if string(wb) != string(gb) {
			t.Fatalf("round trip changed the object: %s -> %s", wb, gb)
		}
	})
}

func FuzzEventStream(f *testing.F) {
	f.Add([]byte("data: {\"usage\":{}}\n\ndata: [DONE]\n\n"))
	f.Add([]byte("\n\n\r\n: x\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		er := newEventReader(strings.NewReader(string(b)), 64)
		for range len(b) + 2 {
			ev, err := er.next()
			if len(ev) > 0 {
				rewriteUsageEvent(ev, 1)
			}
			if err != nil {
				return
			}
		}
		t.Fatal("the reader did not end")
	})
}

func TestEventReaderReady(t *testing.T) {
	for in, want := range map[string]bool{
		"data: a\n\ndata: b\n\n":     true,
		"data: a\n\ndata: b\r\n\r\n": true,
		"data: a\n\ndata: b\n\r\n":   true,
		"data: a\n\ndata: b\n":       false,
		"data: a\n\n\n\n":            false, // stray blank lines are no event
		"data: a\n\n: c\ndata: b":    false,
	} {
		er := newEventReader(strings.NewReader(in), 64)
		if _, err := er.next(); err != nil {
			t.Fatal(err)
		}
		if got := er.ready(); got != want {
			t.Errorf("ready after the first event of %q = %v", in, got)
		}
		er.release()
	}
}

func TestIsEventStream(t *testing.T) {
	for ct, want := range map[string]bool{
		"text/event-stream": true, "Text/Event-Stream; charset=utf-8": true, " text/event-stream ;x=y": true,
		"application/json": false, "": false, "text/event-streams": false, "text/plain; text/event-stream": false,
	} {
		if got := isEventStream(ct); got != want {
			t.Errorf("isEventStream(%q) = %v", ct, got)
		}
		if mt, _, _ := mime.ParseMediaType(ct); (mt == "text/event-stream") != want {
			t.Errorf("%q: mime.ParseMediaType reads %q", ct, mt)
		}
	}
}
