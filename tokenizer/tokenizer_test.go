package tokenizer

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestEncodeDecode(t *testing.T) {
	for _, s := range []string{"", "hello", "héllo wörld", "日本語", "\x00\xff\xfe", "a\nb"} {
		toks := Encode(s)
		if len(toks) != len(s) {
			t.Fatalf("Encode(%q): %d tokens, want %d", s, len(toks), len(s))
		}
		for i, tok := range toks {
			if tok != int32(s[i]) {
				t.Fatalf("Encode(%q)[%d] = %d, want %d", s, i, tok, s[i])
			}
		}
		if got := Decode(toks); got != s {
			t.Fatalf("Decode(Encode(%q)) = %q", s, got)
		}
	}
}

func TestDecodeDropsSpecials(t *testing.T) {
	got := Decode([]int32{'a', EOS, 'b', -1, VocabSize, 1 << 20, 'c'})
	if got != "abc" {
		t.Fatalf("Decode = %q, want %q", got, "abc")
	}
}

// runStream feeds text byte by byte (with an optional EOS after each byte
// when eosEvery) and returns the deltas, the flush and whether it stopped.
func runStream(st *Stream, toks []int32) (deltas []string, flush string, stopped bool) {
	for _, tok := range toks {
		d, s := st.Add(tok)
		if d != "" {
			deltas = append(deltas, d)
		}
		if s {
			stopped = true
			break
		}
	}
	return deltas, st.Flush(), stopped
}

func TestStream(t *testing.T) {
	tests := []struct {
		name        string
		text        string
		stops       []string
		includeStop bool
		deltas      []string
		flush       string
		stopped     bool
		stopIndex   int
	}{
		{name: "no stops", text: "abc", deltas: []string{"a", "b", "c"}, stopIndex: -1},
		{name: "multibyte held until complete", text: "a€b", deltas: []string{"a", "€", "b"}, stopIndex: -1},
		{name: "4-byte rune", text: "😀!", deltas: []string{"😀", "!"}, stopIndex: -1},
		{name: "incomplete tail flushed", text: "a\xe2\x82", deltas: []string{"a"}, flush: "\xe2\x82", stopIndex: -1},
		{name: "invalid sequence emitted at once", text: "\xe2a", deltas: []string{"\xe2a"}, stopIndex: -1},
		{name: "invalid second byte", text: "\xe0\x80", deltas: []string{"\xe0\x80"}, stopIndex: -1},
		{name: "lone continuation", text: "\x80x", deltas: []string{"\x80", "x"}, stopIndex: -1},
		{name: "stop excluded", text: "hello END world", stops: []string{"END"},
			deltas: []string{"h", "e", "l", "l", "o", " "}, stopped: true, stopIndex: 0},
		{name: "stop included", text: "hello END world", stops: []string{"END"}, includeStop: true,
			deltas: []string{"h", "e", "l", "l", "o", " ", "E", "N", "D"}, stopped: true, stopIndex: 0},
		{name: "partial stop released", text: "ENx", stops: []string{"END"},
			deltas: []string{"ENx"}, stopIndex: -1},
		{name: "partial stop flushed", text: "abEN", stops: []string{"END"},
			deltas: []string{"a", "b"}, flush: "EN", stopIndex: -1},
		{name: "overlapping prefix", text: "aab", stops: []string{"ab"},
			deltas: []string{"a"}, stopped: true, stopIndex: 0},
		{name: "kmp border", text: "abababc!", stops: []string{"ababc"},
			deltas: []string{"ab"}, stopped: true, stopIndex: 0},
		{name: "first ending wins", text: "xabcd", stops: []string{"abcd", "bc"},
			deltas: []string{"x", "a"}, stopped: true, stopIndex: 1},
		{name: "tie goes to list order", text: "xabc", stops: []string{"bc", "abc"},
			deltas: []string{"x", "a"}, stopped: true, stopIndex: 0},
		{name: "stop at start", text: "STOPafter", stops: []string{"STOP"},
			stopped: true, stopIndex: 0},
		{name: "empty stop ignored", text: "ab", stops: []string{"", "b"},
			deltas: []string{"a"}, stopped: true, stopIndex: 1},
		{name: "multibyte stop", text: "a→b", stops: []string{"→"},
			deltas: []string{"a"}, stopped: true, stopIndex: 0},
		{name: "newline stop", text: "line1\nline2", stops: []string{"\n"},
			deltas: []string{"l", "i", "n", "e", "1"}, stopped: true, stopIndex: 0},
		{name: "stop prefix inside rune", text: "é", stops: []string{"\xa9x"},
			flush: "é", stopIndex: -1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			st := NewStream(tc.stops, tc.includeStop)
			deltas, flush, stopped := runStream(st, Encode(tc.text))
			if strings.Join(deltas, "|") != strings.Join(tc.deltas, "|") || len(deltas) != len(tc.deltas) {
				t.Errorf("deltas = %q, want %q", deltas, tc.deltas)
			}
			if flush != tc.flush {
				t.Errorf("flush = %q, want %q", flush, tc.flush)
			}
			if stopped != tc.stopped || st.Stopped() != tc.stopped {
				t.Errorf("stopped = %v, want %v", stopped, tc.stopped)
			}
			if st.StopIndex() != tc.stopIndex {
				t.Errorf("StopIndex = %d, want %d", st.StopIndex(), tc.stopIndex)
			}
		})
	}
}

