package bench

import (
	"errors"
	"io"
	"slices"
	"strings"
	"testing"
	"testing/iotest"
)

func readEvents(t *testing.T, r io.Reader) ([]string, error) {
	t.Helper()
	s := newSSEReader(r)
	var out []string
	for range 1000 {
		d, err := s.Next()
		if err != nil {
			return out, err
		}
		out = append(out, string(d))
	}
	t.Fatal("no end")
	return nil, nil
}

func TestSSEReader(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		want     []string
	}{
		{"lf", "data: a\n\ndata: b\n\n", []string{"a", "b"}},
		{"crlf", "data: a\r\n\r\ndata: b\r\n\r\n", []string{"a", "b"}},
		{"cr", "data: a\r\rdata: b\r\r", []string{"a", "b"}},
		{"no space after colon", "data:a\n\n", []string{"a"}},
		{"only one space trimmed", "data:  a\n\n", []string{" a"}},
		{"multi-line data joined", "data: a\ndata: b\n\n", []string{"a\nb"}},
		{"comments and other fields ignored", ": ping\nevent: x\nid: 3\nretry: 10\ndata: a\n\n", []string{"a"}},
		{"event without data skipped", "event: x\n\ndata: a\n\n", []string{"a"}},
		{"blank lines between events", "\n\n\ndata: a\n\n\n\ndata: b\n\n", []string{"a", "b"}},
		{"last event without blank line", "data: a\n\ndata: b", []string{"a", "b"}},
		{"empty data is an event", "data:\n\n", []string{""}},
		{"field without colon", "data\n\n", []string{""}},
		{"unknown field without colon", "foo\ndata: a\n\n", []string{"a"}},
		{"done", "data: x\n\ndata: [DONE]\n\n", []string{"x", "[DONE]"}},
		{"empty stream", "", nil},
	} {
		got, err := readEvents(t, strings.NewReader(tc.in))
		if err != io.EOF || !slices.Equal(got, tc.want) {
			t.Errorf("%s: got %q, %v; want %q, EOF", tc.name, got, err, tc.want)
		}
		// The same, one byte at a time: no event depends on read sizes.
		got, err = readEvents(t, iotest.OneByteReader(strings.NewReader(tc.in)))
		if err != io.EOF || !slices.Equal(got, tc.want) {
			t.Errorf("%s, byte by byte: got %q, %v", tc.name, got, err)
		}
	}
}

func TestSSEReaderBounds(t *testing.T) {
	long := "data: " + strings.Repeat("x", maxEventBytes+1) + "\n\n"
	if _, err := readEvents(t, strings.NewReader(long)); !errors.Is(err, errEventTooLarge) {
		t.Fatalf("long line: %v", err)
	}
	var b strings.Builder
	for range 5 {
		b.WriteString("data: " + strings.Repeat("y", maxEventBytes/4) + "\n")
	}
	s := newSSEReader(strings.NewReader(b.String() + "\n"))
	if _, err := s.Next(); !errors.Is(err, errEventTooLarge) {
		t.Fatalf("many data lines: %v", err)
	}
	if _, err := s.Next(); !errors.Is(err, errEventTooLarge) {
		t.Fatalf("the error does not stick: %v", err)
	}
	boom := errors.New("boom")
	got, err := readEvents(t, io.MultiReader(strings.NewReader("data: a\n\ndata: b"), iotest.ErrReader(boom)))
	if !errors.Is(err, boom) || !slices.Equal(got, []string{"a"}) {
		t.Fatalf("read error: %q, %v", got, err)
	}
}

func FuzzSSEReader(f *testing.F) {
	f.Add("data: a\r\n\r\ndata:b\rdata: c\n\n: x\n")
	f.Fuzz(func(t *testing.T, in string) {
		s := newSSEReader(strings.NewReader(in))
		total := 0
		for range len(in) + 2 {
			d, err := s.Next()
			if err != nil {
				return
			}
			total += len(d)
			if total > len(in) {
				t.Fatalf("events longer than the input")
			}
		}
		t.Fatalf("more events than bytes")
	})
}

func BenchmarkSSEReader(b *testing.B) {
	var sb strings.Builder
	for i := range 1000 {
		sb.WriteString(`data: {"id":"cmpl-1","object":"text_completion","choices":[{"index":0,"text":"t` + strings.Repeat("x", i%7) + ` ","finish_reason":null}]}` + "\n\n")
	}
	in := sb.String()
	b.SetBytes(int64(len(in)))
	for b.Loop() {
		s := newSSEReader(strings.NewReader(in))
		for {
			if _, err := s.Next(); err != nil {
				break
			}
		}
	}
}