func TestStreamAfterStop(t *testing.T) {
	st := NewStream([]string{"x"}, false)
	if d, s := st.Add('x'); d != "" || !s {
		t.Fatalf("Add(x) = %q, %v", d, s)
	}
	if d, s := st.Add('y'); d != "" || !s {
		t.Fatalf("Add after stop = %q, %v; want \"\", true", d, s)
	}
	if f := st.Flush(); f != "" {
		t.Fatalf("Flush after stop = %q", f)
	}
}

func TestStreamSpecialTokensAreTransparent(t *testing.T) {
	// A stop string spanning a special token still matches: specials are
	// not part of the text (skip_special_tokens).
	st := NewStream([]string{"ab"}, false)
	deltas, _, stopped := runStream(st, []int32{'x', 'a', EOS, -5, 'b'})
	if !stopped || strings.Join(deltas, "") != "x" {
		t.Fatalf("deltas %q stopped %v", deltas, stopped)
	}
}

func TestZeroStream(t *testing.T) {
	var st Stream
	if d, s := st.Add('q'); d != "q" || s {
		t.Fatalf("zero Stream Add = %q, %v", d, s)
	}
	if st.StopIndex() != -1 {
		t.Fatalf("StopIndex = %d", st.StopIndex())
	}
}

// TestStreamHoldBound checks that the held-back text never exceeds the
// longest stop string plus an incomplete UTF-8 tail.
func TestStreamHoldBound(t *testing.T) {
	stops := []string{"aaaaaaaa", "ab"}
	st := NewStream(stops, false)
	for i := 0; i < 1000; i++ {
		st.Add('a')
		if len(st.pending) > 8-1+utf8.UTFMax-1 {
			t.Fatalf("pending %d bytes", len(st.pending))
		}
	}
}

// reference computes the expected output naively: decode everything, find
// the earliest byte at which any stop string ends (ties by list order).
func reference(toks []int32, stops []string, includeStop bool) (out string, stopIndex int) {
	text := Decode(toks)
	for end := 1; end <= len(text); end++ {
		for i, s := range stops {
			if s != "" && strings.HasSuffix(text[:end], s) {
				if includeStop {
					return text[:end], i
				}
				return text[:end-len(s)], i
			}
		}
	}
	return text, -1
}

// checkNoSplit fails if a boundary between deltas falls strictly inside a
// valid multi-byte UTF-8 sequence of the full output.
func checkNoSplit(t *testing.T, out string, boundaries []int) {
	inside := make([]bool, len(out)+1)
	for i := 0; i < len(out); {
		r, n := utf8.DecodeRuneInString(out[i:])
		if r != utf8.RuneError || n > 1 {
			for j := i + 1; j < i+n; j++ {
				inside[j] = true
			}
		}
		i += n
	}
	for _, b := range boundaries {
		if inside[b] {
			t.Fatalf("delta boundary at %d splits a rune of %q", b, out)
		}
	}
}

func FuzzStream(f *testing.F) {
	f.Add([]byte("hello END world"), "END", "", false)
	f.Add([]byte("a€b😀c"), "€b", "c", true)
	f.Add([]byte("\xe2\x82\xac\xe2\x82"), "\x82", "x", false)
	f.Add([]byte("abababc"), "ababc", "bab", false)
	f.Fuzz(func(t *testing.T, data []byte, stop1, stop2 string, includeStop bool) {
		// Each byte is a token; 0xFF marks an EOS instead, so specials
		// appear in the sequence too.
		toks := make([]int32, len(data))
		for i, b := range data {
			toks[i] = int32(b)
			if b == 0xFF {
				toks[i] = EOS
			}
		}
		stops := []string{stop1, stop2}
		want, wantIndex := reference(toks, stops, includeStop)

		st := NewStream(stops, includeStop)
		var out strings.Builder
		var boundaries []int
		stopped := false
		for _, tok := range toks {
			d, s := st.Add(tok)
			out.WriteString(d)
			if s {
				stopped = true
				break
			}
			if d != "" {
				boundaries = append(boundaries, out.Len())
			}
		}
		out.WriteString(st.Flush())
		if out.String() != want {
			t.Fatalf("stream output %q, want %q (stops %q include %v)", out.String(), want, stops, includeStop)
		}
		if stopped != (wantIndex >= 0) || st.StopIndex() != wantIndex {
			t.Fatalf("stopped %v index %d, want index %d", stopped, st.StopIndex(), wantIndex)
		}
		checkNoSplit(t, out.String(), boundaries)
	})
}

func BenchmarkStreamAdd(b *testing.B) {
	toks := Encode(strings.Repeat("The quick brown fox jumps over the lazy dog. ", 20))
	stops := []string{"</s>", "\n\nUser:", "STOP"}
	b.ReportAllocs()
	b.SetBytes(int64(len(toks)))
	for b.Loop() {
		st := NewStream(stops, false)
		for _, tok := range toks {
			st.Add(tok)
		}
		st.Flush()
	}
}

func TestStreamSuppress(t *testing.T) {
	feed := func(st *Stream, text string, suppressFirst int) (string, bool) {
		var out []byte
		stopped := false
		for i, b := range []byte(text) {
			st.Suppress(i < suppressFirst)
			d, s := st.Add(int32(b))
			out = append(out, d...)
			if s {
				stopped = true
				break
			}
		}
		if !stopped {
			out = append(out, st.Flush()...)
		}
		return string(out), stopped
	}
	for _, tc := range []struct {
		stop, text string
		suppress   int
		want       string
		stopped    bool
	}{
		{"ab", "abxab", 2, "abx", true},    // the first match ends in a suppressed byte
		{"ab", "abxab", 0, "", true},       // no suppression: the first match stops
		{"abc", "abcd", 2, "", true},       // begins while suppressed, ends after: counts
		{"ab", "xabab", 5, "xabab", false}, // every match suppressed
		{"aa", "aaa", 2, "a", true},        // overlapping: the match ending at byte 3 counts
	} {
		got, stopped := feed(NewStream([]string{tc.stop}, false), tc.text, tc.suppress)
		if got != tc.want || stopped != tc.stopped {
			t.Errorf("stop %q text %q suppress %d: got %q stopped %v, want %q %v", tc.stop, tc.text, tc.suppress, got, stopped, tc.want, tc.stopped)
		}
	}
}

// TestStreamAddBytes: tokens of several bytes (a real vocabulary's) stop in
// their middle and hold back an incomplete UTF-8 tail, as byte tokens do.
func TestStreamAddBytes(t *testing.T) {
	st := NewStream([]string{"END"}, false)
	var out string
	for _, tok := range []string{"Hel", "lo \xc3", "\xa9 wE", "NDing"} {
		d, stopped := st.AddBytes([]byte(tok))
		out += d
		if stopped {
			break
		}
	}
	if out != "Hello é w" || !st.Stopped() || st.StopIndex() != 0 {
		t.Fatalf("output %q, stopped %v", out, st.Stopped())
	}
	st = NewStream(nil, false)
	if d, _ := st.AddBytes([]byte("a\xe2\x82")); d != "a" {
		t.Fatalf("incomplete UTF-8 not held back: %q", d)
	}
	if d, _ := st.AddBytes([]byte("\xac!")); d != "€!" {
		t.Fatalf("completed sequence: %q", d)
	}
}
